// IngestStats: the ingest service's counters, exported on /metrics
// (perld_ingest_*). Every refusal has a reason and a counter; nothing an
// ingest stream does goes uncounted.
//
// Threads: any thread updates (relaxed atomics); readers see a consistent
// value per counter, not across counters.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

namespace perld::ingest {

class IngestStats {
 public:
  enum class Refusal {
    kMalformed,      // INVALID_ARGUMENT: malformed or inconsistent message
    kSequenceGap,    // OUT_OF_RANGE: a sequence beyond the next expected one
    kMismatch,       // FAILED_PRECONDITION: time unit, range or mode differs from the run's
    kUnknownRun,     // NOT_FOUND: must_exist or run_id, and no such run
    kMessageSize,    // INVALID_ARGUMENT: limits.maxMessageBytes
    kBatchLength,    // INVALID_ARGUMENT: ingest.maxBatchLength
    kPairs,          // INVALID_ARGUMENT: ingest.maxPairsPerReport
    kRuns,           // RESOURCE_EXHAUSTED: limits.maxRunningRuns
    kClientsPerRun,  // RESOURCE_EXHAUSTED: ingest.maxClientsPerRun
    kStreams,        // RESOURCE_EXHAUSTED: ingest.maxStreams
    kClientMemory,   // INVALID_ARGUMENT: one report over ingest.maxClientMemoryBytes
    kMemory,         // INVALID_ARGUMENT: one report over ingest.maxMemoryBytes
    kSuperseded,     // ABORTED: a newer stream of the same client took over
    kShutdown,       // UNAVAILABLE: the daemon is shutting down
    kRunEnded,       // FAILED_PRECONDITION: a reconnect to a run that ended before it closed
    kDataLoss,       // DATA_LOSS: the daemon holds less than it told the client was durable
    kInputLimit,     // INVALID_ARGUMENT: the open's names, labels or percentiles over limits.*
    kRunExists,      // ALREADY_EXISTS: must_create, and a running run of the name
    kCount
  };
  static constexpr size_t kRefusals = static_cast<size_t>(Refusal::kCount);
  // The `reason` label: "malformed", "sequence_gap", ...
  static const char* RefusalName(Refusal r);

  void Refused(Refusal r) { refused_[static_cast<size_t>(r)].fetch_add(1, kRelaxed); }
  uint64_t refused(Refusal r) const { return refused_[static_cast<size_t>(r)].load(kRelaxed); }

  std::atomic<int64_t> streams_open{0};          // gauge
  std::atomic<uint64_t> streams{0};              // streams opened (an `open` accepted)
  std::atomic<uint64_t> resumed{0};              // opens of a client id already known to the run
  std::atomic<uint64_t> batches{0};              // TimestampBatch messages applied
  std::atomic<uint64_t> timestamps{0};           // timestamps in them
  std::atomic<uint64_t> windows{0};              // WindowReport messages applied
  std::atomic<uint64_t> pairs{0};                // latency/count pairs in them
  std::atomic<uint64_t> duplicates{0};           // messages recognised as resent, not applied
  std::atomic<uint64_t> clients_gone{0};         // clients that left without a close (timed out)
  std::atomic<uint64_t> memory_waits{0};         // window pushes that waited for the recorder
  std::atomic<uint64_t> global_memory_waits{0};  // ... because of ingest.maxMemoryBytes
  std::atomic<uint64_t> checkpoints{0};          // run checkpoints committed (ingest.checkpoints)
  std::atomic<uint64_t> checkpoint_pairs{0};     // distribution entries they wrote
  std::atomic<uint64_t> runs_resumed{0};         // runs resumed from a checkpoint at start
  // Every client's windows queued and not yet merged (RemoteWindow::total_charge).
  std::shared_ptr<std::atomic<int64_t>> queued_window_bytes =
      std::make_shared<std::atomic<int64_t>>(0);

 private:
  static constexpr std::memory_order kRelaxed = std::memory_order_relaxed;
  std::array<std::atomic<uint64_t>, kRefusals> refused_{};
};

}  // namespace perld::ingest
