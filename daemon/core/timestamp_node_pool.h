// TimeStampNodePool: recycles TimeStampNodes between one producer thread and
// the recorder, so publishing a timestamp allocates nothing at steady state,
// and bounds the number of timestamps a producer may have in flight.
//
// Threads: Acquire() belongs to one producer thread at a time. Release(),
// Flush() belong to the recorder (consumer) thread. Construction and
// destruction happen while neither is active; the pool must outlive every
// queue that may still hold one of its nodes.
//
// Bound: at most `capacity` nodes exist, allocated lazily in slabs of up to
// kSlabNodes, so pending timestamps of this producer <= capacity and memory <=
// capacity * sizeof(TimeStampNode). When every node is in flight, Acquire()
// returns nullptr and the caller applies the channel's overflow policy (block
// or count a drop): the pool never loses a record silently.
//
// Return path: the recorder collects consumed nodes in a consumer-owned chain
// and publishes a whole chain with one CAS push onto `returned_` (every
// `return_batch` nodes, and on Flush at the end of each drain pass). The
// producer takes the entire returned list with one exchange. Push-only CAS by
// a single pusher plus take-all exchange has no ABA: the pusher is the only
// thread that can make an old head value reappear.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "daemon/core/time_stamp.h"

namespace perld {

class TimeStampNodePool {
 public:
  static constexpr size_t kSlabNodes = 1024;
  static constexpr size_t kDefaultReturnBatch = 64;

  // REQUIRES: capacity >= 1, 1 <= return_batch. A return batch larger than the
  // capacity is clamped so a blocked producer always gets nodes back.
  explicit TimeStampNodePool(size_t capacity, size_t return_batch = kDefaultReturnBatch)
      : capacity_(std::max<size_t>(capacity, 1)),
        return_batch_(std::clamp<size_t>(return_batch, 1, std::max<size_t>(capacity_ / 2, 1))) {}
  TimeStampNodePool(const TimeStampNodePool&) = delete;
  TimeStampNodePool& operator=(const TimeStampNodePool&) = delete;

  // Producer thread. Returns a free node, or nullptr when `capacity` nodes are
  // all in flight. Allocates only while growing toward capacity.
  TimeStampNode* Acquire() {
    if (free_ == nullptr) {
      // acquire: pairs with the recorder's release push of the chain.
      free_ = returned_.exchange(nullptr, std::memory_order_acquire);
      if (free_ == nullptr && !Grow()) return nullptr;
      StartPrefetch();
    }
    TimeStampNode* node = free_;
    free_ = node->next.load(std::memory_order_relaxed);
    // One cursor step per Acquire: the line it reads was requested
    // kPrefetchAhead calls ago, and the line it requests is used that many
    // calls from now.
    if (ahead_ != nullptr) {
      ahead_ = ahead_->next.load(std::memory_order_relaxed);
      if (ahead_ != nullptr) PrefetchForWrite(ahead_);
    }
    return node;
  }

  // Recorder thread. Takes back a node that Poll returned.
  void Release(TimeStampNode* node) {
    // Appended in consumption order, so the producer reuses nodes in the
    // order it used them: ascending addresses within a batch (prefetchable).
    node->next.store(nullptr, std::memory_order_relaxed);
    if (pending_last_ == nullptr) {
      pending_first_ = node;
    } else {
      pending_last_->next.store(node, std::memory_order_relaxed);
    }
    pending_last_ = node;
    if (++pending_count_ >= return_batch_) Flush();
  }

  // Recorder thread. Hands all released nodes back to the producer.
  void Flush() {
    if (pending_first_ == nullptr) return;
    TimeStampNode* head = returned_.load(std::memory_order_relaxed);
    do {
      pending_last_->next.store(head, std::memory_order_relaxed);
      // release: the chain links above become visible with the new head.
    } while (!returned_.compare_exchange_weak(head, pending_first_, std::memory_order_release,
                                              std::memory_order_relaxed));
    pending_first_ = pending_last_ = nullptr;
    pending_count_ = 0;
  }

  size_t capacity() const { return capacity_; }
  // Nodes allocated so far (producer thread, or any thread once quiescent).
  size_t allocated() const { return allocated_; }

 private:
  // Recycled nodes were last written by the recorder's core: a producer that
  // writes one without warning waits for a cross-core transfer, and its
  // exchange on the queue tail then drains that store. A cursor kept
  // kPrefetchAhead nodes ahead of free_ requests each line for writing early.
  void StartPrefetch() {
    ahead_ = free_;
    for (int i = 0; i < kPrefetchAhead && ahead_ != nullptr; ++i) {
      PrefetchForWrite(ahead_);
      ahead_ = ahead_->next.load(std::memory_order_relaxed);
    }
  }
  static void PrefetchForWrite(const TimeStampNode* node) {
#if defined(__x86_64__)
    asm volatile("prefetchw %0" : : "m"(*reinterpret_cast<const char*>(node)));
#else
    __builtin_prefetch(node, 1);
#endif
  }

  bool Grow() {
    if (allocated_ >= capacity_) return false;
    const size_t n = std::min(kSlabNodes, capacity_ - allocated_);
    slabs_.push_back(std::make_unique<TimeStampNode[]>(n));
    TimeStampNode* slab = slabs_.back().get();
    for (size_t i = 0; i < n; ++i) {
      slab[i].pool = this;
      slab[i].next.store(i + 1 < n ? &slab[i + 1] : nullptr, std::memory_order_relaxed);
    }
    allocated_ += n;
    free_ = slab;
    StartPrefetch();
    return true;
  }

  static constexpr int kPrefetchAhead = 8;

  // Producer-owned.
  TimeStampNode* free_ = nullptr;
  TimeStampNode* ahead_ = nullptr;  // prefetch cursor, kPrefetchAhead after free_
  size_t allocated_ = 0;
  const size_t capacity_;
  std::vector<std::unique_ptr<TimeStampNode[]>> slabs_;
  // Shared: recorder pushes, producer takes all.
  alignas(64) std::atomic<TimeStampNode*> returned_{nullptr};
  // Recorder-owned.
  alignas(64) TimeStampNode* pending_first_ = nullptr;
  TimeStampNode* pending_last_ = nullptr;
  size_t pending_count_ = 0;
  const size_t return_batch_;
};

}  // namespace perld
