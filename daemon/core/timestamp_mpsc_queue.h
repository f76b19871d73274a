// TimeStampMpscQueue: the intrusive multi-producer, single-consumer FIFO that
// hands completed-operation timestamps from benchmark workers to the one
// recorder thread. API: Add / Poll / Clear, nothing else.
//
// Algorithm: Vyukov's intrusive MPSC queue ("exchange on tail") with a stub
// node, made strictly linearizable (see Poll) and paired with node recycling
// (TimeStampNodePool) instead of a garbage collector.
//
// Contract
//   * Add(node): any number of threads, concurrently. The node must not be in
//     any queue (single use until Poll returns it). Wait-free: one XCHG and one
//     store, no loop, no allocation.
//   * Poll(), Clear(): exactly one consumer thread for the queue's lifetime.
//   * FIFO: nodes are returned in the order of their tail exchanges, so per
//     producer in program order. Every added node is returned exactly once.
//   * Clear() is terminal: it drains the queue and any later Add/Poll is a
//     contract violation. Debug builds abort naming the violation for: adding a
//     node that is still queued, a second consumer, use after Clear.
//
// State and invariants (numbered as referred to below)
//   I1. tail_ (producer-shared, own cache line) points to the most recently
//       exchanged node; the chain from head_ follows `next` links to it.
//   I2. head_ (consumer-owned, plain field) points to the node at the front:
//       either the stub or the oldest unconsumed data node.
//   I3. A node's `next` is written exactly once while it is in the queue, by
//       the single producer whose exchange returned that node as `prev`.
//   I4. Between a producer's exchange and its link store the chain is
//       temporarily cut at `prev`; the consumer never skips over such a cut.
//
// Linearization points
//   * Add: the tail_ exchange. It fixes the node's FIFO position.
//   * Poll returning a node: the acquire load that observes the node's
//     successor link (or the stub behind it); the node's Add exchanged
//     earlier, so it is linearized before the Poll.
//   * Poll returning nullptr: the acquire load of tail_ that finds the stub
//     both at head_ and at tail_; every completed Add has exchanged before it
//     and its node has been consumed, so the queue is empty at that instant.
//   When Poll finds a cut (I4) it waits for the link instead of reporting an
//   empty queue, which keeps histories linearizable. That wait is bounded by
//   one producer's two-instruction window unless the producer is preempted, so
//   the consumer is blocking in that rare case, never the producers.
//
// Memory ordering (every non-relaxed atomic)
//   * Add: tail_.exchange is acq_rel: release publishes this producer's
//     `node->next = nullptr`, acquire orders the predecessor's own reset of
//     `prev->next` before our store to it. prev->next.store(node) is release:
//     it publishes the payload written before Add to the consumer.
//   * Poll: loads of `next` are acquire (pair with the producer's release
//     link); the empty check loads tail_ with acquire.
//
// Reclamation (why no producer ever touches a freed or reused node)
//   A producer dereferences exactly one node other than its own: the `prev`
//   returned by its exchange, and only to store `prev->next`. By I3 that store
//   is the only write that can make prev's successor visible, and Poll returns
//   a node only after observing its successor (or after linking the stub
//   behind it and then observing the link). So Poll cannot return `prev` until
//   the producer's store has happened, and the store is the producer's last
//   access. Each node is exchanged out as `prev` by exactly one producer, so
//   once Poll returns a node no producer holds or will obtain a pointer to it:
//   the caller may recycle it at once. Producers never traverse, so there is no
//   stale-traversal hazard and no need for epochs or hazard pointers.
//
// Backlog polling (PollMode::kLeaveLast): taking the newest node requires
//   linking the stub behind it with a second exchange on tail_, the one line
//   every producer writes; a consumer that keeps up would do that on nearly
//   every Poll and the two sides would serialize on tail_. kLeaveLast returns
//   nullptr instead whenever the oldest node has no linked successor, so under
//   load the consumer reads only `next` links and never writes shared state.
//   It is a relaxed operation outside the linearizable contract (it may report
//   nothing while one node is queued); the recorder uses it while busy and a
//   kAll Poll when idle or stopping, so every node is still taken.
//
// Why this shape is the default: the seed's CAS-on-last-next queue with tail
//   slack needs producers to traverse from a tail hint; in C++ that requires
//   epoch or hazard-pointer reclamation (a fence or a shared counter on every
//   Add) before a node may be reused, while this queue's producers finish with
//   one XCHG and one store and nodes are recyclable immediately. Measured side
//   by side in tests/bench/queue_bench.cc (results in tests/bench/README.md).
#pragma once

#include <atomic>
#include <cstddef>
#include <thread>

#include "daemon/core/contract.h"
#include "daemon/core/cpu_relax.h"
#include "daemon/core/time_stamp.h"

