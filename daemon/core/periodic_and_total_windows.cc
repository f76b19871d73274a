#include "daemon/core/periodic_and_total_windows.h"

#include <algorithm>
#include <utility>

#include "daemon/core/contract.h"
#include "daemon/core/latency_recorder_builder.h"

namespace perld {

absl::StatusOr<PeriodicAndTotalWindows> PeriodicAndTotalWindows::Create(const LatencyConfig& config,
                                                                        int64_t start_time) {
  auto percentiles = PercentileSet::Create(config.percentiles);
  if (!percentiles.ok()) {
    return percentiles.status();
  }
  auto periodic = BuildPeriodicRecorder(config);
  if (!periodic.ok()) {
    return periodic.status();
  }
  auto total = BuildTotalRecorder(config);
  if (!total.ok()) {
    return total.status();
  }
  return Create(std::move(*periodic), std::move(*total), std::move(*percentiles), start_time);
}

absl::StatusOr<PeriodicAndTotalWindows> PeriodicAndTotalWindows::CreateHybrid(
    const LatencyConfig& config, int64_t start_time) {
  auto percentiles = PercentileSet::Create(config.percentiles);
  if (!percentiles.ok()) {
    return percentiles.status();
  }
  auto periodic = BuildHybridRecorder(config, HybridRole::kPeriodic);
  if (!periodic.ok()) {
    return periodic.status();
  }
  auto total = BuildHybridRecorder(config, HybridRole::kTotal);
  if (!total.ok()) {
    return total.status();
  }
  return Create(std::move(*periodic), std::move(*total), std::move(*percentiles), start_time);
}

absl::StatusOr<PeriodicAndTotalWindows> PeriodicAndTotalWindows::Create(
    std::unique_ptr<LatencyRecorder> periodic, std::unique_ptr<LatencyRecorder> total,
    PercentileSet percentiles, int64_t start_time) {
  if (periodic == nullptr || total == nullptr) {
    return absl::FailedPreconditionError("periodic and total recorders are required");
  }
  if (!periodic->window().SameBounds(total->window())) {
    return absl::FailedPreconditionError("periodic and total recorders need identical bounds");
  }
  return PeriodicAndTotalWindows(std::move(periodic), std::move(total), std::move(percentiles),
                                 start_time);
}

namespace {

// Collects an extraction's buckets (ascending) into a vector.
class DistributionCollector final : public LatencyBucketSink {
 public:
  explicit DistributionCollector(std::vector<LatencyBucket>* out) : out_(out) { out_->clear(); }
  void OnBuckets(std::span<const LatencyBucket> buckets) override {
    out_->insert(out_->end(), buckets.begin(), buckets.end());
  }

