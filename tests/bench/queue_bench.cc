// Queue benchmarks: the seed's queue table reproduced side by side in one run
// (results and the exact command in tests/bench/README.md, section "Queue").
//
//   RoundTrip/*   one thread: take a slot, enqueue one timestamp, dequeue it,
//                 give the slot back. ns/op and heap bytes per op ("B/op").
//   Throughput/*  P producer threads (1, 2, 4) each publish kPerProducer
//                 timestamps per iteration while the benchmark thread consumes
//                 with the recorder's elastic behavior (poll; when empty, a
//                 short spin, then yield). "items/s" is the producers' rate:
//                 all items over the span from the first producer's first send
//                 to the last producer's last send (manual time); "drained/s"
//                 is all items over the span until the consumer took the last.
//                 The consumer is pinned to CPU 0, producers to the other CPUs.
//
// Contenders
//   Intrusive      TimeStampMpscQueue + TimeStampNodePool (perld's default):
//                  Acquire -> Add -> Poll -> Release (ring-ordered reuse).
//   Library        moodycamel::ConcurrentQueue<TimeStamp>, without and with
//                  producer/consumer tokens (tokens: the documented fast path).
//   MutexDeque     std::mutex + std::deque<TimeStamp>.
//   SeedCas        a bench-only model of the seed's algorithm (see SeedMpscQueue).
//   Channels/*     TimeStampChannels (maxQs=1, one shared queue) drained with
//                  Drain(), kMpsc vs kLibrary: the production hand-off.
#include <benchmark/benchmark.h>
#include <concurrentqueue/concurrentqueue.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "daemon/core/cpu_relax.h"
#include "daemon/core/time_stamp.h"
#include "daemon/core/timestamp_channels.h"
#include "daemon/core/timestamp_mpsc_queue.h"
#include "daemon/core/timestamp_node_pool.h"
#include "daemon/core/timestamp_sink.h"
#include "tests/bench/alloc_counter.h"

namespace perld::bench {
namespace {

// ---------------------------------------------------------------------------
// The seed's algorithm (bench only): CAS on the last node's next, tail as a
// hint with one-node slack, consumer-owned head, batched retirement of 16
// predecessors by self-link after release-publishing a recovery head.
//
// Safe memory reclamation is NOT implemented: a producer may still traverse a
// retired node, so nodes come from an arena and are never reused while any
// thread may hold a pointer to them (throughput: the arena and the queue are
// reset only between iterations, when every producer is parked and the queue
// is drained; round trip: one thread, so a node retired 4096 operations ago
// has no other reader). A real C++ version would add epoch or hazard-pointer
// reclamation (a fence or shared counter per operation, plus deferred frees),
// so these figures are an OPTIMISTIC LOWER BOUND on the cost of that shape.
struct SeedNode {
  TimeStamp ts;
  std::atomic<SeedNode*> next{nullptr};
};

class SeedMpscQueue {
 public:
  static constexpr int kRetireBatch = 16;

  // REQUIRES: no other thread uses the queue.
  void Reset(SeedNode* sentinel) {
    sentinel->next.store(nullptr, std::memory_order_relaxed);
    tail_.store(sentinel, std::memory_order_relaxed);
    recovery_head_.store(sentinel, std::memory_order_relaxed);
    head_ = sentinel;
    retired_count_ = 0;
  }

  // Any producer thread.
  void Add(SeedNode* node) {
    node->next.store(nullptr, std::memory_order_relaxed);
    SeedNode* t = tail_.load(std::memory_order_acquire);
    SeedNode* p = t;
    for (;;) {
      SeedNode* q = p->next.load(std::memory_order_acquire);
      if (q == nullptr) {
        // Linearization point. release: publishes the payload.
        if (p->next.compare_exchange_strong(q, node, std::memory_order_release,
                                            std::memory_order_acquire)) {
          // One-node slack: move the hint only after traversing past it.
          if (p != t) {
            tail_.compare_exchange_weak(t, node, std::memory_order_release,
                                        std::memory_order_relaxed);
          }
          return;
        }
        continue;  // lost to another producer: re-read p->next
      }
      if (q == p) {
        // p was retired: prefer a newer tail, else the recovery head.
        SeedNode* newer = tail_.load(std::memory_order_acquire);
        if (newer != t) {
          t = newer;
          p = newer;
        } else {
          p = recovery_head_.load(std::memory_order_acquire);
        }
        continue;
      }
      // Follow next, or jump to a newer tail if the hint moved.
      SeedNode* newer = nullptr;
      if (p != t && t != (newer = tail_.load(std::memory_order_acquire))) {
        t = newer;
        p = newer;
      } else {
        p = q;
      }
    }
  }

