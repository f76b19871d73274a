#include "daemon/core/latency_percentiles.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/latency_config.h"

namespace perld {

absl::Status ValidatePercentiles(std::span<const double> percents) {
  for (double p : percents) {
    if (!std::isfinite(p) || p < 0.0 || p > 100.0) {
      return absl::InvalidArgumentError(absl::StrCat("percentiles: ", p, " is outside [0, 100]"));
    }
  }
  std::vector<double> sorted(percents.begin(), percents.end());
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) {
    return absl::InvalidArgumentError(absl::StrCat("percentiles: duplicate value ", *dup));
  }
  return absl::OkStatus();
}

absl::StatusOr<PercentileSet> PercentileSet::Create(std::vector<double> percents) {
  if (absl::Status s = ValidatePercentiles(percents); !s.ok()) {
    return s;
  }
  std::sort(percents.begin(), percents.end());
  return PercentileSet(std::move(percents));
}

PercentileSet PercentileSet::Default() { return PercentileSet(DefaultPercentiles()); }

PercentileSet::PercentileSet(std::vector<double> sorted_percents)
    : percents_(std::move(sorted_percents)) {
  fractions_.reserve(percents_.size());
  for (double p : percents_) {
    fractions_.push_back(p / 100.0);
  }
}

int64_t PercentileSet::Index(size_t i, int64_t valid) const {
  // SBK: (long) (totalRecords * fraction). The comparison also keeps the
  // conversion defined when `valid` is near INT64_MAX.
  const double product = static_cast<double>(valid) * fractions_[i];
  if (product >= static_cast<double>(valid)) {
    return valid - 1;
  }
  return static_cast<int64_t>(product);
}

PercentileWalker::PercentileWalker(const PercentileSet& set, int64_t valid, LatencySnapshot* out)
    : set_(set), out_(out), valid_(valid), median_index_(valid >> 1) {
  out_->percents.assign(set.percents().begin(), set.percents().end());
  out_->fractions.assign(set.fractions().begin(), set.fractions().end());
  out_->values.assign(set.size(), 0);
  out_->counts.assign(set.size(), 0);
  out_->median = 0;
  if (valid_ > 0 && set.size() > 0) {
    next_index_ = set.Index(0, valid_);
  }
}

void PercentileWalker::Advance() {
  ++next_;
  next_index_ = next_ < set_.size() ? set_.Index(next_, valid_) : kDone;
}

}  // namespace perld