 private:
  std::vector<LatencyBucket>* out_;
};

}  // namespace

PeriodicAndTotalWindows::PeriodicAndTotalWindows(std::unique_ptr<LatencyRecorder> periodic,
                                                 std::unique_ptr<LatencyRecorder> total,
                                                 PercentileSet percentiles, int64_t start_time)
    : periodic_(std::move(periodic)),
      total_(std::move(total)),
      percentiles_(std::move(percentiles)),
      run_total_(total_->BudgetBytes()),
      run_start_time_(start_time) {
  periodic_->Reset(start_time);
  total_->Reset(start_time);
}

void PeriodicAndTotalWindows::RecordBatch(const TimeStamp* ts, size_t n, int64_t now,
                                          FullClose full_close) {
  if (full_close == FullClose::kCaller) {
    periodic_->RecordBatch(ts, n);
    return;
  }
  while (n > 0) {
    const size_t chunk = std::min(n, kFullCheckInterval);
    periodic_->RecordBatch(ts, chunk);
    if (periodic_->IsFull()) [[unlikely]] {
      CloseFull(now);
    }
    ts += chunk;
    n -= chunk;
  }
}

absl::Status PeriodicAndTotalWindows::MergeWindow(const LatencyCounters& counters,
                                                  std::span<const LatencyBucket> buckets,
                                                  int64_t now, FullClose full_close,
                                                  CheckedBounds checked) {
  if (absl::Status s = periodic_->MergeBuckets(counters, buckets, checked); !s.ok()) {
    return s;
  }
  if (full_close == FullClose::kSelf && periodic_->IsFull()) {
    CloseFull(now);
  }
  return absl::OkStatus();
}

void PeriodicAndTotalWindows::ClosePeriodicInto(int64_t now, WindowReport* out) {
  out->scope = WindowReport::Scope::kPeriodic;
  periodic_->SetEndTime(now);
  DistributionCollector collector(&out->distribution);
  const absl::Status s =
      periodic_->CopyPercentiles(percentiles_, &out->snapshot, total_.get(), &collector);
  // Bounds were checked in Create, so the copy cannot be refused.
  PERLD_CONTRACT(s.ok(), "periodic -> total copy refused");
  static_cast<void>(s);
  periodic_->Reset(now);
}

void PeriodicAndTotalWindows::CloseFull(int64_t now) {
  WindowReport& report = pending_.emplace_back();
  ClosePeriodicInto(now, &report);
  report.snapshot.closed_full = true;
  report.snapshot.full_closes = ++periodic_full_closes_;
  CheckTotalFull(now);
}

void PeriodicAndTotalWindows::CloseTotalSegment(int64_t now, WindowReport* out) {
  total_->SetEndTime(now);
  DistributionCollector collector(&out->distribution);
  const absl::Status s = total_->CopyPercentiles(percentiles_, &out->snapshot, nullptr, &collector);
  PERLD_CONTRACT(s.ok(), "total extraction refused");
  static_cast<void>(s);
  run_total_.Add(CountersOf(out->snapshot), out->distribution);
  total_->Reset(now);
}

void PeriodicAndTotalWindows::CheckTotalFull(int64_t now) {
  if (!total_->IsFull()) {
    return;
  }
  WindowReport& report = pending_.emplace_back();
  report.scope = WindowReport::Scope::kTotalSegment;
  CloseTotalSegment(now, &report);
  report.snapshot.closed_full = true;
  report.snapshot.full_closes = ++total_full_closes_;
}

void PeriodicAndTotalWindows::CloseWindow(int64_t now, WindowReport* out) {
  ClosePeriodicInto(now, out);
  out->snapshot.full_closes = periodic_full_closes_;
  CheckTotalFull(now);
}

void PeriodicAndTotalWindows::CloseTotal(int64_t now, WindowReport* out) {
  if (periodic_->counters().records > 0 || periodic_->counters().rejected > 0) {
    const absl::Status s = total_->MergeFrom(*periodic_);
    PERLD_CONTRACT(s.ok(), "periodic -> total merge refused");
    static_cast<void>(s);
  }
  periodic_->Reset(now);
  WindowReport segment;
  CloseTotalSegment(now, &segment);
  out->scope = WindowReport::Scope::kTotal;
  run_total_.Snapshot(percentiles_, run_start_time_, now, &out->snapshot);
  out->snapshot.full_closes = total_full_closes_;
  out->segments = run_total_.windows();
  out->exact_total = run_total_.exact();
  out->distribution = run_total_.distribution();
  if (!run_total_.exact() && !seeded_) {
    // Every earlier segment was reported with its distribution; report the
    // last one too, so their merge is the run's total.
    out->spilled = true;
    segment.scope = WindowReport::Scope::kTotalSegment;
    segment.snapshot.full_closes = total_full_closes_;
    pending_.push_back(std::move(segment));
  }
  run_total_ = RunTotal(total_->BudgetBytes());
  run_start_time_ = now;
  seeded_ = false;
}

LatencyCounters PeriodicAndTotalWindows::DiscardTotal(int64_t now) {
  LatencyCounters left_out = run_total_.counters();
  left_out.Merge(total_->counters());
  total_->Reset(now);
  run_total_ = RunTotal(total_->BudgetBytes());
  run_start_time_ = now;
  total_full_closes_ = 0;
  seeded_ = false;
  return left_out;
}

std::vector<WindowReport> PeriodicAndTotalWindows::TakePendingReports() {
  std::vector<WindowReport> out;
  out.swap(pending_);
  return out;
}

}  // namespace perld
