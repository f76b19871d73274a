#include "daemon/runs/run_memory_budget.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/mutex.h"
#include "daemon/core/latency_recorder_builder.h"
#include "daemon/core/time_stamp.h"

namespace perld::runs {
namespace {

int64_t Mb(int64_t mb) { return mb * kBytesPerMb; }

}  // namespace

RunMemoryNeed RunMemoryNeedFor(const LatencyConfig& latency, bool hybrid,
                               const ChannelOptions& channels, int producers) {
  RunMemoryNeed need;
  if (hybrid) {
    need.periodic_kind = RecorderKind::kHybridPaged;
    need.total_kind = RecorderKind::kHybridPaged;
    need.periodic = Mb(latency.exact_latency_max_memory_mb);
  } else {
    need.periodic_kind = ChoosePeriodicRecorderKind(latency);
    need.periodic = need.periodic_kind == RecorderKind::kArray
                        ? (latency.max_latency - latency.min_latency + 1) * kLatencyValueSizeBytes
                        : Mb(latency.max_hash_map_size_mb);
  }
  need.total = Mb(TotalBudgetMB(latency, need.total_kind));
  if (producers > 0) {
    need.pending = int64_t{producers} * static_cast<int64_t>(channels.max_pending_per_worker) *
                   static_cast<int64_t>(sizeof(TimeStampNode));
  }
  return need;
}

std::string RunMemoryNeed::Describe() const {
  const bool paged = periodic_kind == RecorderKind::kHybridPaged;
  std::string text =
      absl::StrCat("periodic window ", periodic, " B (", RecorderKindName(periodic_kind), ": ",
                   paged                                   ? "exactLatencyMaxMemoryMB"
                   : periodic_kind == RecorderKind::kArray ? "the latency range, maxArraySizeMB"
                                                           : "maxHashMapSizeMB",
                   ") + total window ", total, " B (",
                   total_kind == RecorderKind::kHybridPaged ? "exactTotalLatencyMaxMemoryMB"
                                                            : "totalMaxHashMapSizeMB",
                   ")");
  if (pending > 0) {
    absl::StrAppend(&text, " + pending timestamps ", pending,
                    " B (workers x maxPendingPerWorker x 48 B)");
  }
  return text;
}

RunMemoryBudget::Reservation& RunMemoryBudget::Reservation::operator=(
    Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void RunMemoryBudget::Reservation::Release() {
  if (budget_ != nullptr) budget_->Give(bytes_);
  budget_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<RunMemoryBudget::Reservation> RunMemoryBudget::Reserve(const RunMemoryNeed& need) {
  const int64_t bytes = need.bytes();
  MutexLock lock(mu_);
  if (limit_ > 0 && bytes > limit_ - reserved_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "limits.maxMemoryBytes: this run needs ", bytes, " bytes at most (", need.Describe(),
        "), and ", reserved_, " of ", limit_, " are reserved by ", reservations_,
        " running run(s); lower the run's caps named above, wait for a run to end, or raise "
        "limits.maxMemoryBytes"));
  }
  reserved_ += bytes;
  ++reservations_;
  return Reservation(this, bytes);
}

void RunMemoryBudget::Give(int64_t bytes) {
  MutexLock lock(mu_);
  reserved_ -= bytes;
  --reservations_;
}

void RunMemoryBudget::SetLimit(int64_t limit_bytes) {
  MutexLock lock(mu_);
  limit_ = limit_bytes;
}

int64_t RunMemoryBudget::limit() const {
  MutexLock lock(mu_);
  return limit_;
}

int64_t RunMemoryBudget::reserved() const {
  MutexLock lock(mu_);
  return reserved_;
}

int64_t RunMemoryBudget::reservations() const {
  MutexLock lock(mu_);
  return reservations_;
}

}  // namespace perld::runs
