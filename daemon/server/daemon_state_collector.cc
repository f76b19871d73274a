#include "daemon/server/daemon_state_collector.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "daemon/http/metric_families.h"

namespace perld::server {
namespace {

using http::AddFamily;
using http::AddSample;
using http::AddSingle;
using prometheus::MetricType;

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

template <typename T>
double AsDouble(T value) {
  return static_cast<double>(value);
}

}  // namespace

std::vector<prometheus::MetricFamily> DaemonStateCollector::Collect() const {
  std::vector<prometheus::MetricFamily> f;
  double cpu_seconds = 0;
  int64_t resident = 0;
  if (ProcessUsage(&cpu_seconds, &resident)) {
    AddSingle(&f, "process_cpu_seconds_total", MetricType::Counter,
              "User and system CPU time of the daemon, seconds.", cpu_seconds);
    AddSingle(&f, "process_resident_memory_bytes", MetricType::Gauge,
              "Resident memory of the daemon, bytes.", AsDouble(resident));
  }
  AddSingle(&f, "perld_recorder_timestamps_total", MetricType::Counter,
            "Timestamps the recorder thread drained into windows (its rate is the drain rate).",
            AsDouble(manager_.consumed()));
  AddSingle(&f, "perld_recorder_runs_attached", MetricType::Gauge,
            "Runs attached to the recorder thread.", AsDouble(manager_.attached()));
  AddSingle(&f, "perld_recorder_outbox_windows", MetricType::Gauge,
            "Closed windows the recorder published and the dispatcher has not stored yet.",
            AsDouble(manager_.outbox_depth()));
  const runs::RunRegistry& registry = manager_.registry();
  const size_t running = registry.running();
  prometheus::MetricFamily& by_state =
      AddFamily(&f, "perld_runs", MetricType::Gauge, "Runs the daemon holds, by state.");
  AddSample(by_state, AsDouble(running), {{"state", "running"}});
  AddSample(by_state, AsDouble(registry.size() - running), {{"state", "ended"}});
  prometheus::MetricFamily& refused = AddFamily(
      &f, "perld_runs_refused_total", MetricType::Counter,
      "New runs refused, by reason: input_limit (a StartBench name or labels over a "
      "limits.* cap), running_runs (limits.maxRunningRuns), memory (limits.maxMemoryBytes).");
  for (runs::RunRefusal r :
       {runs::RunRefusal::kInputLimit, runs::RunRefusal::kRunningRuns, runs::RunRefusal::kMemory}) {
    AddSample(refused, AsDouble(manager_.refused(r)), {{"reason", runs::RunRefusalName(r)}});
  }
  const runs::RunMemoryBudget& budget = manager_.memory_budget();
  AddSingle(&f, "perld_run_memory_reserved_bytes", MetricType::Gauge,
            "Memory the running runs reserved: the worst case of each run's caps (windows and "
            "pending timestamps).",
            AsDouble(budget.reserved()));
  AddSingle(&f, "perld_run_memory_budget_bytes", MetricType::Gauge,
            "The running runs' memory budget (limits.maxMemoryBytes, or automatic); 0: none.",
            AsDouble(std::max<int64_t>(budget.limit(), 0)));
  AddSingle(&f, "perld_snapshot_store_bytes", MetricType::Gauge,
            "Estimated memory of the published windows and distributions (the snapshot store).",
            AsDouble(registry.ApproxBytes()));
  const ingest::BreakdownBudget& breakdown = ingest_runs_.breakdown_budget();
  AddSingle(&f, "perld_ingest_breakdown_bytes", MetricType::Gauge,
            "Memory of the remote clients' own distributions (Query.GetClients), all runs.",
            AsDouble(breakdown.used()));
  AddSingle(&f, "perld_ingest_breakdown_drops_total", MetricType::Counter,
            "Clients whose own distribution no longer fitted ingest.clientBreakdownMaxMemoryMB "
            "(they keep their counters).",
            AsDouble(breakdown.drops()));
  AddSingle(&f, "perld_ingest_parked_clients", MetricType::Gauge,
            "Remote clients whose next message waits for queue room (ingest.maxClientMemoryBytes "
            "or ingest.maxMemoryBytes): parked, its stream not read, no thread held.",
            AsDouble(ingest_runs_.parked_clients()));
  if (store_ != nullptr) {
    AddSingle(&f, "perld_state_sqlite_memory_bytes", MetricType::Gauge,
              "Memory SQLite holds for the state directory (page caches, statements), bytes.",
              AsDouble(state::StateStore::SqliteMemoryBytes()));
    const state::StateStore::DistributionCounts d = store_->distribution_counts();
    AddSingle(&f, "perld_state_total_segment_bytes_total", MetricType::Counter,
              "Bytes of total-segment distributions written to the state directory (a run "
              "total past its memory budget is their merge).",
              AsDouble(d.segment_bytes));
    prometheus::MetricFamily& unstored = AddFamily(
        &f, "perld_state_unstored_distributions_total", MetricType::Counter,
        "Windows stored without their distribution, by kind: total_segment (past "
        "retention.maxTotalSegmentBytesPerRun: the run's total gets no percentiles), periodic "
        "(past retention.maxWindowDistributionBytesPerRun: ranges over it are refused).");
    AddSample(unstored, AsDouble(d.segments_unstored), {{"kind", "total_segment"}});
    AddSample(unstored, AsDouble(d.windows_unstored), {{"kind", "periodic"}});
    AddSingle(&f, "perld_state_dropped_windows_total", MetricType::Counter,
              "Periodic windows the state store's write queue dropped (it was full).",
              AsDouble(store_->dropped_windows()));
  }
  if (auth_ != nullptr) {
    prometheus::MetricFamily& family =
        AddFamily(&f, "perld_auth_refused_total", MetricType::Counter,
                  "gRPC calls and HTTP requests refused by auth (README \"Security\"), by the gRPC "
                  "code they got (HTTP 401 counts as UNAUTHENTICATED, 403 as PERMISSION_DENIED).");
    AddSample(family, AsDouble(auth_->unauthenticated()), {{"code", "UNAUTHENTICATED"}});
    AddSample(family, AsDouble(auth_->permission_denied()), {{"code", "PERMISSION_DENIED"}});
  }
  if (http_ != nullptr) {
    AddSingle(&f, "perld_http_connections_open", MetricType::Gauge,
              "Connections open on the HTTP listener (at most http.maxConnections).",
              AsDouble(http_->connections_open()));
    AddSingle(&f, "perld_http_connections_total", MetricType::Counter,
              "Connections the HTTP listener accepted.", AsDouble(http_->connections_accepted()));
    AddSingle(&f, "perld_http_responses_total", MetricType::Counter,
              "Responses the HTTP listener started to write (any status).",
              AsDouble(http_->responses()));
    AddSingle(&f, "perld_http_queued_requests", MetricType::Gauge,
              "Complete HTTP requests waiting for a handler thread (at most "
              "http.maxQueuedRequests).",
              AsDouble(http_->queued()));
    prometheus::MetricFamily& family =
        AddFamily(&f, "perld_http_refused_total", MetricType::Counter,
                  "HTTP connections and requests refused or dropped, by reason: connections "
                  "(http.maxConnections, 503), queue (http.maxQueuedRequests, 503), header_timeout "
                  "(http.headerTimeoutMs), bad_request (400, 405, 413, 431, 505), write_timeout (a "
                  "client that did not read its response), tls (a failed TLS handshake).");
    for (int i = 0; i < http::HttpServerStats::kRefusals; ++i) {
      const auto reason = static_cast<http::HttpServerStats::Refusal>(i);
      AddSample(family, AsDouble(http_->refused(reason)),
                {{"reason", http::HttpServerStats::RefusalName(reason)}});
    }
  }
  if (sbp_ != nullptr) {
    const service::SbpSlots& slots = sbp_->slots();
    AddSingle(&f, "perld_sbp_slots", MetricType::Gauge,
              "SBK clients registered and holding one of sbp.maxConnections slots.",
              AsDouble(slots.in_use()));
    prometheus::MetricFamily& family =
        AddFamily(&f, "perld_sbp_slots_freed_total", MetricType::Counter,
                  "SBP registration slots freed, by why: the client closed it (closeClient), was "
                  "gone from its run (ingest.clientTimeoutMs), or its run ended.");
    for (size_t r = 0; r < service::SbpSlots::kReasons; ++r) {
      const auto reason = static_cast<service::SbpSlots::Freed>(r);
      AddSample(family, AsDouble(slots.freed(reason)),
                {{"reason", service::SbpSlots::FreedName(reason)}});
    }
    AddSingle(&f, "perld_sbp_client_failures_total", MetricType::Counter,
              "Failures SBK clients reported (SBP reportClientFailure).",
              AsDouble(sbp_->client_failures()));
  }
  if (upstream_ != nullptr) {
    const tiers::UpstreamForwarder::Counters u = upstream_->counters();
    const auto family = [&](const char* name, MetricType type, const char* help, uint64_t v) {
      AddSample(AddFamily(&f, name, type, help), AsDouble(v), {{"node", upstream_->node_id()}});
    };
    family("perld_upstream_runs_total", MetricType::Counter,
           "Runs forwarded to the parent perld (upstream.target).", u.runs);
    family("perld_upstream_streams", MetricType::Gauge,
           "Forwarded runs whose stream to the parent is still open.", u.open_streams);
    family("perld_upstream_reports_sent_total", MetricType::Counter,
           "Window reports handed to the parent's streams (a split window counts each part).",
           u.windows_sent);
    family("perld_upstream_reports_acked_total", MetricType::Counter,
           "Window reports the parent acknowledged.", u.messages_acked);
    family("perld_upstream_queued_windows", MetricType::Gauge,
           "Window messages waiting to be handed to the parent's streams.", u.queued);
    family("perld_upstream_dropped_windows_total", MetricType::Counter,
           "Windows not forwarded: upstream.maxQueuedWindows reached (runs without checkpoints), "
           "or the parent refused the run.",
           u.windows_dropped);
    family("perld_upstream_streams_restored_total", MetricType::Counter,
           "Streams to the parent continued from the state database after a restart.", u.restored);
  }
  return f;
}

}  // namespace perld::server
