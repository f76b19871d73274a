// TimeStampNodePool: recycles TimeStampNodes between one producer thread and
// the recorder, so publishing a timestamp allocates nothing at steady state,
// and bounds the number of timestamps a producer may have in flight.
//
// Threads: Acquire() belongs to one producer thread at a time; Release() to
// the recorder (consumer) thread. Construction and destruction happen while
// neither is active; the pool must outlive every queue that may hold one of
// its nodes.
//
// Ring-ordered reuse: the pool's nodes live in slabs of up to kSlabNodes and
// the producer hands them out in one fixed cyclic order over the slabs, like a
// ring buffer. A node is free again once the recorder has Release()d it
// (`released` set with release order; Acquire reads it with acquire order).
// So a producer touches node memory in address order, which the hardware
// prefetcher streams, and Acquire() reads no pointer written by the other
// core: no dependent cache miss per record (a linked free list had one, and
// the queue's exchange then drained the waiting store; measured in
// tests/bench/README.md). Release() is one store to a line the recorder has
// just read.
//
// Bound: at most `capacity` nodes exist, allocated lazily slab by slab. When
// the next node in the cycle is still in flight and the pool cannot grow,
// Acquire() returns nullptr and the caller applies the channel's overflow
// policy (block or count a drop): the pool never loses a record silently.
// Pending timestamps of a producer <= capacity; memory <= capacity * 40 B.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "daemon/core/time_stamp.h"

namespace perld {

class TimeStampNodePool {
 public:
  static constexpr size_t kSlabNodes = 1024;
  // How far ahead of the cursor Acquire() asks for a node's line for writing.
  static constexpr size_t kPrefetchAhead = 8;

  // REQUIRES: capacity >= 1.
  explicit TimeStampNodePool(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}
  TimeStampNodePool(const TimeStampNodePool&) = delete;
  TimeStampNodePool& operator=(const TimeStampNodePool&) = delete;

  // Producer thread. Returns the next free node of the cycle, or nullptr when
  // it is still in flight and `capacity` nodes exist. Allocates only while
  // growing toward capacity.
  TimeStampNode* Acquire() {
    if (slab_ == nullptr || !slab_[pos_].released.load(std::memory_order_acquire)) {
      if (!Grow()) return nullptr;
    }
    TimeStampNode* node = &slab_[pos_];
    // Only this producer reads the flag until the recorder sets it again,
    // which happens after the node travelled through a queue (release/acquire).
    node->released.store(false, std::memory_order_relaxed);
    if (pos_ + kPrefetchAhead < slab_size_) PrefetchForWrite(&slab_[pos_ + kPrefetchAhead]);
    if (++pos_ == slab_size_) NextSlab();
    return node;
  }

  // Recorder thread. Frees a node that Poll returned (after its payload was
  // read). release: the producer's next writes to the node come after.
  static void Release(TimeStampNode* node) {
    node->released.store(true, std::memory_order_release);
  }

  size_t capacity() const { return capacity_; }
  // Nodes allocated so far (producer thread, or any thread once quiescent).
  size_t allocated() const { return allocated_; }

 private:
  struct Slab {
    std::unique_ptr<TimeStampNode[]> nodes;
    size_t size = 0;
  };

  static void PrefetchForWrite(const TimeStampNode* node) {
#if defined(__x86_64__)
    asm volatile("prefetchw %0" : : "m"(*reinterpret_cast<const char*>(node)));
#else
    __builtin_prefetch(node, 1);
#endif
  }

  void NextSlab() {
    slab_index_ = (slab_index_ + 1) % slabs_.size();
    slab_ = slabs_[slab_index_].nodes.get();
    slab_size_ = slabs_[slab_index_].size;
    pos_ = 0;
  }

