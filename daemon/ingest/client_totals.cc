#include "daemon/ingest/client_totals.h"

namespace perld::ingest {

bool BreakdownBudget::TryCharge(int64_t bytes) {
  int64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (used + bytes > limit_.load(std::memory_order_relaxed)) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

ClientTotals::~ClientTotals() { budget_->Release(charged_); }

void ClientTotals::Drop() {
  budget_->Release(charged_);
  charged_ = 0;
  distribution_.Clear();
  exact_ = false;
  budget_->CountDrop();
}

void ClientTotals::AddWindow(const LatencyCounters& counters,
                             std::span<const LatencyBucket> ascending, int64_t now_unix_ms) {
  counters_.Merge(counters);
  ++reports_;
  last_report_unix_ms_ = now_unix_ms;
  if (!exact_ || ascending.empty()) return;
  // Charge the worst case first: the merge holds both the old and the new
  // vectors (buckets and cumulative counts) for a moment.
  const auto worst = static_cast<int64_t>((distribution_.buckets().size() + ascending.size()) *
                                          (sizeof(LatencyBucket) + sizeof(int64_t)));
  if (!budget_->TryCharge(worst)) {
    Drop();
    return;
  }
  distribution_.Merge(ascending);
  budget_->Release(worst + charged_);
  charged_ = 0;
  if (!budget_->TryCharge(Charged())) {
    Drop();
    return;
  }
  charged_ = Charged();
}

void ClientTotals::AddBatch(int64_t timestamps, int64_t records, int64_t now_unix_ms) {
  ++reports_;
  timestamps_ += timestamps;
  counters_.records += records;
  last_report_unix_ms_ = now_unix_ms;
  exact_ = false;  // no per-client distribution for raw clients
}

}  // namespace perld::ingest