  // Consumer thread. The returned node becomes the head sentinel and carries
  // the timestamp (as in the seed).
  SeedNode* Poll() {
    SeedNode* h = head_;
    SeedNode* n = h->next.load(std::memory_order_acquire);
    if (n == nullptr) return nullptr;
    head_ = n;
    retired_[retired_count_++] = h;
    if (retired_count_ == kRetireBatch) {
      // release: a producer that sees a self-link then finds this recovery point.
      recovery_head_.store(n, std::memory_order_release);
      for (SeedNode* r : retired_) r->next.store(r, std::memory_order_release);
      retired_count_ = 0;
    }
    return n;
  }

 private:
  alignas(64) std::atomic<SeedNode*> tail_{nullptr};
  alignas(64) SeedNode* head_ = nullptr;
  std::atomic<SeedNode*> recovery_head_{nullptr};
  SeedNode* retired_[kRetireBatch] = {};
  int retired_count_ = 0;
};

void ReportBytesPerOp(benchmark::State& state, uint64_t bytes_before, int64_t ops) {
  state.counters["B/op"] = benchmark::Counter(static_cast<double>(AllocatedBytes() - bytes_before) /
                                              static_cast<double>(std::max<int64_t>(ops, 1)));
}

// ---------------------------------------------------------------------------
// Round trips (single thread).

constexpr int kWarmup = 4096;

// Intrusive queue + pool. `backlog` nodes stay queued throughout: with 0 every
// Poll takes the last node and re-links the stub (two exchanges per round
// trip); with 1 it never does (the busy-recorder path: one exchange).
void BM_RoundTrip_Intrusive(benchmark::State& state, int backlog) {
  TimeStampNodePool pool(ChannelOptions{}.max_pending_per_worker);  // production default
  TimeStampMpscQueue queue;
  for (int b = 0; b < backlog; ++b) queue.Add(pool.Acquire());
  int64_t i = 0;
  auto round_trip = [&] {
    TimeStampNode* node = pool.Acquire();
    node->ts = TimeStamp{i, i + 5, 1, 100};
    queue.Add(node);
    TimeStampNode* got = queue.Poll();
    benchmark::DoNotOptimize(got->ts.end);
    TimeStampNodePool::Release(got);
    ++i;
  };
  for (int w = 0; w < kWarmup; ++w) round_trip();
  const uint64_t bytes = AllocatedBytes();
  for (auto _ : state) round_trip();
  ReportBytesPerOp(state, bytes, state.iterations());
  while (TimeStampNode* n = queue.Poll()) TimeStampNodePool::Release(n);
}
BENCHMARK_CAPTURE(BM_RoundTrip_Intrusive, empty, 0)->Name("RoundTrip/Intrusive");
BENCHMARK_CAPTURE(BM_RoundTrip_Intrusive, backlog1, 1)->Name("RoundTrip/IntrusiveBacklog1");

// Diagnostic: the queue alone, one caller-owned node, no pool.
void BM_RoundTrip_IntrusiveNoPool(benchmark::State& state) {
  TimeStampMpscQueue queue;
  TimeStampNode node;
  int64_t i = 0;
  const uint64_t bytes = AllocatedBytes();
  for (auto _ : state) {
    node.ts = TimeStamp{i, i + 5, 1, 100};
    queue.Add(&node);
    TimeStampNode* got = queue.Poll();
    benchmark::DoNotOptimize(got->ts.end);
    ++i;
  }
  ReportBytesPerOp(state, bytes, state.iterations());
}
BENCHMARK(BM_RoundTrip_IntrusiveNoPool)->Name("RoundTrip/IntrusiveNoPool");

void BM_RoundTrip_Library(benchmark::State& state) {
  moodycamel::ConcurrentQueue<TimeStamp> queue;
  int64_t i = 0;
  TimeStamp out;
  auto round_trip = [&] {
    queue.enqueue(TimeStamp{i, i + 5, 1, 100});
    queue.try_dequeue(out);
    benchmark::DoNotOptimize(out.end);
    ++i;
  };
  for (int w = 0; w < kWarmup; ++w) round_trip();
  const uint64_t bytes = AllocatedBytes();
  for (auto _ : state) round_trip();
  ReportBytesPerOp(state, bytes, state.iterations());
}
BENCHMARK(BM_RoundTrip_Library)->Name("RoundTrip/Library");

void BM_RoundTrip_LibraryTokens(benchmark::State& state) {
  moodycamel::ConcurrentQueue<TimeStamp> queue;
  moodycamel::ProducerToken producer(queue);
  moodycamel::ConsumerToken consumer(queue);
  int64_t i = 0;
  TimeStamp out;
  auto round_trip = [&] {
    queue.enqueue(producer, TimeStamp{i, i + 5, 1, 100});
    queue.try_dequeue(consumer, out);
    benchmark::DoNotOptimize(out.end);
    ++i;
  };
  for (int w = 0; w < kWarmup; ++w) round_trip();
  const uint64_t bytes = AllocatedBytes();
  for (auto _ : state) round_trip();
  ReportBytesPerOp(state, bytes, state.iterations());
}
BENCHMARK(BM_RoundTrip_LibraryTokens)->Name("RoundTrip/LibraryTokens");

void BM_RoundTrip_MutexDeque(benchmark::State& state) {
  std::mutex mu;
  std::deque<TimeStamp> queue;
  int64_t i = 0;
  TimeStamp out;
  auto round_trip = [&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(TimeStamp{i, i + 5, 1, 100});
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      out = queue.front();
      queue.pop_front();
    }
    benchmark::DoNotOptimize(out.end);
    ++i;
  };
  for (int w = 0; w < kWarmup; ++w) round_trip();
  const uint64_t bytes = AllocatedBytes();
  for (auto _ : state) round_trip();
  ReportBytesPerOp(state, bytes, state.iterations());
}
BENCHMARK(BM_RoundTrip_MutexDeque)->Name("RoundTrip/MutexDeque");

void BM_RoundTrip_SeedCas(benchmark::State& state) {
  constexpr size_t kRing = 4096;  // single thread: reuse after 4096 ops is safe
  auto ring = std::make_unique<SeedNode[]>(kRing + 1);
  SeedMpscQueue queue;
  queue.Reset(&ring[kRing]);
  size_t i = 0;
  auto round_trip = [&] {
    SeedNode* node = &ring[i % kRing];
    node->ts = TimeStamp{static_cast<int64_t>(i), static_cast<int64_t>(i) + 5, 1, 100};
    queue.Add(node);
    SeedNode* got = queue.Poll();
    benchmark::DoNotOptimize(got->ts.end);
    ++i;
  };
  for (int w = 0; w < kWarmup; ++w) round_trip();
  const uint64_t bytes = AllocatedBytes();
  for (auto _ : state) round_trip();
  ReportBytesPerOp(state, bytes, state.iterations());
}
BENCHMARK(BM_RoundTrip_SeedCas)->Name("RoundTrip/SeedCas");

// ---------------------------------------------------------------------------
// Throughput: P producers, one consumer (the benchmark thread).

constexpr int64_t kPerProducer = 200'000;  // per producer per iteration
constexpr int kThroughputIterations = 20;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Pinning (the seed's protocol, 10.4): the consumer runs on CPU 0 and the
// producers share the other CPUs, so producer and consumer really run in
// parallel and do not migrate between repetitions. No-op on one CPU.
int OnlineCpus() { return static_cast<int>(std::thread::hardware_concurrency()); }

void PinTo(int cpu) {
  if (OnlineCpus() < 2) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

class ScopedConsumerPin {
 public:
  ScopedConsumerPin() {
    pthread_getaffinity_np(pthread_self(), sizeof(saved_), &saved_);
    PinTo(0);
  }
  ~ScopedConsumerPin() { pthread_setaffinity_np(pthread_self(), sizeof(saved_), &saved_); }

 private:
  cpu_set_t saved_;
};

int ProducerCpu(int p) { return OnlineCpus() < 2 ? 0 : 1 + p % (OnlineCpus() - 1); }

// Impl: void BeginIteration() (all threads quiescent)
//       void ProducerThreadStart(int p) / Produce(int p, int64_t seq) (producer p)
//       int64_t Consume()  (consumer: items taken, 0 when empty)
//       void ConsumerIdle() (consumer, after an empty poll)
template <class Impl>
void RunThroughput(benchmark::State& state, Impl& impl) {
  const int producers = static_cast<int>(state.range(0));
  ScopedConsumerPin pin;
  struct alignas(64) Span {
    int64_t start = 0;
    int64_t end = 0;
  };
  std::vector<Span> spans(static_cast<size_t>(producers));
  std::atomic<uint64_t> generation{0};
  std::atomic<int> done{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      PinTo(ProducerCpu(p));
      impl.ProducerThreadStart(p);
      uint64_t seen = 0;
      for (;;) {
        generation.wait(seen, std::memory_order_acquire);
        seen = generation.load(std::memory_order_acquire);
        if (stop.load(std::memory_order_acquire)) return;
        Span& span = spans[static_cast<size_t>(p)];
        span.start = NowNs();
        for (int64_t i = 0; i < kPerProducer; ++i) impl.Produce(p, i);
        span.end = NowNs();
        done.fetch_add(1, std::memory_order_release);
      }
    });
  }
  const int64_t total = kPerProducer * producers;
  // One iteration: returns the producers' span in ns; adds the span from the
  // first send to the consumer taking the last item to *drained_ns.
  int64_t drained_ns = 0;
  auto iteration = [&]() -> int64_t {
    impl.BeginIteration();
    done.store(0, std::memory_order_relaxed);
    generation.fetch_add(1, std::memory_order_release);
    generation.notify_all();
    int64_t received = 0;
    int idle = 0;
    while (received < total) {
      const int64_t got = impl.Consume();
      if (got > 0) {
        received += got;
        idle = 0;
        continue;
      }
      impl.ConsumerIdle();
      if (++idle < 64) {
        CpuRelax();
      } else {
        std::this_thread::yield();
      }
    }
    const int64_t drained_at = NowNs();
    impl.ConsumerIdle();
    while (done.load(std::memory_order_acquire) < producers) std::this_thread::yield();
    int64_t first = spans[0].start;
    int64_t last = spans[0].end;
    for (const Span& s : spans) {
      first = std::min(first, s.start);
      last = std::max(last, s.end);
    }
    drained_ns += drained_at - first;
    return last - first;
  };
  iteration();  // warm-up: grows pools, blocks, deque chunks
  drained_ns = 0;
  const uint64_t bytes = AllocatedBytes();
  double seconds = 0;
  for (auto _ : state) {
    const double s = static_cast<double>(iteration()) * 1e-9;
    state.SetIterationTime(s);
    seconds += s;
  }
  ReportBytesPerOp(state, bytes, state.iterations() * total);
  const auto items = static_cast<double>(state.iterations() * total);
  state.counters["items/s"] = benchmark::Counter(items / seconds);
  // End to end: until the consumer has taken every item (the sustainable rate).
  state.counters["drained/s"] =
      benchmark::Counter(items / (static_cast<double>(drained_ns) * 1e-9));
  stop.store(true, std::memory_order_release);
  generation.fetch_add(1, std::memory_order_release);
  generation.notify_all();
  for (auto& t : threads) t.join();
  if (impl.checksum() !=
      static_cast<uint64_t>(state.iterations() + 1) * static_cast<uint64_t>(total)) {
    state.SkipWithError("lost or duplicated items");
  }
}

class IntrusiveImpl {
 public:
  // Pools may hold a whole iteration, so producers are never throttled by the
  // pending bound: the same unbounded-producer conditions as the other raw
  // queues (Channels/* run with the production bound). Pools grow lazily, as
  // in production, so the node working set is the peak in-flight count.
  explicit IntrusiveImpl(int producers) {
    for (int p = 0; p < producers; ++p) {
      pools_.push_back(std::make_unique<TimeStampNodePool>(kPerProducer));
    }
  }
  void BeginIteration() {}
  void ProducerThreadStart(int) {}
  void Produce(int p, int64_t i) {
    TimeStampNodePool& pool = *pools_[static_cast<size_t>(p)];
    TimeStampNode* node = pool.Acquire();
    for (int spins = 0; node == nullptr; node = pool.Acquire()) {
      if (++spins > 64) std::this_thread::yield();  // pending bound reached
    }
    node->ts = TimeStamp{i, i + 5, 1, 100};
    queue_.Add(node);
  }
  int64_t Consume() {
    TimeStampNode* node = queue_.Poll();
    if (node == nullptr) return 0;
    count_ += static_cast<uint64_t>(node->ts.records);
    TimeStampNodePool::Release(node);
    return 1;
  }
  void ConsumerIdle() {}
  uint64_t checksum() const { return count_; }

