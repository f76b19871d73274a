#include "daemon/core/distribution_merge.h"

#include <algorithm>
#include <cstddef>
#include <limits>

namespace perld {

std::vector<LatencyBucket> MergeDistributions(
    std::span<const std::span<const LatencyBucket>> inputs) {
  struct Cursor {
    const LatencyBucket* at;
    const LatencyBucket* end;
  };
  std::vector<Cursor> heap;
  heap.reserve(inputs.size());
  size_t upper = 0;
  for (const std::span<const LatencyBucket>& in : inputs) {
    if (in.empty()) continue;
    heap.push_back(Cursor{in.data(), in.data() + in.size()});
    upper += in.size();
  }
  // A min-heap on each cursor's current latency.
  const auto later = [](const Cursor& a, const Cursor& b) { return a.at->latency > b.at->latency; };
  std::make_heap(heap.begin(), heap.end(), later);
  std::vector<LatencyBucket> out;
  out.reserve(heap.size() == 1 ? upper : std::min<size_t>(upper, size_t{1} << 20));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Cursor& c = heap.back();
    if (!out.empty() && out.back().latency == c.at->latency) {
      int64_t& count = out.back().count;
      count = count > std::numeric_limits<int64_t>::max() - c.at->count
                  ? std::numeric_limits<int64_t>::max()
                  : count + c.at->count;
    } else {
      out.push_back(*c.at);
    }
    if (++c.at == c.end) {
      heap.pop_back();
    } else {
      std::push_heap(heap.begin(), heap.end(), later);
    }
  }
  return out;
}

}  // namespace perld