  // Inserts a new slab at the cursor, so the cycle continues with fresh nodes
  // and the in-flight node follows them. False when at capacity.
  bool Grow() {
    if (allocated_ >= capacity_) return false;
    Slab slab;
    slab.size = std::min(kSlabNodes, capacity_ - allocated_);
    slab.nodes = std::make_unique<TimeStampNode[]>(slab.size);
    for (size_t i = 0; i < slab.size; ++i) {
      slab.nodes[i].released.store(true, std::memory_order_relaxed);
    }
    allocated_ += slab.size;
    // The current slab was entered at pos_ (0 unless mid-slab); insert before
    // it when at its start, else after it and move on.
    const size_t at = (slab_ == nullptr || pos_ == 0) ? slab_index_ : slab_index_ + 1;
    slabs_.insert(slabs_.begin() + static_cast<std::ptrdiff_t>(at), std::move(slab));
    slab_index_ = at;
    slab_ = slabs_[at].nodes.get();
    slab_size_ = slabs_[at].size;
    pos_ = 0;
    return true;
  }

  const size_t capacity_;
  size_t allocated_ = 0;
  std::vector<Slab> slabs_;  // the cycle, in hand-out order
  size_t slab_index_ = 0;
  TimeStampNode* slab_ = nullptr;
  size_t slab_size_ = 0;
  size_t pos_ = 0;  // next node of slab_
};

// TimeStampBatchPool: the batch nodes of one producer (the default channel).
//
// Threads: Acquire() on the producer thread; Release() on the recorder thread.
// Nodes are allocated lazily, one at a time, up to `capacity`, and freed only
// by the destructor (so a node pointer stays valid for the pool's life).
//
// Free nodes: Release() appends the node to a single-producer single-consumer
// ring of node pointers (recorder -> producer); Acquire() takes the oldest
// returned node, or allocates while below capacity. Any returned node will do:
// a producer blocked at the bound waits for whichever node the recorder
// finishes first, never for one particular node (the ring-ordered pool of the
// per-record variant waits for the next node of its cycle). The ring never
// overflows: it has room for every node that can exist. Only `tail_` is
// shared (written by the recorder, read by the producer when its cached copy
// says the ring is empty); the producer's read index is private.
class TimeStampBatchPool {
 public:
  // REQUIRES: capacity >= 1.
  TimeStampBatchPool(size_t capacity, void* origin)
      : capacity_(std::max<size_t>(capacity, 1)), mask_(RingSize(capacity_) - 1), origin_(origin) {
    ring_ = std::make_unique<TimeStampBatchNode*[]>(mask_ + 1);
    nodes_.reserve(capacity_);
  }
  TimeStampBatchPool(const TimeStampBatchPool&) = delete;
  TimeStampBatchPool& operator=(const TimeStampBatchPool&) = delete;

  // Producer thread. A free node (count and taken are 0), or nullptr when all
  // `capacity` nodes exist and none has been released.
  TimeStampBatchNode* Acquire() {
    if (head_ == tail_seen_) {
      tail_seen_ = tail_.load(std::memory_order_acquire);  // pairs with Release
      if (head_ == tail_seen_) return Grow();
    }
    return ring_[head_++ & mask_];
  }

  // Recorder thread. Returns a node whose entries were all delivered.
  void Release(TimeStampBatchNode* node) {
    node->taken = 0;
    node->count.store(0, std::memory_order_relaxed);           // published by the tail store
    const uint64_t t = tail_.load(std::memory_order_relaxed);  // single writer
    ring_[t & mask_] = node;
    tail_.store(t + 1, std::memory_order_release);
  }

  size_t capacity() const { return capacity_; }
  // Nodes allocated so far (producer thread, or any thread once quiescent).
  size_t allocated() const { return nodes_.size(); }

 private:
  static size_t RingSize(size_t n) {
    size_t r = 1;
    while (r < n) r <<= 1;
    return r;
  }

  TimeStampBatchNode* Grow() {
    if (nodes_.size() >= capacity_) return nullptr;
    nodes_.push_back(std::make_unique<TimeStampBatchNode>());
    nodes_.back()->origin = origin_;
    return nodes_.back().get();
  }

  const size_t capacity_;
  const uint64_t mask_;
  void* const origin_;
  std::unique_ptr<TimeStampBatchNode*[]> ring_;
  std::vector<std::unique_ptr<TimeStampBatchNode>> nodes_;  // producer-owned
  uint64_t head_ = 0;                                       // producer-private
  uint64_t tail_seen_ = 0;                                  // producer's copy of tail_
  alignas(64) std::atomic<uint64_t> tail_{0};               // written by the recorder
};

}  // namespace perld
