#include "daemon/service/ingest_exposition.h"

#include <atomic>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace perld::service {
namespace {

void Family(std::string* out, const char* name, const char* type, const char* help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void Counter(std::string* out, const char* name, const char* help,
             const std::atomic<uint64_t>& value) {
  Family(out, name, "counter", help);
  absl::StrAppend(out, name, " ", value.load(std::memory_order_relaxed), "\n");
}

}  // namespace

std::string RenderIngestExposition(const ingest::IngestStats& stats) {
  std::string out;
  Family(&out, "perld_ingest_streams_open", "gauge", "Ingest streams open now.");
  absl::StrAppend(&out, "perld_ingest_streams_open ",
                  stats.streams_open.load(std::memory_order_relaxed), "\n");
  Counter(&out, "perld_ingest_streams_total", "Ingest streams opened (open accepted).",
          stats.streams);
  Counter(&out, "perld_ingest_resumed_total",
          "Opens of a client id its run already knew (reconnects).", stats.resumed);
  Counter(&out, "perld_ingest_batches_total", "TimestampBatch messages applied.", stats.batches);
  Counter(&out, "perld_ingest_timestamps_total", "Timestamps in applied batches.",
          stats.timestamps);
  Counter(&out, "perld_ingest_windows_total", "WindowReport messages applied.", stats.windows);
  Counter(&out, "perld_ingest_pairs_total", "Latency/count pairs in applied windows.", stats.pairs);
  Counter(&out, "perld_ingest_duplicates_total",
          "Messages recognised as resent and not applied again.", stats.duplicates);
  Counter(&out, "perld_ingest_clients_gone_total",
          "Clients whose stream broke and that did not come back within ingest.clientTimeoutMs.",
          stats.clients_gone);
  Counter(&out, "perld_ingest_memory_waits_total",
          "Window reports that waited for the recorder (ingest.maxClientMemoryBytes).",
          stats.memory_waits);
  Counter(&out, "perld_ingest_global_memory_waits_total",
          "Window reports that waited because every client's queued windows reached "
          "ingest.maxMemoryBytes.",
          stats.global_memory_waits);
  Counter(&out, "perld_ingest_checkpoints_total",
          "Checkpoints of ingest runs committed to the state database (ingest.checkpoints).",
          stats.checkpoints);
  Counter(&out, "perld_ingest_checkpoint_pairs_total",
          "Latency/count pairs of the run totals those checkpoints wrote.", stats.checkpoint_pairs);
  Counter(&out, "perld_ingest_runs_resumed_total",
          "Ingest runs resumed from their checkpoint when perld started.", stats.runs_resumed);
  Family(&out, "perld_ingest_queued_window_bytes", "gauge",
         "Windows received and not yet merged, all clients (ingest.maxMemoryBytes bounds it).");
  absl::StrAppend(&out, "perld_ingest_queued_window_bytes ",
                  stats.queued_window_bytes->load(std::memory_order_relaxed), "\n");
  Family(&out, "perld_ingest_refused_total", "counter",
         "Ingest messages or streams refused, by reason.");
  for (size_t i = 0; i < ingest::IngestStats::kRefusals; ++i) {
    const auto r = static_cast<ingest::IngestStats::Refusal>(i);
    absl::StrAppend(&out, "perld_ingest_refused_total{reason=\"",
                    ingest::IngestStats::RefusalName(r), "\"} ", stats.refused(r), "\n");
  }
  return out;
}

}  // namespace perld::service
