// Paced producers (issue 30): every timestamp sent with SendPaced reaches the
// sink through AcceptPaced with exactly the intended start it was sent with,
// on every path (batch nodes, per-record MPSC, library queue) and both
// topologies (per-worker queues, one shared queue); closed-loop producers'
// timestamps reach Accept only, unless the channels mix them into a batch
// with paced ones, where their intended start is their start.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "daemon/core/time_stamp.h"
#include "daemon/core/timestamp_channels.h"
#include "daemon/core/timestamp_sink.h"

namespace perld {
namespace {

enum class ChannelPath { kBatch, kRecord, kLibrary };

const char* PathName(ChannelPath path) {
  switch (path) {
    case ChannelPath::kBatch:
      return "Batch";
    case ChannelPath::kRecord:
      return "Record";
    case ChannelPath::kLibrary:
      return "Library";
  }
  return "?";
}

ChannelOptions OptionsFor(ChannelPath path, int max_qs, size_t bound) {
  ChannelOptions o;
  o.queue = path == ChannelPath::kLibrary ? QueueKind::kLibrary : QueueKind::kMpsc;
  o.mpsc_batched = path == ChannelPath::kBatch;
  o.max_qs = max_qs;
  // One queue per producer: the channels keep each producer's order only
  // within one queue (rotation across queues is not ordered on every path).
  o.q_per_worker = 1;
  o.max_pending_per_worker = bound;
  o.overflow = OverflowPolicy::kBlock;
  return o;
}

// Producer p's i-th timestamp: a distinct start, the producer in `bytes`,
// a lag of 0..12 behind its intended start.
constexpr int64_t kStride = 10;
int64_t BaseOf(int p) { return int64_t{1'000'000'000} * (p + 1); }
int64_t StartOf(int p, int64_t i) { return BaseOf(p) + kStride * i; }
int64_t LagOf(int p, int64_t i) { return (i * 7 + p) % 13; }
int64_t IntendedOf(int p, int64_t i) { return StartOf(p, i) - LagOf(p, i); }
TimeStamp StampOf(int p, int64_t i) {
  const int64_t start = StartOf(p, i);
  return TimeStamp{start, start + 1 + i % 5, static_cast<int32_t>(1 + i % 3), p};
}
int64_t SeqOf(const TimeStamp& ts) { return (ts.start - BaseOf(ts.bytes)) / kStride; }

bool SendOne(TimeStampProducer& producer, int p, int64_t i) {
  const TimeStamp ts = StampOf(p, i);
  return producer.paced() ? producer.SendPaced(IntendedOf(p, i), ts.start, ts.end, ts.records, p)
                          : producer.Send(ts.start, ts.end, ts.records, p);
}

struct Entry {
  TimeStamp ts;
  int64_t intended = 0;
  bool via_paced = false;  // delivered by AcceptPaced
};

class RecordingSink : public TimeStampSink {
 public:
  void Accept(const TimeStamp* batch, size_t n) override {
    ++accept_calls;
    for (size_t i = 0; i < n; ++i) entries.push_back(Entry{batch[i], batch[i].start, false});
  }
  void AcceptPaced(const TimeStamp* batch, const int64_t* intended, size_t n) override {
    ++paced_calls;
    for (size_t i = 0; i < n; ++i) entries.push_back(Entry{batch[i], intended[i], true});
  }
  void Tick(int64_t /*now_ns*/) override {}

  std::vector<Entry> entries;
  int64_t accept_calls = 0;
  int64_t paced_calls = 0;
};

// Checks producer p's entries: exactly seq 0..n-1 in order, each with the
// timestamp it was sent with.
void ExpectProducerInOrder(const std::vector<Entry>& entries, int p, int64_t n) {
  int64_t next = 0;
  for (const Entry& e : entries) {
    if (e.ts.bytes != p) continue;
    const TimeStamp want = StampOf(p, next);
    ASSERT_EQ(e.ts.start, want.start) << "producer " << p << " entry " << next;
    ASSERT_EQ(e.ts.end, want.end) << "producer " << p << " entry " << next;
    ASSERT_EQ(e.ts.records, want.records) << "producer " << p << " entry " << next;
    ++next;
  }
  EXPECT_EQ(next, n) << "producer " << p;
}

using Param = std::tuple<ChannelPath, int>;  // path, max_qs

class PacedChannelsTest : public ::testing::TestWithParam<Param> {
 protected:
  ChannelPath path() const { return std::get<0>(GetParam()); }
  int max_qs() const { return std::get<1>(GetParam()); }
  std::unique_ptr<TimeStampChannels> Make(int producers, size_t bound = 1 << 12) {
    auto made = TimeStampChannels::Create(OptionsFor(path(), max_qs(), bound), producers);
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? std::move(*made) : nullptr;
  }
};

// Sends n timestamps from every producer, interleaved, with busy drains and
// take-everything drains at odd points (partial batches delivered in
// pieces), then drains everything. Returns the count Drain reported.
size_t SendInterleaved(TimeStampChannels& channels, RecordingSink& sink, int64_t n) {
  size_t drained = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int p = 0; p < channels.workers(); ++p) {
      EXPECT_TRUE(SendOne(channels.producer(p), p, i));
    }
    if (i % 37 == 5) drained += channels.Drain(sink, PollMode::kAll);
    if (i % 53 == 11) drained += channels.Drain(sink, PollMode::kLeaveLast);
  }
  for (size_t got = 1; got > 0;) {
    got = channels.Drain(sink, PollMode::kAll);
    drained += got;
  }
  return drained;
}

TEST_P(PacedChannelsTest, PacedTimestampsReachAcceptPacedWithTheirIntendedStarts) {
  constexpr int kProducers = 3;
  constexpr int64_t kN = 1000;
  std::unique_ptr<TimeStampChannels> channels = Make(kProducers);
  ASSERT_NE(channels, nullptr);
  for (int p = 0; p < kProducers; ++p) {
    channels->producer(p).set_paced();
    ASSERT_TRUE(channels->producer(p).paced());
  }
  RecordingSink sink;
  EXPECT_EQ(SendInterleaved(*channels, sink, kN), static_cast<size_t>(kProducers * kN));
  ASSERT_EQ(sink.entries.size(), static_cast<size_t>(kProducers * kN));
  EXPECT_EQ(sink.accept_calls, 0);
  EXPECT_GT(sink.paced_calls, 0);
  for (const Entry& e : sink.entries) {
    ASSERT_TRUE(e.via_paced);
    const int p = e.ts.bytes;
    ASSERT_GE(p, 0);
    ASSERT_LT(p, kProducers);
    ASSERT_EQ(e.intended, IntendedOf(p, SeqOf(e.ts))) << "producer " << p << " seq " << SeqOf(e.ts);
  }
  for (int p = 0; p < kProducers; ++p) ExpectProducerInOrder(sink.entries, p, kN);
  EXPECT_EQ(channels->dropped(), 0u);
}

TEST_P(PacedChannelsTest, ClosedLoopTimestampsReachAcceptOnly) {
  constexpr int kProducers = 3;
  constexpr int64_t kN = 1000;
  std::unique_ptr<TimeStampChannels> channels = Make(kProducers);
  ASSERT_NE(channels, nullptr);
  for (int p = 0; p < kProducers; ++p) ASSERT_FALSE(channels->producer(p).paced());
  RecordingSink sink;
  EXPECT_EQ(SendInterleaved(*channels, sink, kN), static_cast<size_t>(kProducers * kN));
  ASSERT_EQ(sink.entries.size(), static_cast<size_t>(kProducers * kN));
  EXPECT_EQ(sink.paced_calls, 0);
  EXPECT_GT(sink.accept_calls, 0);
  for (int p = 0; p < kProducers; ++p) ExpectProducerInOrder(sink.entries, p, kN);
}

// Producer 0 paced, producer 1 closed loop. A closed-loop entry delivered
// in a paced batch carries intended == start. Where the channels mix
// producers into one batch: the record path gathers one batch over every
// queue, the library path's bulk dequeue spans the producers of a shared
// queue; batch nodes hold one producer's entries only.
TEST_P(PacedChannelsTest, ClosedEntriesMixedIntoAPacedBatchHaveIntendedEqualToStart) {
  constexpr int64_t kN = 1000;
  std::unique_ptr<TimeStampChannels> channels = Make(2);
  ASSERT_NE(channels, nullptr);
  channels->producer(0).set_paced();
  RecordingSink sink;
  EXPECT_EQ(SendInterleaved(*channels, sink, kN), static_cast<size_t>(2 * kN));
  ASSERT_EQ(sink.entries.size(), static_cast<size_t>(2 * kN));
  int64_t paced_entries = 0;
  int64_t closed_via_accept = 0;
  int64_t closed_via_paced = 0;
  for (const Entry& e : sink.entries) {
    if (e.ts.bytes == 0) {
      ASSERT_TRUE(e.via_paced) << "a paced entry reached Accept, seq " << SeqOf(e.ts);
      ASSERT_EQ(e.intended, IntendedOf(0, SeqOf(e.ts))) << "seq " << SeqOf(e.ts);
      ++paced_entries;
    } else {
      ASSERT_EQ(e.ts.bytes, 1);
      ASSERT_EQ(e.intended, e.ts.start) << "closed entry seq " << SeqOf(e.ts);
      ++(e.via_paced ? closed_via_paced : closed_via_accept);
    }
  }
  EXPECT_EQ(paced_entries, kN);
  EXPECT_EQ(closed_via_accept + closed_via_paced, kN);
  const bool mixes =
      path() == ChannelPath::kRecord || (path() == ChannelPath::kLibrary && max_qs() == 1);
  if (mixes) {
    EXPECT_GT(closed_via_paced, 0) << "the case under test: closed entries in a paced batch";
  } else {
    EXPECT_EQ(closed_via_paced, 0) << "this path never mixes producers into one batch";
    EXPECT_EQ(closed_via_accept, kN);
  }
  ExpectProducerInOrder(sink.entries, 0, kN);
  ExpectProducerInOrder(sink.entries, 1, kN);
}

// 4 paced producer threads against a concurrently draining recorder thread:
// every (producer, seq) arrives exactly once, through AcceptPaced, with its
// intended start; each producer's order holds (one queue per producer, or
// one shared queue). A small pending bound makes producers wait and nodes
// recycle.
TEST_P(PacedChannelsTest, ConcurrentPacedProducersArriveExactlyOnceWithTheirIntendedStarts) {
  constexpr int kProducers = 4;
  constexpr int64_t kPerProducer = 200'000;
  std::unique_ptr<TimeStampChannels> channels = Make(kProducers, 256);
  ASSERT_NE(channels, nullptr);
  for (int p = 0; p < kProducers; ++p) channels->producer(p).set_paced();

  class CheckingSink : public TimeStampSink {
   public:
    void Accept(const TimeStamp* batch, size_t n) override {
      static_cast<void>(batch);
      accepted += static_cast<int64_t>(n);
    }
    void AcceptPaced(const TimeStamp* batch, const int64_t* intended, size_t n) override {
      for (size_t k = 0; k < n; ++k) {
        const TimeStamp& ts = batch[k];
        const int p = ts.bytes;
        if (p < 0 || p >= kProducers) {
          ++bad;
          continue;
        }
        const int64_t seq = SeqOf(ts);
        if (seq < 0 || seq >= kPerProducer) {
          ++bad;
          continue;
        }
        const TimeStamp want = StampOf(p, seq);
        if (ts.start != want.start || ts.end != want.end || ts.records != want.records) ++bad;
        if (intended[k] != IntendedOf(p, seq)) ++wrong_intended;
        if (seq != next[static_cast<size_t>(p)]) ++out_of_order;
        next[static_cast<size_t>(p)] = seq + 1;
        ++seen[static_cast<size_t>(p)][static_cast<size_t>(seq)];
      }
    }
    void Tick(int64_t /*now_ns*/) override {}

    std::vector<std::vector<uint8_t>> seen =
        std::vector<std::vector<uint8_t>>(kProducers, std::vector<uint8_t>(kPerProducer, 0));
    std::vector<int64_t> next = std::vector<int64_t>(kProducers, 0);
    int64_t accepted = 0;
    int64_t bad = 0;
    int64_t wrong_intended = 0;
    int64_t out_of_order = 0;
  } sink;

  std::atomic<int> running{kProducers};
  std::thread recorder([&] {
    // Busy passes leave each record queue's newest node; every 8th takes all.
    for (uint64_t pass = 0; running.load(std::memory_order_acquire) > 0; ++pass) {
      if (channels->Drain(sink, pass % 8 == 0 ? PollMode::kAll : PollMode::kLeaveLast) == 0) {
        std::this_thread::yield();
      }
    }
    // Every producer has sent and flushed: take everything left.
    while (channels->Drain(sink, PollMode::kAll) > 0) {
    }
  });
  std::vector<std::thread> producers;
  std::vector<int64_t> failed(kProducers, 0);
  producers.reserve(kProducers);
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      TimeStampProducer& producer = channels->producer(p);
      for (int64_t i = 0; i < kPerProducer; ++i) {
        if (!SendOne(producer, p, i)) ++failed[static_cast<size_t>(p)];
        if (i % 1000 == 999) producer.Flush();
      }
      producer.Flush();
      running.fetch_sub(1, std::memory_order_release);
    });
  }
  for (std::thread& t : producers) t.join();
  recorder.join();

  for (int p = 0; p < kProducers; ++p) EXPECT_EQ(failed[static_cast<size_t>(p)], 0) << p;
  EXPECT_EQ(sink.accepted, 0);
  EXPECT_EQ(sink.bad, 0);
  EXPECT_EQ(sink.wrong_intended, 0);
  EXPECT_EQ(sink.out_of_order, 0);
  for (int p = 0; p < kProducers; ++p) {
    int64_t missing = 0;
    int64_t repeated = 0;
    for (uint8_t count : sink.seen[static_cast<size_t>(p)]) {
      missing += count == 0 ? 1 : 0;
      repeated += count > 1 ? 1 : 0;
    }
    EXPECT_EQ(missing, 0) << "producer " << p;
    EXPECT_EQ(repeated, 0) << "producer " << p;
    EXPECT_EQ(sink.next[static_cast<size_t>(p)], kPerProducer) << "producer " << p;
  }
  EXPECT_EQ(channels->dropped(), 0u);
}

INSTANTIATE_TEST_SUITE_P(PathsAndTopologies, PacedChannelsTest,
                         ::testing::Combine(::testing::Values(ChannelPath::kBatch,
                                                              ChannelPath::kRecord,
                                                              ChannelPath::kLibrary),
                                            ::testing::Values(0, 1)),
                         [](const ::testing::TestParamInfo<Param>& param) {
                           return std::string(PathName(std::get<0>(param.param))) +
                                  (std::get<1>(param.param) == 0 ? "PerWorkerQueues"
                                                                 : "SharedQueue");
                         });

}  // namespace
}  // namespace perld
