// Heap allocation counter for benchmarks: alloc_counter.cc replaces the global
// operator new/delete of the benchmark binary and counts every allocation
// (all threads). Use AllocatedBytes() before and after a measured loop and
// report the difference per item, e.g. state.counters["B/op"].
#pragma once

#include <cstdint>

namespace perld::bench {
// Total bytes requested from operator new since process start.
uint64_t AllocatedBytes();
// Total number of operator new calls since process start.
uint64_t AllocationCount();
}  // namespace perld::bench
