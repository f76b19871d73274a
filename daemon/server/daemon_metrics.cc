#include "daemon/server/daemon_metrics.h"

#include <time.h>

#include <utility>

#include "absl/time/clock.h"
#include "daemon/common/mutex.h"
#include "daemon/core/clock.h"
#include "daemon/http/metric_families.h"
#include "daemon/http/prometheus_text.h"
#include "daemon/http/runs_exposition.h"
#include "perld/version.h"
#if PERLD_RUNS_VIA_PROMETHEUS_CPP
#include "daemon/http/run_metric_families.h"
#endif

namespace perld::server {
namespace {

prometheus::Gauge& Gauge(prometheus::Registry& registry, const char* name, const char* help,
                         const prometheus::Labels& labels = {}) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add(labels);
}

prometheus::Counter& Counter(prometheus::Registry& registry, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

// CPU time of the calling thread: a scrape's own work, without the time its
// thread waited for a core.
int64_t ThreadCpuNanos() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

DaemonMetrics::DaemonMetrics(const runs::RunManager& manager, const ingest::RunTable& ingest_runs,
                             const ingest::IngestStats& ingest_stats,
                             const service::GrpcCallStats& grpc,
                             const config::CurrentConfig& config,
                             const tiers::UpstreamForwarder* upstream,
                             const service::CallAuth* auth, const http::HttpServerStats* http_stats,
                             const service::SbpService* sbp, const state::StateStore* store,
                             std::vector<const prometheus::Collectable*> more)
    : manager_(manager),
      ingest_runs_(ingest_runs),
      grpc_(grpc),
      config_(config),
      start_mono_ns_(MonotonicNanos()),
      ingest_(ingest_stats),
      state_(manager, ingest_runs, upstream, auth, http_stats, sbp, store),
      more_(std::move(more)),
      uptime_(Gauge(registry_, "perld_uptime_seconds", "Seconds since the daemon started.")),
      omitted_(Gauge(registry_, "perld_exporter_runs_omitted",
                     "Runs left out of this scrape by prometheus.maxRuns (the oldest).")),
      omitted_total_(Counter(registry_, "perld_exporter_runs_omitted_total",
                             "Runs left out by prometheus.maxRuns, summed over scrapes.")),
      scrapes_(
          Counter(registry_, "perld_scrapes_total", "/metrics scrapes served before this one.")),
      last_scrape_(Gauge(registry_, "perld_last_scrape_duration_seconds",
                         "Server time of the previous /metrics scrape, seconds.")),
      last_scrape_cpu_(
          Gauge(registry_, "perld_last_scrape_cpu_seconds",
                "CPU time the previous /metrics scrape took on its thread, seconds.")) {
  Gauge(registry_, "perld_build_info", "perld's version, as a label; the value is 1.",
        {{"version", PERLD_VERSION}})
      .Set(1);
  Gauge(registry_, "perld_start_time_seconds", "Start of the daemon, Unix time in seconds.")
      .Set(static_cast<double>(absl::ToUnixMillis(absl::Now())) / 1e3);
}

void DaemonMetrics::Render(std::string* buffer, Reader reader) {
  const bool scrape = reader == Reader::kScrape;
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
  MutexLock lock(render_mu_);
  omitted_.Set(static_cast<double>(omitted));
  if (scrape) omitted_total_.Increment(static_cast<double>(omitted));
  RenderRuns(runs, input.prometheus.names, buffer);
  uptime_.Set(static_cast<double>(MonotonicNanos() - start_mono_ns_) / 1e9);
  http::MetricFamilies families;
  std::vector<const prometheus::Collectable*> collectables = {&ingest_, &grpc_, &registry_,
                                                              &state_};
  collectables.insert(collectables.end(), more_.begin(), more_.end());
  http::CollectInto(collectables, &families);
  http::AppendFamiliesText(families, buffer);
  if (!scrape) return;
  scrapes_.Increment();
  last_scrape_.Set(static_cast<double>(MonotonicNanos() - begin_ns) / 1e9);
  last_scrape_cpu_.Set(static_cast<double>(ThreadCpuNanos() - begin_cpu_ns) / 1e9);
}

#if PERLD_RUNS_VIA_PROMETHEUS_CPP
// The A/B arm: perld's names through prometheus-cpp, SBK's after them.
void DaemonMetrics::RenderRuns(const std::vector<http::RunMetrics>& runs, config::MetricNames names,
                               std::string* buffer) {
  buffer->clear();
  if (names != config::MetricNames::kSbk) {
    http::AppendFamiliesText(http::RunsCollectable(runs).Collect(), buffer);
  }
  if (names != config::MetricNames::kPerld) {
    http::PrometheusText sbk;
    http::WriteSbkRunFamilies(runs, sbk);
    buffer->append(sbk.text());
  }
}
#else
void DaemonMetrics::RenderRuns(const std::vector<http::RunMetrics>& runs, config::MetricNames names,
                               std::string* buffer) {
  http::PrometheusText out(std::move(*buffer));
  if (names != config::MetricNames::kSbk) {
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
  if (names != config::MetricNames::kPerld) http::WriteSbkRunFamilies(runs, out);
  *buffer = out.Take();
}
#endif

}  // namespace perld::server
