// TimeStamp: one completed operation; TimeStampNode: the same payload with the
// intrusive link of the per-record queue (QueueKind::kMpsc, mpsc_batched =
// false); TimeStampBatchNode: a small batch of timestamps with one intrusive
// link, the default channel's unit of publication (see timestamp_channels.h).
//
// A timestamp is (start, end, records, bytes) in the run's time unit; its
// latency is end - start. `records` is the frequency of this observation (one
// timing may stand for a batch of records) and `bytes` the bytes it moved.
// A paced (rate-controlled) producer also gives each timestamp its intended
// start -- its slot on the schedule (issue 30) -- carried beside the
// timestamp (TimeStampNode::intended, TimeStampBatchNode::intended): a
// closed-loop producer writes nothing more, and the recorder reads nothing
// more of its batch nodes and one flag (in the node's first line) of its
// per-record nodes.
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
  int64_t intended = 0;  // the intended start, when `paced`
  // Written by the producer that links the next node (release) and read by the
  // consumer (acquire); reused as the free-list link while the node is pooled.
  std::atomic<TimeStampNode*> next{nullptr};
  // TimeStampNodePool state: true while the node is free for its producer to
  // reuse (set by the recorder with release order, read with acquire).
  std::atomic<bool> released{true};
  bool paced = false;  // from a paced producer (TimeStampProducer::SendPaced)
  // Contract state, used only when PERLD_CONTRACT_CHECKS is 1: true from Add
  // until Poll returns the node. Always present, so the layout never depends
  // on the build (see contract.h).
  std::atomic<bool> debug_in_queue{false};
};

// A batch node: up to kCapacity timestamps written in place by the one
// producer that owns the node, published to a queue with one exchange and
// recycled whole (TimeStampBatchPool). Layout: the header (count, link,
// recorder state) on its own cache line, then the payload array, which the
// recorder reads sequentially.
struct TimeStampBatchNode {
  static constexpr uint32_t kCapacity = 32;

  // Entries ts[0, count) are written and visible: the producer stores count
  // with release order after writing each entry; the recorder loads it with
  // acquire order (it may read a published prefix of an open batch).
  alignas(64) std::atomic<uint32_t> count{0};
  // Recorder-owned: entries [0, taken) were already delivered from the open
  // batch; reset to 0 before the node is released to its pool.
  uint32_t taken = 0;
  // Producer's batch number (0, 1, 2, ...), written before the node becomes
  // visible; lets the recorder keep each producer's records in order.
  uint64_t seq = 0;
  // The owning producer's recorder-side state (constant for the node's life).
  void* origin = nullptr;
  // intended[0, count) are written too: the owner is a paced producer
  // (constant for the node's life).
  bool paced = false;
  // Queue link (same rules as TimeStampNode::next).
  std::atomic<TimeStampBatchNode*> next{nullptr};
  std::atomic<bool> debug_in_queue{false};  // as TimeStampNode::debug_in_queue
  alignas(64) TimeStamp ts[kCapacity];
  // Paced producers only: each entry's intended start (same index as ts).
  // Never touched on a closed-loop producer's nodes.
  alignas(64) int64_t intended[kCapacity];
};

}  // namespace perld