 private:
  std::vector<std::unique_ptr<TimeStampNodePool>> pools_;  // outlive the queue
  TimeStampMpscQueue queue_;
  uint64_t count_ = 0;
};

class LibraryImpl {
 public:
  explicit LibraryImpl(int producers)
      : tokens_(static_cast<size_t>(producers)), consumer_(queue_) {}
  void BeginIteration() {}
  void ProducerThreadStart(int p) {
    tokens_[static_cast<size_t>(p)] = std::make_unique<moodycamel::ProducerToken>(queue_);
  }
  void Produce(int p, int64_t i) {
    queue_.enqueue(*tokens_[static_cast<size_t>(p)], TimeStamp{i, i + 5, 1, 100});
  }
  int64_t Consume() {
    TimeStamp out;
    if (!queue_.try_dequeue(consumer_, out)) return 0;
    count_ += static_cast<uint64_t>(out.records);
    return 1;
  }
  void ConsumerIdle() {}
  uint64_t checksum() const { return count_; }

 private:
  moodycamel::ConcurrentQueue<TimeStamp> queue_;
  std::vector<std::unique_ptr<moodycamel::ProducerToken>> tokens_;
  moodycamel::ConsumerToken consumer_;
  uint64_t count_ = 0;
};

class MutexDequeImpl {
 public:
  explicit MutexDequeImpl(int) {}
  void BeginIteration() {}
  void ProducerThreadStart(int) {}
  void Produce(int, int64_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(TimeStamp{i, i + 5, 1, 100});
  }
  int64_t Consume() {
    TimeStamp out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) return 0;
      out = queue_.front();
      queue_.pop_front();
    }
    count_ += static_cast<uint64_t>(out.records);
    return 1;
  }
  void ConsumerIdle() {}
  uint64_t checksum() const { return count_; }

 private:
  std::mutex mu_;
  std::deque<TimeStamp> queue_;
  uint64_t count_ = 0;
};

