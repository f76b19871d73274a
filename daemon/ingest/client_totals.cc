#include "daemon/ingest/client_totals.h"

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
  budget_->Release(charged_);
  recycler_->Close();
}

void ClientTotals::Drop() {
  budget_->Release(charged_);
  charged_ = 0;
  distribution_.reset();
  recycler_->Close();
  exact_ = false;
  budget_->CountDrop();
}

void ClientTotals::AddWindow(const LatencyCounters& counters,
                             std::span<const LatencyBucket> ascending, int64_t now_unix_ms) {
  counters_.Merge(counters);
  ++reports_;
  last_report_unix_ms_ = now_unix_ms;
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
  budget_->Release(worst + charged_);
  charged_ = 0;
  if (!budget_->TryCharge(Charged())) {
    Drop();
    return;
  }
  charged_ = Charged();
}

ClientTotals::Snapshot ClientTotals::Snap() const {
  Snapshot s;
  s.reports = reports_;
  s.timestamps = timestamps_;
  s.counters = counters_;
  if (exact_) s.distribution = distribution_;
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
