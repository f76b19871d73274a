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
  for (const std::span<const LatencyBucket>& in : inputs) {
    if (in.empty()) continue;
    heap.push_back(Cursor{in.data(), in.data() + in.size()});
  }
  // A min-heap on each cursor's current latency.
  const auto later = [](const Cursor& a, const Cursor& b) { return a.at->latency > b.at->latency; };
  std::make_heap(heap.begin(), heap.end(), later);
  std::vector<LatencyBucket> out;
  // The largest input is a lower bound of the output (reserving the sum
  // would fault in pages the output never uses when windows share values).
  size_t largest = 0;
  for (const Cursor& c : heap) largest = std::max(largest, static_cast<size_t>(c.end - c.at));
  out.reserve(largest);
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
