#include "daemon/core/latency_window.h"

namespace perld {

void LatencyCounters::Merge(const LatencyCounters& other) {
  using internal::SatAdd;
  records = SatAdd(records, other.records);
  bytes = SatAdd(bytes, other.bytes);
  total_latency = SatAdd(total_latency, other.total_latency);
  min_latency = std::min(min_latency, other.min_latency);
  max_latency = std::max(max_latency, other.max_latency);
  invalid = SatAdd(invalid, other.invalid);
  lower_discard = SatAdd(lower_discard, other.lower_discard);
  higher_discard = SatAdd(higher_discard, other.higher_discard);
  valid = SatAdd(valid, other.valid);
  rejected = SatAdd(rejected, other.rejected);
}

void LatencyCounters::MergeBatch(int64_t valid_records, int64_t byte_sum, __int128 latency_sum,
                                 int64_t lowest, int64_t highest) {
  using internal::SatAdd;
  records = SatAdd(records, valid_records);
  valid = SatAdd(valid, valid_records);
  bytes = SatAdd(bytes, byte_sum);
  const __int128 sum = static_cast<__int128>(total_latency) + latency_sum;
  total_latency = sum > std::numeric_limits<int64_t>::max() ? std::numeric_limits<int64_t>::max()
                                                            : static_cast<int64_t>(sum);
  min_latency = std::min(min_latency, lowest);
  max_latency = std::max(max_latency, highest);
}

bool LatencyCounters::IsConsistent() const {
  if (records < 0 || total_latency < 0 || min_latency < 0 || max_latency < 0 || invalid < 0 ||
      lower_discard < 0 || higher_discard < 0 || valid < 0 || rejected < 0) {
    return false;
  }
  int64_t classified = 0;
  for (int64_t part : {valid, lower_discard, higher_discard, invalid}) {
    if (__builtin_add_overflow(classified, part, &classified)) {
      return false;
    }
  }
  return classified <= records;
}

void LatencyWindow::Reset(int64_t start_time) {
  counters_ = LatencyCounters{};
  start_time_ = start_time;
  end_time_ = start_time;
}

}  // namespace perld
