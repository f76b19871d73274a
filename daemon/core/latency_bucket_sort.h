// SortBucketsByLatency: ascending order for the sparse recorders' extraction.
//
// LSD radix sort on (latency - min) where the digit width follows the input:
// up to ~2n buckets per pass (8..16 bits), balanced over as few passes as
// the observed range needs. A dense window -- 4,096 distinct latencies in a
// 4,096-wide range, or 65,536 in 65,536 -- sorts in ONE counting pass with
// almost no bucket collisions; a 4 Mi range of 20 k keys takes two. Passes
// whose digit is constant are skipped; tiny inputs use std::sort. std::sort
// on hash-ordered keys is branch-mispredict bound (3-4x slower, measured in
// tests/bench/RECORDERS.md, SortBuckets/*). No allocation once `histogram`
// reached its high-water size. Threads: none (pure function + caller
// scratch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/core/latency_recorder.h"

namespace perld {

// Sorts buckets[0, n) by latency using scratch[0, n) and `histogram` (grown
// as needed, retained by the caller) and returns the buffer holding the
// sorted result (`buckets` or `scratch`). REQUIRES: every latency in
// [min_latency, max_latency], latencies distinct, n < 2^32.
LatencyBucket* SortBucketsByLatency(LatencyBucket* buckets, LatencyBucket* scratch, size_t n,
                                    int64_t min_latency, int64_t max_latency,
                                    std::vector<uint32_t>* histogram);

}  // namespace perld