class SeedCasImpl {
 public:
  explicit SeedCasImpl(int producers)
      : producers_(producers),
        arena_(std::make_unique<SeedNode[]>(static_cast<size_t>(producers * kPerProducer) + 1)) {}
  // Quiescent: every producer is parked and the queue is drained, so no
  // thread holds a node pointer; the arena can be reused from the start.
  void BeginIteration() { queue_.Reset(&arena_[static_cast<size_t>(producers_ * kPerProducer)]); }
  void ProducerThreadStart(int) {}
  void Produce(int p, int64_t i) {
    SeedNode* node = &arena_[static_cast<size_t>(p * kPerProducer + i)];
    node->ts = TimeStamp{i, i + 5, 1, 100};
    queue_.Add(node);
  }
  int64_t Consume() {
    SeedNode* node = queue_.Poll();
    if (node == nullptr) return 0;
    count_ += static_cast<uint64_t>(node->ts.records);
    return 1;
  }
  void ConsumerIdle() {}
  uint64_t checksum() const { return count_; }

 private:
  const int producers_;
  std::unique_ptr<SeedNode[]> arena_;
  SeedMpscQueue queue_;
  uint64_t count_ = 0;
};

class CountingSink : public TimeStampSink {
 public:
  void Accept(const TimeStamp* batch, size_t n) override {
    for (size_t i = 0; i < n; ++i) count_ += static_cast<uint64_t>(batch[i].records);
  }
  void Tick(int64_t) override {}
  uint64_t count() const { return count_; }

