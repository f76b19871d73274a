// TimeStamp: one completed operation, and TimeStampNode: the same payload with
// the intrusive link used by TimeStampMpscQueue.
//
// A timestamp is (start, end, records, bytes) in the run's time unit; its
// latency is end - start. `records` is the frequency of this observation (one
// timing may stand for a batch of records) and `bytes` the bytes it moved.
#pragma once

#include <atomic>
#include <cstdint>

namespace perld {

struct TimeStamp {
  int64_t start = 0;
  int64_t end = 0;
  int32_t records = 0;
  int32_t bytes = 0;
};

// An intrusive queue node. The payload and the link live in one object, so
// enqueueing allocates nothing. Nodes are recycled through a
// TimeStampNodePool, never freed while a queue may reach them.
struct TimeStampNode {
  TimeStamp ts;
  // Written by the producer that links the next node (release) and read by the
  // consumer (acquire); reused as the free-list link while the node is pooled.
  std::atomic<TimeStampNode*> next{nullptr};
  // TimeStampNodePool state: true while the node is free for its producer to
  // reuse (set by the recorder with release order, read with acquire).
  std::atomic<bool> released{true};
#ifndef NDEBUG
  // Debug-only contract state: true from Add until Poll returns the node.
  std::atomic<bool> debug_in_queue{false};
#endif
};

}  // namespace perld
