#include "daemon/core/latency_config.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/core/latency_percentiles.h"

namespace perld {
namespace {

constexpr int64_t kMaxBoundLatency = int64_t{1} << 62;
constexpr int64_t kMaxSizeMb = int64_t{1} << 40;
constexpr int64_t kMaxPageBits = 16;

absl::Status CheckMb(const char* key, int64_t value) {
  if (value < 1 || value > kMaxSizeMb) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": ", value, " MB is outside [1, ", kMaxSizeMb, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {
struct TimeUnitInfo {
  const char* name;       // SBK's -time spelling
  const char* full_name;  // SBK's CSV LatencyTimeUnit
  int64_t nanos;
};
const TimeUnitInfo& Info(TimeUnit unit) {
  static const TimeUnitInfo kMs{"ms", "MILLISECONDS", 1'000'000};
  static const TimeUnitInfo kUs{"mcs", "MICROSECONDS", 1'000};
  static const TimeUnitInfo kNs{"ns", "NANOSECONDS", 1};
  return unit == TimeUnit::kNs ? kNs : unit == TimeUnit::kUs ? kUs : kMs;
}
}  // namespace

const char* TimeUnitName(TimeUnit unit) { return Info(unit).name; }
const char* TimeUnitSymbol(TimeUnit unit) { return unit == TimeUnit::kUs ? "us" : Info(unit).name; }
const char* TimeUnitFullName(TimeUnit unit) { return Info(unit).full_name; }
int64_t NanosPerUnit(TimeUnit unit) { return Info(unit).nanos; }

int64_t DefaultMaxLatency(TimeUnit unit) { return 180'000 * (1'000'000 / NanosPerUnit(unit)); }

std::vector<double> DefaultPercentiles() {
  std::vector<double> p;
  p.reserve(28);
  for (int i = 5; i <= 90; i += 5) {
    p.push_back(static_cast<double>(i));
  }
  for (double v : {92.5, 95.0, 97.5, 99.0, 99.25, 99.5, 99.75, 99.9, 99.95, 99.99}) {
    p.push_back(v);
  }
  return p;
}

LatencyConfig LatencyConfig::ForUnit(TimeUnit unit) {
  LatencyConfig config;
  config.time_unit = unit;
  config.min_latency = 0;
  config.max_latency = DefaultMaxLatency(unit);
  return config;
}

absl::Status LatencyConfig::Validate() const {
  if (time_unit != TimeUnit::kMs && time_unit != TimeUnit::kUs && time_unit != TimeUnit::kNs) {
    return absl::InvalidArgumentError("timeUnit: must be ms, us or ns");
  }
  if (min_latency < 0 || min_latency >= kMaxBoundLatency) {
    return absl::InvalidArgumentError(
        absl::StrCat("minLatency: ", min_latency, " is outside [0, 2^62)"));
  }
  if (max_latency < min_latency || max_latency >= kMaxBoundLatency) {
    return absl::InvalidArgumentError(absl::StrCat(
        "maxLatency: ", max_latency, " must be >= minLatency (", min_latency, ") and < 2^62"));
  }
  if (absl::Status s = ValidatePercentiles(percentiles); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckMb("maxArraySizeMB", max_array_size_mb); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckMb("maxHashMapSizeMB", max_hash_map_size_mb); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckMb("totalMaxHashMapSizeMB", total_max_hash_map_size_mb); !s.ok()) {
    return s;
  }
  if (exact_latency_page_bits < 1 || exact_latency_page_bits > kMaxPageBits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "exactLatencyPageBits: ", exact_latency_page_bits, " is outside [1, ", kMaxPageBits, "]"));
  }
  const int64_t page_size = int64_t{1} << exact_latency_page_bits;
  if (exact_latency_sparse_page_entries < 1 || exact_latency_sparse_page_entries >= page_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "exactLatencySparsePageEntries: ", exact_latency_sparse_page_entries, " must be in [1, ",
        page_size - 1, "] for exactLatencyPageBits ", exact_latency_page_bits));
  }
  if (absl::Status s = CheckMb("exactLatencyMaxMemoryMB", exact_latency_max_memory_mb); !s.ok()) {
    return s;
  }
  return CheckMb("exactTotalLatencyMaxMemoryMB", exact_total_latency_max_memory_mb);
}

absl::Status LatencyConfig::Normalize() {
  // Validate first: sorting a vector that holds NaN is undefined behaviour.
  if (absl::Status s = ValidatePercentiles(percentiles); !s.ok()) {
    return s;
  }
  std::sort(percentiles.begin(), percentiles.end());
  return Validate();
}

}  // namespace perld
