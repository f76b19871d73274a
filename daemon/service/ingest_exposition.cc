#include "daemon/service/ingest_exposition.h"

#include <atomic>
#include <cstdint>

#include "daemon/http/metric_families.h"

namespace perld::service {
namespace {

using prometheus::MetricType;

template <typename T>
double Load(const std::atomic<T>& value) {
  return static_cast<double>(value.load(std::memory_order_relaxed));
}

}  // namespace

std::vector<prometheus::MetricFamily> IngestCollector::Collect() const {
  std::vector<prometheus::MetricFamily> f;
  const auto counter = [&f](const char* name, const char* help,
                            const std::atomic<uint64_t>& value) {
    http::AddSingle(&f, name, MetricType::Counter, help, Load(value));
  };
  http::AddSingle(&f, "perld_ingest_streams_open", MetricType::Gauge, "Ingest streams open now.",
                  Load(stats_.streams_open));
  counter("perld_ingest_streams_total", "Ingest streams opened (open accepted).", stats_.streams);
  counter("perld_ingest_resumed_total", "Opens of a client id its run already knew (reconnects).",
          stats_.resumed);
  counter("perld_ingest_batches_total", "TimestampBatch messages applied.", stats_.batches);
  counter("perld_ingest_timestamps_total", "Timestamps in applied batches.", stats_.timestamps);
  counter("perld_ingest_windows_total", "WindowReport messages applied.", stats_.windows);
  counter("perld_ingest_pairs_total", "Latency/count pairs in applied windows.", stats_.pairs);
  counter("perld_ingest_duplicates_total", "Messages recognised as resent and not applied again.",
          stats_.duplicates);
  counter("perld_ingest_clients_gone_total",
          "Clients whose stream broke and that did not come back within ingest.clientTimeoutMs.",
          stats_.clients_gone);
  counter("perld_ingest_memory_waits_total",
          "Window reports that waited for the recorder (ingest.maxClientMemoryBytes).",
          stats_.memory_waits);
  counter("perld_ingest_global_memory_waits_total",
          "Window reports that waited because every client's queued windows reached "
          "ingest.maxMemoryBytes.",
          stats_.global_memory_waits);
  counter("perld_ingest_checkpoints_total",
          "Checkpoints of ingest runs committed to the state database (ingest.checkpoints).",
          stats_.checkpoints);
  counter("perld_ingest_checkpoint_pairs_total",
          "Latency/count pairs of the run totals those checkpoints wrote.",
          stats_.checkpoint_pairs);
  counter("perld_ingest_runs_resumed_total",
          "Ingest runs resumed from their checkpoint when perld started.", stats_.runs_resumed);
  http::AddSingle(
      &f, "perld_ingest_queued_window_bytes", MetricType::Gauge,
      "Windows received and not yet merged, all clients (ingest.maxMemoryBytes bounds it).",
      Load(*stats_.queued_window_bytes));
  prometheus::MetricFamily& refused =
      http::AddFamily(&f, "perld_ingest_refused_total", MetricType::Counter,
                      "Ingest messages or streams refused, by reason.");
  for (size_t i = 0; i < ingest::IngestStats::kRefusals; ++i) {
    const auto r = static_cast<ingest::IngestStats::Refusal>(i);
    http::AddSample(refused, static_cast<double>(stats_.refused(r)),
                    {{"reason", ingest::IngestStats::RefusalName(r)}});
  }
  return f;
}

}  // namespace perld::service