 private:
  uint64_t count_ = 0;
};

template <QueueKind kKind>
class ChannelsImpl {
 public:
  explicit ChannelsImpl(int producers) {
    ChannelOptions options;
    options.queue = kKind;
    options.max_qs = 1;
    channels_ = std::move(TimeStampChannels::Create(options, producers).value());
  }
  void BeginIteration() {}
  void ProducerThreadStart(int) {}
  void Produce(int p, int64_t i) { channels_->producer(p).Send(i, i + 5, 1, 100); }
  int64_t Consume() { return static_cast<int64_t>(channels_->Drain(sink_)); }
  void ConsumerIdle() {}
  uint64_t checksum() const { return sink_.count(); }

 private:
  std::unique_ptr<TimeStampChannels> channels_;
  CountingSink sink_;
};

template <class Impl>
void BM_Throughput(benchmark::State& state) {
  Impl impl(static_cast<int>(state.range(0)));
  RunThroughput(state, impl);
}

#define PERLD_THROUGHPUT(impl, name)      \
  BENCHMARK_TEMPLATE(BM_Throughput, impl) \
      ->Name("Throughput/" name)          \
      ->ArgName("producers")              \
      ->Arg(1)                            \
      ->Arg(2)                            \
      ->Arg(4)                            \
      ->UseManualTime()                   \
      ->Iterations(kThroughputIterations) \
      ->Unit(benchmark::kMillisecond)

PERLD_THROUGHPUT(IntrusiveImpl, "Intrusive");
PERLD_THROUGHPUT(LibraryImpl, "LibraryTokens");
PERLD_THROUGHPUT(MutexDequeImpl, "MutexDeque");
PERLD_THROUGHPUT(SeedCasImpl, "SeedCas");
PERLD_THROUGHPUT(ChannelsImpl<QueueKind::kMpsc>, "Channels/kMpsc");
PERLD_THROUGHPUT(ChannelsImpl<QueueKind::kLibrary>, "Channels/kLibrary");

}  // namespace
}  // namespace perld::bench

BENCHMARK_MAIN();
