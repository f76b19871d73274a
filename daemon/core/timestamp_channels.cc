#include "daemon/core/timestamp_channels.h"

#include <concurrentqueue/concurrentqueue.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "daemon/core/idle_waiter.h"

namespace perld {
namespace {
// A producer blocked at the pending bound parks at most this long between
// checks: the recorder frees a batch within microseconds of draining.
constexpr int64_t kProducerMaxParkNs = 50'000;
}  // namespace

// A library-queue element: the timestamp plus its producer, so the recorder
// can return credit to the right producer (the pending bound).
struct TimeStampProducer::LibraryItem {
  TimeStamp ts;
  int64_t intended = 0;  // when origin->paced()
  TimeStampProducer* origin = nullptr;
};

namespace {
// Timestamps per batch node: a pending bound of B allows B / K nodes of K
// timestamps; K = B / 8 (at least 1, at most the node's capacity) keeps at
// least 8 nodes in flight per producer, so a small bound still pipelines.
uint32_t BatchCapacity(const ChannelOptions& options) {
  const size_t k = std::max<size_t>(options.max_pending_per_worker, 2) / 8;
  return static_cast<uint32_t>(std::clamp<size_t>(k, 1, TimeStampBatchNode::kCapacity));
}
TimeStampProducer::Path PathOf(const ChannelOptions& options) {
  if (options.queue == QueueKind::kLibrary) return TimeStampProducer::Path::kLibrary;
  return options.mpsc_batched ? TimeStampProducer::Path::kBatch : TimeStampProducer::Path::kRecord;
}
}  // namespace

TimeStampProducer::TimeStampProducer(const ChannelOptions& options,
                                     std::vector<TimeStampMpscQueue*> mpsc,
                                     std::vector<TimeStampBatchQueue*> batch,
                                     std::vector<LibraryQueue*> library)
    : path_(PathOf(options)),
      batch_cap_(BatchCapacity(options)),
      overflow_(options.overflow),
      max_pending_(std::max<size_t>(options.max_pending_per_worker, 1)),
      idle_ns_(options.producer_idle_ns),
      queue_count_(static_cast<uint32_t>(std::max({mpsc.size(), batch.size(), library.size()}))),
      mpsc_(std::move(mpsc)),
      batch_(std::move(batch)),
      library_(std::move(library)),
      // Pools allocate lazily: the ones a path does not use stay empty.
      pool_(options.max_pending_per_worker),
      batch_pool_(std::max<size_t>(options.max_pending_per_worker, 2) / batch_cap_, this) {
  for (LibraryQueue* q : library_)
    tokens_.push_back(std::make_unique<moodycamel::ProducerToken>(*q));
}

TimeStampProducer::~TimeStampProducer() = default;

template <class TryTake>
bool TimeStampProducer::ApplyOverflowPolicy(TryTake&& try_take) {
  if (overflow_ == OverflowPolicy::kDrop) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  blocked_.fetch_add(1, std::memory_order_relaxed);
  IdleWaiter waiter(idle_ns_, kProducerMaxParkNs);
  do {
    waiter.Wait();
  } while (!try_take());
  return true;
}

TimeStampNode* TimeStampProducer::AcquireSlow() {
  TimeStampNode* node = nullptr;
  ApplyOverflowPolicy([&] { return (node = pool_.Acquire()) != nullptr; });
  return node;
}

bool TimeStampProducer::OpenBatch() {
  TimeStampBatchNode* node = batch_pool_.Acquire();
  if (node == nullptr &&
      !ApplyOverflowPolicy([&] { return (node = batch_pool_.Acquire()) != nullptr; })) {
    return false;
  }
  node->seq = seq_;
  node->paced = paced_;
  open_node_ = node;
  open_count_ = 0;
  // release: seq and the reset count are visible to a recorder that loads it.
  open_.store(node, std::memory_order_release);
  return true;
}

void TimeStampProducer::PublishOpen() {
  TimeStampBatchNode* node = open_node_;
  // Cleared before the node enters a queue: a recorder that polls the node
  // (acquire on its link, which this thread's Add stores with release after
  // this store) can no longer load it from open_ (see the reclamation
  // argument in timestamp_channels.h).
  open_.store(nullptr, std::memory_order_relaxed);
  open_node_ = nullptr;
  ++seq_;
  batch_[next_queue_]->Add(node);
  if (++next_queue_ == queue_count_) next_queue_ = 0;
}

size_t TimeStampProducer::DrainOpen(TimeStampSink& sink) {
  TimeStampBatchNode* node = open_.load(std::memory_order_acquire);
  // Only when every earlier batch was delivered: keeps the producer's order.
  if (node == nullptr || node->seq != retired_) return 0;
  const uint32_t count = node->count.load(std::memory_order_acquire);
  if (count <= node->taken) return 0;
  const size_t n = count - node->taken;
  Deliver(node, n, sink);
  node->taken = count;
  return n;
}

void TimeStampProducer::Deliver(const TimeStampBatchNode* node, size_t n, TimeStampSink& sink) {
  if (node->paced) [[unlikely]] {
    sink.AcceptPaced(node->ts + node->taken, node->intended + node->taken, n);
  } else {
    sink.Accept(node->ts + node->taken, n);
  }
}

size_t TimeStampProducer::DeliverAndRecycle(TimeStampBatchNode* node, TimeStampSink& sink) {
  const uint32_t count = node->count.load(std::memory_order_acquire);
  size_t n = 0;
  if (count > node->taken) {
    n = count - node->taken;
    Deliver(node, n, sink);
  }
  auto* origin = static_cast<TimeStampProducer*>(node->origin);
  ++origin->retired_;
  origin->batch_pool_.Release(node);
  return n;
}

bool TimeStampProducer::WaitForCredit() {
  auto has_credit = [this] {
    // acquire: pairs with the recorder's release store in FlushAcks.
    acked_seen_ = acked_.load(std::memory_order_acquire);
    return sent_ - acked_seen_ < max_pending_;
  };
  return has_credit() || ApplyOverflowPolicy(has_credit);
}

bool TimeStampProducer::SendLibrary(int64_t intended, int64_t start, int64_t end, int32_t records,
                                    int32_t bytes) {
  if (sent_ - acked_seen_ >= max_pending_ && !WaitForCredit()) return false;
  library_[next_queue_]->enqueue(
      *tokens_[next_queue_], LibraryItem{TimeStamp{start, end, records, bytes}, intended, this});
  if (++next_queue_ == queue_count_) next_queue_ = 0;
  ++sent_;
  return true;
}

void TimeStampProducer::FlushAcks() {
  if (pending_acks_ == 0) return;
  // Single writer (the recorder); release publishes that the slots are free.
  acked_.store(acked_.load(std::memory_order_relaxed) + pending_acks_, std::memory_order_release);
  pending_acks_ = 0;
}

absl::StatusOr<std::unique_ptr<TimeStampChannels>> TimeStampChannels::Create(
    const ChannelOptions& options, int workers) {
  if (workers < 1) return absl::InvalidArgumentError("workers must be >= 1");
  if (options.max_qs < 0) return absl::InvalidArgumentError("maxQs must be >= 0");
  if (options.max_qs == 0 && options.q_per_worker < 1) {
    return absl::InvalidArgumentError("qPerWorker must be >= 1 when maxQs is 0");
  }
  if (options.max_qs > 4096 || options.q_per_worker > 4096) {
    return absl::InvalidArgumentError("maxQs and qPerWorker must be <= 4096");
  }
  if (options.max_pending_per_worker < 2) {
    return absl::InvalidArgumentError("maxPendingPerWorker must be >= 2");
  }
  return std::unique_ptr<TimeStampChannels>(new TimeStampChannels(options, workers));
}

TimeStampChannels::TimeStampChannels(const ChannelOptions& options, int workers)
    : options_(options), active_workers_(workers) {
  const bool shared = options.max_qs > 0;
  const int queues = shared ? options.max_qs : options.q_per_worker * workers;
  for (int q = 0; q < queues; ++q) {
    if (options.queue == QueueKind::kMpsc && options.mpsc_batched) {
      batch_queues_.push_back(std::make_unique<TimeStampBatchQueue>());
    } else if (options.queue == QueueKind::kMpsc) {
      mpsc_.push_back(std::make_unique<TimeStampMpscQueue>());
    } else {
      library_.push_back(std::make_unique<TimeStampProducer::LibraryQueue>());
    }
  }
  const int per_producer = shared ? options.max_qs : options.q_per_worker;
  for (int w = 0; w < workers; ++w) {
    std::vector<TimeStampMpscQueue*> mpsc;
    std::vector<TimeStampBatchQueue*> batch;
    std::vector<TimeStampProducer::LibraryQueue*> library;
    for (int i = 0; i < per_producer; ++i) {
      // Shared queues: start each worker at a different queue to spread load.
      const int q = shared ? (w + i) % queues : w * per_producer + i;
      if (!batch_queues_.empty()) {
        batch.push_back(batch_queues_[q].get());
      } else if (!mpsc_.empty()) {
        mpsc.push_back(mpsc_[q].get());
      } else {
        library.push_back(library_[q].get());
      }
    }
    producers_.push_back(std::unique_ptr<TimeStampProducer>(
        new TimeStampProducer(options, std::move(mpsc), std::move(batch), std::move(library))));
  }
}

TimeStampChannels::~TimeStampChannels() {
  // Queues hold nodes owned by producer pools: drop the queues first.
  mpsc_.clear();
  batch_queues_.clear();
  library_.clear();
}

void TimeStampChannels::SetActiveWorkers(int n) {
  active_workers_.store(std::clamp(n, 0, workers()), std::memory_order_release);
}

void TimeStampChannels::ActivateWorker(int worker) {
  int have = active_workers_.load(std::memory_order_relaxed);
  while (have < worker + 1 &&
         !active_workers_.compare_exchange_weak(have, worker + 1, std::memory_order_release,
                                                std::memory_order_relaxed)) {
  }
}

namespace {

// The queues and producers the recorder drains: those of the active workers
// (each owns queues [w * per, (w + 1) * per)), or every queue when shared.
struct ActiveRange {
  size_t queues;
  size_t producers;
};
ActiveRange ActiveOf(const ChannelOptions& o, size_t all_queues, int active) {
  const auto producers = static_cast<size_t>(active);
  if (o.max_qs > 0) return {all_queues, producers};
  return {std::min(all_queues, producers * static_cast<size_t>(o.q_per_worker)), producers};
}

}  // namespace

int TimeStampChannels::queue_count() const {
  return static_cast<int>(std::max({mpsc_.size(), batch_queues_.size(), library_.size()}));
}

size_t TimeStampChannels::Drain(TimeStampSink& sink, PollMode mode) {
  if (!batch_queues_.empty()) return DrainBatch(sink, mode);
  return options_.queue == QueueKind::kMpsc ? DrainMpsc(sink, mode) : DrainLibrary(sink);
}

namespace {
// Asks for the lines of a polled batch node's entries (and intended starts,
// for a paced producer's node) ahead of their first read.
void PrefetchEntries(const TimeStampBatchNode* node) {
  constexpr size_t kLine = 64;
  const auto* ts = reinterpret_cast<const char*>(node->ts);
  for (size_t off = 0; off < sizeof(node->ts); off += kLine) __builtin_prefetch(ts + off);
  if (node->paced) {
    const auto* intended = reinterpret_cast<const char*>(node->intended);
    for (size_t off = 0; off < sizeof(node->intended); off += kLine) {
      __builtin_prefetch(intended + off);
    }
  }
}
}  // namespace

size_t TimeStampChannels::DrainBatch(TimeStampSink& sink, PollMode mode) {
  // One node per queue per round (fairness; overlapping misses), each node
  // delivered to the sink in place: its entries are contiguous. One node
  // ahead: a polled node's entries (12 lines a producer core just wrote) are
  // prefetched while the node before it is delivered, so their transfers
  // overlap that work instead of stalling the recorder's first reads.
  constexpr size_t kMaxRounds = kMaxPerQueuePass / TimeStampBatchNode::kCapacity;
  size_t moved = 0;
  TimeStampBatchNode* ahead = nullptr;
  const ActiveRange active = ActiveOf(options_, batch_queues_.size(), active_workers());
  for (size_t round = 0; round < kMaxRounds; ++round) {
    size_t found = 0;
    for (size_t q = 0; q < active.queues; ++q) {
      TimeStampBatchNode* node = batch_queues_[q]->Poll();  // kAll: one exchange at most per batch
      if (node == nullptr) continue;
      ++found;
      PrefetchEntries(node);
      if (ahead != nullptr) moved += TimeStampProducer::DeliverAndRecycle(ahead, sink);
      ahead = node;
    }
    if (found == 0) break;
  }
  if (ahead != nullptr) moved += TimeStampProducer::DeliverAndRecycle(ahead, sink);
  // Take everything: also the published prefixes of the producers' open
  // batches (the bounded hand-off delay; see the class comment).
  if (mode == PollMode::kAll) {
    for (size_t p = 0; p < active.producers; ++p) moved += producers_[p]->DrainOpen(sink);
  }
  return moved;
}

size_t TimeStampChannels::DrainMpsc(TimeStampSink& sink, PollMode mode) {
  // Round-robin one node per queue per round: consecutive polls touch
  // different queues, so their cache misses (each node was last written by a
  // producer core) overlap instead of forming one dependent chain per queue.
  size_t moved = 0;
  size_t n = 0;
  bool paced = false;  // batch_ holds an entry of a paced producer
  const size_t queues = ActiveOf(options_, mpsc_.size(), active_workers()).queues;
  for (size_t round = 0; round < kMaxPerQueuePass; ++round) {
    size_t found = 0;
    for (size_t q = 0; q < queues; ++q) {
      TimeStampNode* node = mpsc_[q]->Poll(mode);
      if (node == nullptr) continue;
      ++found;
      batch_[n] = node->ts;
      if (node->paced) [[unlikely]] {
        MarkPaced(n, node->intended, &paced);
      } else if (paced) {
        intended_[n] = node->ts.start;
      }
      TimeStampNodePool::Release(node);  // the node is ours once Poll returns it
      if (++n == kBatch) {
        moved += Deliver(sink, n, paced);
        n = 0;
        paced = false;
      }
    }
    if (found == 0) break;
  }
  if (n > 0) moved += Deliver(sink, n, paced);
  return moved;
}

size_t TimeStampChannels::DrainLibrary(TimeStampSink& sink) {
  size_t moved = 0;
  TimeStampProducer::LibraryItem items[kBatch];
  const ActiveRange active = ActiveOf(options_, library_.size(), active_workers());
  for (size_t q = 0; q < active.queues; ++q) {
    auto& queue = library_[q];
    for (size_t taken = 0; taken < kMaxPerQueuePass;) {
      const size_t got = queue->try_dequeue_bulk(items, kBatch);
      if (got == 0) break;
      bool paced = false;
      for (size_t i = 0; i < got; ++i) {
        batch_[i] = items[i].ts;
        if (items[i].origin->paced()) [[unlikely]] {
          MarkPaced(i, items[i].intended, &paced);
        } else if (paced) {
          intended_[i] = items[i].ts.start;
        }
        items[i].origin->Ack();
      }
      moved += Deliver(sink, got, paced);
      taken += got;
    }
  }
  for (size_t p = 0; p < active.producers; ++p) producers_[p]->FlushAcks();
  return moved;
}

size_t TimeStampChannels::Deliver(TimeStampSink& sink, size_t n, bool paced) {
  if (paced) [[unlikely]] {
    sink.AcceptPaced(batch_, intended_, n);
  } else {
    sink.Accept(batch_, n);
  }
  return n;
}

std::vector<std::string> TimeStampChannels::Describe() const {
  std::vector<std::string> lines;
  if (!batch_queues_.empty()) {
    lines.push_back("PerL Timestamp Queue: TimeStampMpscQueue (MPSC, batch nodes of " +
                    std::to_string(producers_.front()->batch_capacity()) + ")");
  } else {
    lines.push_back(options_.queue == QueueKind::kMpsc
                        ? "PerL Timestamp Queue: TimeStampMpscQueue (MPSC, per record)"
                        : "PerL Timestamp Queue: moodycamel::ConcurrentQueue (library)");
  }
  if (options_.max_qs > 0) {
    lines.push_back("PerL Timestamp Queue Topology: " + std::to_string(options_.max_qs) +
                    " shared queue(s) for " + std::to_string(producers_.size()) +
                    " worker(s) (maxQs=" + std::to_string(options_.max_qs) + ")");
  } else {
    lines.push_back("PerL Timestamp Queue Topology: " + std::to_string(options_.q_per_worker) +
                    " queue(s) per worker, " + std::to_string(producers_.size()) +
                    " worker(s) (maxQs=0)");
  }
  lines.push_back(
      "PerL Timestamp Pending Bound: " + std::to_string(options_.max_pending_per_worker) +
      " per worker, overflow " +
      (options_.overflow == OverflowPolicy::kBlock ? "blocks the producer" : "drops and counts"));
  return lines;
}

uint64_t TimeStampChannels::dropped() const {
  uint64_t n = 0;
  for (const auto& p : producers_) n += p->dropped();
  return n;
}

uint64_t TimeStampChannels::blocked() const {
  uint64_t n = 0;
  for (const auto& p : producers_) n += p->blocked();
  return n;
}

}  // namespace perld
