// MemoryTrimmer: hands the allocator's free pages back to the kernel every
// `mallocTrimIntervalMs` (glibc's malloc_trim(0)), so a long-running
// daemon's resident memory follows what it holds, not the fragments its
// threads' malloc arenas keep after a burst.
//
// Why: glibc returns a thread arena's free memory only from the top of its
// heap; pages inside free chunks between live ones stay resident. perld's
// gRPC, ingest and HTTP threads allocate and free messages of every size
// all day, so the arenas fragment and RSS creeps up while the live heap
// stays flat (tests/bench/DAEMON.md, "Soak": +8.7% in an hour without it).
// malloc_trim walks every arena and madvises whole free pages away; it
// holds one arena's lock at a time; a whole trim took 0.13 ms on average in
// tests/bench/soak.py's smoke (perld_malloc_trim_seconds_total /
// perld_malloc_trims_total say what it costs on a given daemon).
//
// The interval is read from the current config at every wait, so a reload
// applies from the next one; 0 turns trimming off.
//
// Exported (prometheus::Collectable): perld_malloc_trims_total,
// perld_malloc_trim_seconds_total, perld_malloc_trim_max_seconds.
//
// Threads: its own ("perld-trim"); Collect and the counters from any thread.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "daemon/common/mutex.h"
#include "daemon/config/current_config.h"

namespace perld::server {

class MemoryTrimmer final : public prometheus::Collectable {
 public:
  explicit MemoryTrimmer(const config::CurrentConfig& config);
  ~MemoryTrimmer() override;  // Stop()
  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

  void Stop();

  uint64_t trims() const { return trims_.load(std::memory_order_relaxed); }
  int64_t trim_ns() const { return trim_ns_.load(std::memory_order_relaxed); }
  int64_t max_trim_ns() const { return max_trim_ns_.load(std::memory_order_relaxed); }

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  void Loop();

  const config::CurrentConfig& config_;
  std::atomic<uint64_t> trims_{0};
  std::atomic<int64_t> trim_ns_{0};      // time spent in malloc_trim, total
  std::atomic<int64_t> max_trim_ns_{0};  // the longest trim (written by its thread only)
  Mutex mu_;
  CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace perld::server