namespace perld {

// kAll: the linearizable Poll. kLeaveLast: take the oldest node only if its
// successor is already linked, leaving the newest node in place; it never
// touches the producers' tail_ (see "Backlog polling" above).
enum class PollMode { kAll, kLeaveLast };

template <class Node>
class BasicMpscQueue {
 public:
  BasicMpscQueue() : tail_(&stub_), head_(&stub_) {}
  BasicMpscQueue(const BasicMpscQueue&) = delete;
  BasicMpscQueue& operator=(const BasicMpscQueue&) = delete;

  // Appends `node`. Any thread. REQUIRES: node is not in any queue.
  void Add(Node* node) {
    PERLD_CONTRACT(!cleared_.load(std::memory_order_relaxed),
                   "TimeStampMpscQueue::Add after Clear (use after clear)");
#if PERLD_CONTRACT_CHECKS
    PERLD_CONTRACT(!node->debug_in_queue.exchange(true, std::memory_order_relaxed),
                   "TimeStampMpscQueue::Add of a node that is still in a queue");
#endif
    Link(node);
  }

  // Removes and returns the oldest node, or nullptr when the queue is empty
  // (kAll) or holds no node with a linked successor (kLeaveLast). Consumer
  // thread only. The returned node is no longer referenced by the queue or by
  // any producer and may be reused immediately.
  Node* Poll(PollMode mode = PollMode::kAll) {
    CheckConsumer();
    Node* head = head_;
    Node* next = head->next.load(std::memory_order_acquire);
    if (head == &stub_) {
      if (next == nullptr) {
        if (mode == PollMode::kLeaveLast) return nullptr;
        if (tail_.load(std::memory_order_acquire) == &stub_) return nullptr;  // empty
        next = AwaitLink(head);  // a producer is between its exchange and link (I4)
      }
      head_ = next;  // drop the stub from the front
      head = next;
      next = head->next.load(std::memory_order_acquire);
    }
    if (next == nullptr) {
      if (mode == PollMode::kLeaveLast) return nullptr;
      // head may be the last node: put the stub behind it so it can be returned.
      if (tail_.load(std::memory_order_acquire) == head) Link(&stub_);
      next = AwaitLink(head);
    }
    head_ = next;
    __builtin_prefetch(next);  // the next Poll reads next->next: start the miss now
#if PERLD_CONTRACT_CHECKS
    head->debug_in_queue.store(false, std::memory_order_relaxed);
#endif
    return head;
  }

  // Drains the queue, calling `release(node)` for every node in FIFO order, and
  // retires the queue. Consumer thread only. Returns the number of nodes.
  template <class Release>
  size_t Clear(Release&& release) {
    size_t n = 0;
    for (Node* node = Poll(); node != nullptr; node = Poll(), ++n) release(node);
    cleared_.store(true, std::memory_order_relaxed);
    return n;
  }

 private:
  void Link(Node* node) {
    node->next.store(nullptr, std::memory_order_relaxed);
    Node* prev = tail_.exchange(node, std::memory_order_acq_rel);
    prev->next.store(node, std::memory_order_release);  // last access to prev
  }

  // Waits until the producer that exchanged `node` as its prev links it.
  static Node* AwaitLink(Node* node) {
    for (unsigned spins = 0;; ++spins) {
      Node* next = node->next.load(std::memory_order_acquire);
      if (next != nullptr) return next;
      if (spins < 64) {
        CpuRelax();
      } else {
        std::this_thread::yield();  // the linking producer was preempted
      }
    }
  }

  void CheckConsumer() {
    PERLD_CONTRACT(!cleared_.load(std::memory_order_relaxed),
                   "TimeStampMpscQueue::Poll after Clear (use after clear)");
#if PERLD_CONTRACT_CHECKS
    std::thread::id none;
    const std::thread::id self = std::this_thread::get_id();
    if (!consumer_.compare_exchange_strong(none, self, std::memory_order_relaxed)) {
      PERLD_CONTRACT(none == self, "TimeStampMpscQueue::Poll from a second consumer thread");
    }
#endif
  }

  alignas(64) std::atomic<Node*> tail_;  // producer-shared (I1)
  alignas(64) Node* head_;               // consumer-owned (I2)
  Node stub_;
  std::atomic<bool> cleared_{false};
  std::atomic<std::thread::id> consumer_{};  // contract state (always present: contract.h)
};

// The per-record intrusive queue (the seed's shape) and the batch queue of the
// default channel: the same algorithm over different nodes.
using TimeStampMpscQueue = BasicMpscQueue<TimeStampNode>;
using TimeStampBatchQueue = BasicMpscQueue<TimeStampBatchNode>;

}  // namespace perld
