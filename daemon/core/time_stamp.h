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

class TimeStampNodePool;

// An intrusive queue node. The payload and the link live in one object, so
// enqueueing allocates nothing. Nodes are recycled through their owning
// TimeStampNodePool (`pool`), never freed while a queue may reach them.
struct TimeStampNode {
  TimeStamp ts;
  // Written by the producer that links the next node (release) and read by the
  // consumer (acquire); reused as the free-list link while the node is pooled.
  std::atomic<TimeStampNode*> next{nullptr};
  // Owning pool, set once when the pool creates the node; nullptr for a
  // queue's internal stub and for caller-owned nodes in tests.
  TimeStampNodePool* pool = nullptr;
#ifndef NDEBUG
  // Debug-only contract state: true from Add until Poll returns the node.
  std::atomic<bool> debug_in_queue{false};
#endif
};

}  // namespace perld
