// RunMemoryBudget: the process-wide memory budget of running runs
// (limits.maxMemoryBytes). Every run reserves, when it is created, the worst
// case its own caps allow (RunMemoryNeed); a run whose reservation would take
// the sum past the budget is refused with RESOURCE_EXHAUSTED before anything
// of it is allocated, and a run gives its reservation back when it ends.
//
// The worst case of a run (RunMemoryNeedFor), as the recorder builder sizes
// its windows (core/latency_recorder_builder.h):
//   periodic window: a dense array's real size ((max - min + 1) x 8 B) when
//     the policy picks the array, else maxHashMapSizeMB; an aggregate ns run
//     (hybrid pages): exactLatencyMaxMemoryMB;
//   total window: totalMaxHashMapSizeMB; aggregate ns: exactTotalLatencyMaxMemoryMB;
//   pending timestamps: producers x maxPendingPerWorker x 48 B (a bench run's
//     workers; remote runs have no channels: ingest.maxMemoryBytes bounds
//     their queued windows separately).
// What the snapshot store keeps of a run is bounded by retention.maxBytes.
//
// Threads: thread-safe (one mutex around two integers). A Reservation is a
// move-only handle that gives its bytes back when destroyed, on any thread;
// it must not outlive its budget.
#pragma once

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "daemon/common/mutex.h"
#include "daemon/core/latency_config.h"
#include "daemon/core/latency_recorder.h"
#include "daemon/core/timestamp_channels.h"

namespace perld::runs {

struct RunMemoryNeed {
  int64_t periodic = 0;  // bytes
  int64_t total = 0;
  int64_t pending = 0;
  RecorderKind periodic_kind = RecorderKind::kArray;
  RecorderKind total_kind = RecorderKind::kLongHashMap;
  int64_t bytes() const { return periodic + total + pending; }
  // "periodic window 1048576 B (Array) + total window ..." and the keys that
  // lower each part.
  std::string Describe() const;
};

// `hybrid`: the run aggregates remote windows in ns (RunSetup::aggregate and
// a ns time unit). `producers` 0: no timestamp channels.
RunMemoryNeed RunMemoryNeedFor(const LatencyConfig& latency, bool hybrid,
                               const ChannelOptions& channels, int producers);

class RunMemoryBudget {
 public:
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept { *this = std::move(other); }
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { Release(); }

    int64_t bytes() const { return bytes_; }
    void Release();  // idempotent

   private:
    friend class RunMemoryBudget;
    Reservation(RunMemoryBudget* budget, int64_t bytes) : budget_(budget), bytes_(bytes) {}
    RunMemoryBudget* budget_ = nullptr;
    int64_t bytes_ = 0;
  };

  // `limit_bytes` <= 0: no budget (everything is reserved, nothing refused).
  explicit RunMemoryBudget(int64_t limit_bytes) : limit_(limit_bytes) {}
  RunMemoryBudget(const RunMemoryBudget&) = delete;
  RunMemoryBudget& operator=(const RunMemoryBudget&) = delete;

  // Takes need.bytes() or refuses: ResourceExhausted naming
  // limits.maxMemoryBytes, what is reserved, what the run needs and how to
  // lower it. Runs reserved before a lowered limit keep their share.
  absl::StatusOr<Reservation> Reserve(const RunMemoryNeed& need);
  void SetLimit(int64_t limit_bytes);

  int64_t limit() const;
  int64_t reserved() const;
  int64_t reservations() const;  // runs holding a share

 private:
  void Give(int64_t bytes);

  mutable Mutex mu_;
  int64_t limit_ ABSL_GUARDED_BY(mu_);
  int64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reservations_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace perld::runs
