#include "daemon/server/daemon_metrics.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/core/clock.h"
#include "daemon/http/prometheus_text.h"
#include "daemon/http/run_metrics.h"
#include "daemon/http/runs_exposition.h"
#include "daemon/service/ingest_exposition.h"
#include "perld/version.h"

namespace perld::server {
namespace {

using http::Labels;
using http::MetricType;
using http::PrometheusText;

// The process's CPU seconds and resident bytes from /proc/self/stat (Linux);
// false when it cannot be read.
bool ProcessUsage(double* cpu_seconds, int64_t* resident_bytes) {
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name, which is in parentheses and may hold spaces.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(text.substr(close + 2));
  std::vector<std::string> f;
  for (std::string s; fields >> s;) f.push_back(s);
  // f[0] is field 3 (state): utime is field 14, stime 15, rss 24 (pages).
  if (f.size() < 22) return false;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  *cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / ticks;
  *resident_bytes = std::stoll(f[21]) * sysconf(_SC_PAGESIZE);
  return true;
}

void Gauge(PrometheusText& out, const char* name, const char* help, const std::string& value,
           const Labels& labels = {}) {
  out.Family(name, MetricType::kGauge, help);
  out.Sample(labels, value);
}

void Counter(PrometheusText& out, const char* name, const char* help, uint64_t value) {
  out.Family(name, MetricType::kCounter, help);
  out.Sample(Labels(), absl::StrCat(value));
}

}  // namespace

DaemonMetrics::DaemonMetrics(const runs::RunManager& manager,
                             const service::IngestRuns& ingest_runs,
                             const service::IngestStats& ingest_stats,
                             const service::GrpcCallStats& grpc,
                             const service::CurrentConfig& config,
                             const tiers::UpstreamForwarder* upstream,
                             const service::CallAuth* auth, const http::HttpServerStats* http_stats,
                             const service::SbpService* sbp)
    : manager_(manager),
      ingest_runs_(ingest_runs),
      ingest_stats_(ingest_stats),
      grpc_(grpc),
      config_(config),
      upstream_(upstream),
      auth_(auth),
      http_(http_stats),
      sbp_(sbp),
      start_unix_ms_(absl::ToUnixMillis(absl::Now())),
      start_mono_ns_(MonotonicNanos()) {}

namespace {

// CPU time of the calling thread: a scrape's own work, without the time its
// thread waited for a core.
int64_t ThreadCpuNanos() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

void DaemonMetrics::Render(std::string* buffer) {
  const int64_t begin_ns = MonotonicNanos();
  const int64_t begin_cpu_ns = ThreadCpuNanos();
  http::RunsExpositionInput input;
  input.prometheus = config_.Get()->prometheus;
  input.now_unix_ms = absl::ToUnixMillis(absl::Now());
  input.channels = manager_.ChannelCounts();
  for (const auto& [id, c] : ingest_runs_.ConnectionCounts()) {
    input.connections[id] = {c.now, c.ever};
  }
  int64_t omitted = 0;
  const std::vector<http::RunMetrics> runs =
      http::SelectRunMetrics(manager_.registry(), input, &omitted);
  omitted_total_.fetch_add(static_cast<uint64_t>(omitted), std::memory_order_relaxed);
  http::PrometheusText out(std::move(*buffer));
  std::lock_guard<std::mutex> lock(render_mu_);
  if (input.prometheus.names != config::MetricNames::kSbk) {
    std::map<uint64_t, CachedRun> next;
    std::vector<const http::RunFragments*> fragments;
    for (const http::RunMetrics& run : runs) {
      RunKey key{run.events,  run.state,       run.dropped,
                 run.blocked, run.connections, run.max_connections};
      auto cached = cache_.find(run.id);
      CachedRun& entry = next[run.id];
      if (cached != cache_.end()) entry = std::move(cached->second);  // lines or capacity
      if (cached == cache_.end() || entry.key != key) {
        entry.key = std::move(key);
        http::RenderPerldRun(run, &entry.fragments);
      }
      fragments.push_back(&entry.fragments);
    }
    http::WritePerldFamilies(fragments, out);
    cache_ = std::move(next);  // runs no longer exported leave the cache
  }
  if (input.prometheus.names != config::MetricNames::kPerld) {
    http::WriteSbkRunFamilies(runs, out);
  }
  *buffer = out.Take();
  buffer->append(service::RenderIngestExposition(ingest_stats_));
  buffer->append(grpc_.Render());
  buffer->append(RenderSelf(omitted));
  scrapes_.fetch_add(1, std::memory_order_relaxed);
  last_scrape_ns_.store(MonotonicNanos() - begin_ns, std::memory_order_relaxed);
  last_scrape_cpu_ns_.store(ThreadCpuNanos() - begin_cpu_ns, std::memory_order_relaxed);
}

std::string DaemonMetrics::RenderSelf(int64_t omitted) const {
  PrometheusText out;
  Gauge(out, "perld_build_info", "perld's version, as a label; the value is 1.", "1",
        Labels().Add("version", PERLD_VERSION));
  Gauge(out, "perld_start_time_seconds", "Start of the daemon, Unix time in seconds.",
        http::FormatSampleValue(static_cast<double>(start_unix_ms_) / 1e3));
  Gauge(out, "perld_uptime_seconds", "Seconds since the daemon started.",
        http::FormatSampleValue(static_cast<double>(MonotonicNanos() - start_mono_ns_) / 1e9));
  double cpu_seconds = 0;
  int64_t resident = 0;
  if (ProcessUsage(&cpu_seconds, &resident)) {
    out.Family("process_cpu_seconds_total", MetricType::kCounter,
               "User and system CPU time of the daemon, seconds.");
    out.Sample(Labels(), http::FormatSampleValue(cpu_seconds));
    Gauge(out, "process_resident_memory_bytes", "Resident memory of the daemon, bytes.",
          absl::StrCat(resident));
  }
  Counter(out, "perld_recorder_timestamps_total",
          "Timestamps the recorder thread drained into windows (its rate is the drain rate).",
          manager_.consumed());
  Gauge(out, "perld_recorder_runs_attached", "Runs attached to the recorder thread.",
        absl::StrCat(manager_.attached()));
  Gauge(out, "perld_recorder_outbox_windows",
        "Closed windows the recorder published and the dispatcher has not stored yet.",
        absl::StrCat(manager_.outbox_depth()));
  const runs::RunRegistry& registry = manager_.registry();
  const size_t running = registry.running();
  out.Family("perld_runs", MetricType::kGauge, "Runs the daemon holds, by state.");
  out.Sample(Labels().Add("state", "running"), absl::StrCat(running));
  out.Sample(Labels().Add("state", "ended"), absl::StrCat(registry.size() - running));
  out.Family(
      "perld_runs_refused_total", MetricType::kCounter,
      "New runs refused, by reason: input_limit (a StartBench name or labels over a "
      "limits.* cap), running_runs (limits.maxRunningRuns), memory (limits.maxMemoryBytes).");
  for (runs::RunRefusal r :
       {runs::RunRefusal::kInputLimit, runs::RunRefusal::kRunningRuns, runs::RunRefusal::kMemory}) {
    out.Sample(Labels().Add("reason", runs::RunRefusalName(r)), absl::StrCat(manager_.refused(r)));
  }
  const runs::RunMemoryBudget& budget = manager_.memory_budget();
  Gauge(out, "perld_run_memory_reserved_bytes",
        "Memory the running runs reserved: the worst case of each run's caps (windows and "
        "pending timestamps).",
        absl::StrCat(budget.reserved()));
  Gauge(out, "perld_run_memory_budget_bytes",
        "The running runs' memory budget (limits.maxMemoryBytes, or automatic); 0: none.",
        absl::StrCat(std::max<int64_t>(budget.limit(), 0)));
  Gauge(out, "perld_snapshot_store_bytes",
        "Estimated memory of the published windows and distributions (the snapshot store).",
        absl::StrCat(registry.ApproxBytes()));
  Gauge(out, "perld_exporter_runs_omitted",
        "Runs left out of this scrape by prometheus.maxRuns (the oldest).", absl::StrCat(omitted));
  Counter(out, "perld_exporter_runs_omitted_total",
          "Runs left out by prometheus.maxRuns, summed over scrapes.",
          omitted_total_.load(std::memory_order_relaxed));
  Counter(out, "perld_scrapes_total", "/metrics scrapes served before this one.",
          scrapes_.load(std::memory_order_relaxed));
  Gauge(out, "perld_last_scrape_cpu_seconds",
        "CPU time the previous /metrics scrape took on its thread, seconds.",
        http::FormatSampleValue(
            static_cast<double>(last_scrape_cpu_ns_.load(std::memory_order_relaxed)) / 1e9));
  Gauge(out, "perld_last_scrape_duration_seconds",
        "Server time of the previous /metrics scrape, seconds.",
        http::FormatSampleValue(
            static_cast<double>(last_scrape_ns_.load(std::memory_order_relaxed)) / 1e9));
  const service::BreakdownBudget& breakdown = ingest_runs_.breakdown_budget();
  Gauge(out, "perld_ingest_breakdown_bytes",
        "Memory of the remote clients' own distributions (Query.GetClients), all runs.",
        absl::StrCat(breakdown.used()));
  Counter(out, "perld_ingest_breakdown_drops_total",
          "Clients whose own distribution no longer fitted ingest.clientBreakdownMaxMemoryMB "
          "(they keep their counters).",
          breakdown.drops());
  if (auth_ != nullptr) {
    out.Family("perld_auth_refused_total", MetricType::kCounter,
               "gRPC calls and HTTP requests refused by auth (README \"Security\"), by the gRPC "
               "code they got (HTTP 401 counts as UNAUTHENTICATED, 403 as PERMISSION_DENIED).");
    out.Sample(Labels().Add("code", "UNAUTHENTICATED"), absl::StrCat(auth_->unauthenticated()));
    out.Sample(Labels().Add("code", "PERMISSION_DENIED"), absl::StrCat(auth_->permission_denied()));
  }
  if (http_ != nullptr) {
    Gauge(out, "perld_http_connections_open",
          "Connections open on the HTTP listener (at most http.maxConnections).",
          absl::StrCat(http_->connections_open()));
    Counter(out, "perld_http_connections_total", "Connections the HTTP listener accepted.",
            http_->connections_accepted());
    Counter(out, "perld_http_responses_total",
            "Responses the HTTP listener started to write (any status).", http_->responses());
    Gauge(out, "perld_http_queued_requests",
          "Complete HTTP requests waiting for a handler thread (at most http.maxQueuedRequests).",
          absl::StrCat(http_->queued()));
    out.Family("perld_http_refused_total", MetricType::kCounter,
               "HTTP connections and requests refused or dropped, by reason: connections "
               "(http.maxConnections, 503), queue (http.maxQueuedRequests, 503), header_timeout "
               "(http.headerTimeoutMs), bad_request (400, 405, 413, 431, 505), write_timeout (a "
               "client that did not read its response), tls (a failed TLS handshake).");
    for (int i = 0; i < http::HttpServerStats::kRefusals; ++i) {
      const auto reason = static_cast<http::HttpServerStats::Refusal>(i);
      out.Sample(Labels().Add("reason", http::HttpServerStats::RefusalName(reason)),
                 absl::StrCat(http_->refused(reason)));
    }
  }
  if (sbp_ != nullptr) {
    const service::SbpSlots& slots = sbp_->slots();
    Gauge(out, "perld_sbp_slots",
          "SBK clients registered and holding one of sbp.maxConnections slots.",
          absl::StrCat(slots.in_use()));
    out.Family("perld_sbp_slots_freed_total", MetricType::kCounter,
               "SBP registration slots freed, by why: the client closed it (closeClient), was "
               "gone from its run (ingest.clientTimeoutMs), or its run ended.");
    for (size_t r = 0; r < service::SbpSlots::kReasons; ++r) {
      const auto reason = static_cast<service::SbpSlots::Freed>(r);
      out.Sample(Labels().Add("reason", service::SbpSlots::FreedName(reason)),
                 absl::StrCat(slots.freed(reason)));
    }
    Counter(out, "perld_sbp_client_failures_total",
            "Failures SBK clients reported (SBP reportClientFailure).", sbp_->client_failures());
  }
  if (upstream_ != nullptr) {
    const tiers::UpstreamForwarder::Counters u = upstream_->counters();
    const Labels node = Labels().Add("node", upstream_->node_id());
    const auto family = [&](const char* name, MetricType type, const char* help, uint64_t v) {
      out.Family(name, type, help);
      out.Sample(node, absl::StrCat(v));
    };
    family("perld_upstream_runs_total", MetricType::kCounter,
           "Runs forwarded to the parent perld (upstream.target).", u.runs);
    family("perld_upstream_streams", MetricType::kGauge,
           "Forwarded runs whose stream to the parent is still open.", u.open_streams);
    family("perld_upstream_reports_sent_total", MetricType::kCounter,
           "Window reports handed to the parent's streams (a split window counts each part).",
           u.windows_sent);
    family("perld_upstream_reports_acked_total", MetricType::kCounter,
           "Window reports the parent acknowledged.", u.messages_acked);
    family("perld_upstream_queued_windows", MetricType::kGauge,
           "Window messages waiting to be handed to the parent's streams.", u.queued);
    family("perld_upstream_dropped_windows_total", MetricType::kCounter,
           "Windows not forwarded: upstream.maxQueuedWindows reached (runs without checkpoints), "
           "or the parent refused the run.",
           u.windows_dropped);
    family("perld_upstream_streams_restored_total", MetricType::kCounter,
           "Streams to the parent continued from the state database after a restart.", u.restored);
  }
  return out.Take();
}

}  // namespace perld::server
