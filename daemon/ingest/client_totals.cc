#include "daemon/ingest/client_totals.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/core/latency_bucket_sort.h"

namespace perld::ingest {

bool BreakdownBudget::TryCharge(int64_t bytes) {
  int64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (used + bytes > limit_.load(std::memory_order_relaxed)) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

std::shared_ptr<const PercentileIndex> IndexRecycler::Share(
    std::shared_ptr<IndexRecycler> self, std::unique_ptr<PercentileIndex> index) {
  // The deleter runs on the thread that drops the last reference, after
  // every other holder's (shared_ptr's count is acq_rel): it owns the index.
  return std::shared_ptr<const PercentileIndex>(
      index.release(), [self = std::move(self)](const PercentileIndex* last) {
        self->HandBack(std::unique_ptr<PercentileIndex>(const_cast<PercentileIndex*>(last)));
      });
}

void IndexRecycler::HandBack(std::unique_ptr<PercentileIndex> index) {
  {
    MutexLock lock(mu_);
    if (!closed_) spare_.swap(index);
  }
  // `index` (an older spare, or the one handed back) is freed here, unlocked.
}

std::unique_ptr<PercentileIndex> IndexRecycler::Take() {
  std::unique_ptr<PercentileIndex> index;
  {
    MutexLock lock(mu_);
    index = std::move(spare_);
  }
  return index != nullptr ? std::move(index) : std::make_unique<PercentileIndex>();
}

void IndexRecycler::Close() {
  std::unique_ptr<PercentileIndex> spare;
  MutexLock lock(mu_);
  closed_ = true;
  spare = std::move(spare_);
}

ClientTotals::~ClientTotals() {
  budget_->Release(charged_ + pending_charged_);
  recycler_->Close();
}

void ClientTotals::Drop() {
  budget_->Release(charged_ + pending_charged_);
  charged_ = 0;
  pending_charged_ = 0;
  distribution_.reset();
  pending_buckets_.Release();
  std::vector<LatencyBucket>().swap(sort_buffer_);
  std::vector<LatencyBucket>().swap(sort_scratch_);
  std::vector<uint32_t>().swap(sort_histogram_);
  recycler_->Close();
  exact_ = false;
  budget_->CountDrop();
}

int64_t ClientTotals::NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

void ClientTotals::AddWindow(const LatencyCounters& counters,
                             std::span<const LatencyBucket> ascending, int64_t now_unix_ms) {
  pending_counters_.Merge(counters);
  ++pending_reports_;
  pending_last_unix_ms_ = now_unix_ms;
  if (!exact_) {  // counters only: nothing to merge
    PublishPending();
    return;
  }
  const bool due = Due(now_unix_ms);
  if (due && pending_buckets_.empty()) {
    MergeIntoPublished(ascending);
    PublishPending();
    last_merge_unix_ms_ = now_unix_ms;
    return;
  }
  for (const LatencyBucket& b : ascending) pending_buckets_.Add(b.latency, b.count);
  const auto map_bytes = static_cast<int64_t>(pending_buckets_.MemoryBytes());
  if (map_bytes > pending_charged_) {
    if (!budget_->TryCharge(map_bytes - pending_charged_)) {
      Drop();
      PublishPending();
      return;
    }
    pending_charged_ = map_bytes;
  }
  if (due) Flush(now_unix_ms);
}

void ClientTotals::Flush(int64_t now_unix_ms) {
  if (!pending()) return;
  if (exact_ && !pending_buckets_.empty()) {
    sort_buffer_.clear();
    int64_t lowest = std::numeric_limits<int64_t>::max();
    int64_t highest = 0;
    pending_buckets_.Drain([&](int64_t latency, int64_t count) {
      sort_buffer_.push_back(LatencyBucket{latency, count});
      lowest = std::min(lowest, latency);
      highest = std::max(highest, latency);
    });
    sort_scratch_.resize(sort_buffer_.size());
    const LatencyBucket* sorted =
        SortBucketsByLatency(sort_buffer_.data(), sort_scratch_.data(), sort_buffer_.size(), lowest,
                             highest, &sort_histogram_);
    MergeIntoPublished({sorted, sort_buffer_.size()});
  }
  PublishPending();
  last_merge_unix_ms_ = now_unix_ms;
}

void ClientTotals::MergeIntoPublished(std::span<const LatencyBucket> ascending) {
  if (!exact_ || ascending.empty()) return;
  // Charge the worst case first: the spare grows to the merged size while
  // the published index is kept.
  const auto worst = static_cast<int64_t>((distribution_->buckets().size() + ascending.size()) *
                                          (sizeof(LatencyBucket) + sizeof(int64_t)));
  if (!budget_->TryCharge(worst)) {
    Drop();
    return;
  }
  std::unique_ptr<PercentileIndex> next = recycler_->Take();
  next->AssignMerged(*distribution_, ascending);
  // The one replaced becomes the spare once no reader holds it.
  distribution_ = IndexRecycler::Share(recycler_, std::move(next));
  ++distribution_version_;
  budget_->Release(worst + charged_);
  charged_ = 0;
  if (!budget_->TryCharge(Charged())) {
    Drop();
    return;
  }
  charged_ = Charged();
}

void ClientTotals::PublishPending() {
  if (pending_reports_ == 0) return;
  counters_.Merge(pending_counters_);
  reports_ += pending_reports_;
  last_report_unix_ms_ = pending_last_unix_ms_;
  pending_counters_ = LatencyCounters();
  pending_reports_ = 0;
}

ClientTotals::Snapshot ClientTotals::Snap() const {
  Snapshot s;
  s.reports = reports_;
  s.timestamps = timestamps_;
  s.counters = counters_;
  if (exact_) {
    s.distribution = distribution_;
    s.distribution_version = distribution_version_;
  }
  s.last_report_unix_ms = last_report_unix_ms_;
  return s;
}

void ClientTotals::AddBatch(int64_t timestamps, int64_t records, int64_t now_unix_ms) {
  ++reports_;
  timestamps_ += timestamps;
  counters_.records += records;
  last_report_unix_ms_ = now_unix_ms;
  exact_ = false;  // no per-client distribution for raw clients
}

}  // namespace perld::ingest
