// RemoteWriteStats: remote write's counters, written where their events
// happen (the collector and sender threads: relaxed atomics, a mutex only
// for the per-status request counts) and exposed on /metrics as a
// prometheus::Collectable (DaemonMetrics collects it with the daemon's own
// families):
//   perld_remote_write_samples_collected_total       samples queued by collections
//   perld_remote_write_samples_sent_total            samples the receiver accepted (2xx)
//   perld_remote_write_samples_dropped_total{reason} queue_full: oldest dropped at
//       remoteWrite.maxQueuedSamples; rejected: the receiver refused the request
//       (4xx but 429); shutdown: still queued when perld stopped (or remote write was
//       turned off) after the last flush
//   perld_remote_write_requests_total{code}          requests by HTTP status ("error":
//       no answer: refused, reset, timeout, TLS)
//   perld_remote_write_retries_total                 requests repeated after 429/5xx/error
//   perld_remote_write_queue_samples                 samples queued (waiting + in flight)
//   perld_remote_write_queue_capacity_samples        remoteWrite.maxQueuedSamples
//   perld_remote_write_collections_total             collections of /metrics' series
//   perld_remote_write_last_sent_timestamp_seconds   newest sample the receiver accepted
//   perld_remote_write_cpu_seconds_total{thread}     CPU time of its threads (collect, send)
//
// Threads: Add*/Set* from any thread; Collect from any thread.
#pragma once

#include <prometheus/collectable.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "daemon/common/mutex.h"

namespace perld::remote_write {

enum class DropReason { kQueueFull, kRejected, kShutdown, kReasons };

class RemoteWriteStats final : public prometheus::Collectable {
 public:
  void AddCollected(uint64_t n) { collected_.fetch_add(n, std::memory_order_relaxed); }
  void AddSent(uint64_t n) { sent_.fetch_add(n, std::memory_order_relaxed); }
  void AddDropped(DropReason reason, uint64_t n) {
    dropped_[static_cast<size_t>(reason)].fetch_add(n, std::memory_order_relaxed);
  }
  void AddRetry() { retries_.fetch_add(1, std::memory_order_relaxed); }
  void AddCollection() { collections_.fetch_add(1, std::memory_order_relaxed); }
  // `status`: the HTTP status, 0 for no answer.
  void AddRequest(int status);
  void SetQueued(uint64_t n) { queued_.store(n, std::memory_order_relaxed); }
  void SetCapacity(uint64_t n) { capacity_.store(n, std::memory_order_relaxed); }
  void SetLastSentMs(int64_t ms) { last_sent_ms_.store(ms, std::memory_order_relaxed); }
  void SetCollectCpuNs(int64_t ns) { collect_cpu_ns_.store(ns, std::memory_order_relaxed); }
  void SetSendCpuNs(int64_t ns) { send_cpu_ns_.store(ns, std::memory_order_relaxed); }

  uint64_t collected() const { return collected_.load(std::memory_order_relaxed); }
  uint64_t sent() const { return sent_.load(std::memory_order_relaxed); }
  uint64_t dropped(DropReason reason) const {
    return dropped_[static_cast<size_t>(reason)].load(std::memory_order_relaxed);
  }
  uint64_t retries() const { return retries_.load(std::memory_order_relaxed); }
  uint64_t collections() const { return collections_.load(std::memory_order_relaxed); }
  uint64_t queued() const { return queued_.load(std::memory_order_relaxed); }
  // Requests answered with `status` (0: no answer).
  uint64_t requests(int status) const;

  std::vector<prometheus::MetricFamily> Collect() const override;

  static const char* DropReasonName(DropReason reason);

 private:
  std::atomic<uint64_t> collected_{0};
  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> dropped_[static_cast<size_t>(DropReason::kReasons)] = {};
  std::atomic<uint64_t> retries_{0};
  std::atomic<uint64_t> collections_{0};
  std::atomic<uint64_t> queued_{0};
  std::atomic<uint64_t> capacity_{0};
  std::atomic<int64_t> last_sent_ms_{0};
  std::atomic<int64_t> collect_cpu_ns_{0};
  std::atomic<int64_t> send_cpu_ns_{0};
  mutable Mutex mu_;
  std::map<int, uint64_t> requests_ ABSL_GUARDED_BY(mu_);  // status -> requests
};

}  // namespace perld::remote_write
