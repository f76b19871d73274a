#include "daemon/core/latency_percentiles.h"

#include <algorithm>
#include <cmath>
#include <string>
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

const char* PercentileMethodName(PercentileMethod method) {
  switch (method) {
    case PercentileMethod::kSbk:
      return "sbk";
    case PercentileMethod::kNearestRank:
      return "nearest-rank";
    case PercentileMethod::kHdr:
      return "hdr";
  }
  return "sbk";
}

absl::StatusOr<PercentileMethod> ParsePercentileMethod(std::string_view name) {
  for (PercentileMethod m :
       {PercentileMethod::kSbk, PercentileMethod::kNearestRank, PercentileMethod::kHdr}) {
    if (name == PercentileMethodName(m)) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("percentile method '", std::string(name), "': use sbk, nearest-rank or hdr"));
}

absl::StatusOr<PercentileSet> PercentileSet::Create(std::vector<double> percents,
                                                    PercentileMethod method) {
  if (absl::Status s = ValidatePercentiles(percents); !s.ok()) {
    return s;
  }
  std::sort(percents.begin(), percents.end());
  return PercentileSet(std::move(percents), method);
}

PercentileSet PercentileSet::Default() {
  return PercentileSet(DefaultPercentiles(), PercentileMethod::kSbk);
}

PercentileSet::PercentileSet(std::vector<double> sorted_percents, PercentileMethod method)
    : percents_(std::move(sorted_percents)), method_(method) {
  fractions_.reserve(percents_.size());
  for (double p : percents_) {
    fractions_.push_back(p / 100.0);
  }
}

int64_t PercentileSet::Index(size_t i, int64_t valid) const {
  return IndexOf(percents_[i], fractions_[i], valid);
}

int64_t PercentileSet::MedianIndex(int64_t valid) const {
  if (method_ == PercentileMethod::kSbk) return valid >> 1;  // SBK medianIndex
  return IndexOf(50.0, 0.5, valid);
}

int64_t PercentileSet::IndexOf(double percent, double fraction, int64_t valid) const {
  const auto v = static_cast<double>(valid);
  // The 1-based rank as a double; each comparison with `v` before the
  // conversion keeps it defined when `valid` is near INT64_MAX.
  double rank = 0;
  switch (method_) {
    case PercentileMethod::kSbk: {
      // SBK: (long) (totalRecords * fraction), 0-based.
      const double product = v * fraction;
      if (product >= v) return valid - 1;
      return static_cast<int64_t>(product);
    }
    case PercentileMethod::kNearestRank: {
      // HdrHistogram Java: requested = min(max(nextAfter(p, -inf), 0), 100);
      // countAtPercentile = max(1, (long) ceil(requested * total / 100)).
      const double requested =
          std::clamp(std::nextafter(percent, -std::numeric_limits<double>::infinity()), 0.0, 100.0);
      rank = std::ceil((requested * v) / 100.0);
      break;
    }
    case PercentileMethod::kHdr: {
      // HdrHistogram C: (int64_t) (((min(p, 100) / 100) * total) + 0.5).
      rank = std::floor(((std::min(percent, 100.0) / 100) * v) + 0.5);
      break;
    }
  }
  if (rank >= v) return valid - 1;
  if (rank < 1) return 0;
  return static_cast<int64_t>(rank) - 1;
}

PercentileWalker::PercentileWalker(const PercentileSet& set, int64_t valid, LatencySnapshot* out)
    : set_(set), out_(out), valid_(valid), median_index_(valid > 0 ? set.MedianIndex(valid) : 0) {
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
