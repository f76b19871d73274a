// Per-side cost of the timestamp channels (issue 14): ns per record on the
// producer (Send) and on the recorder (Drain into the sink), for the batch
// path (default), the seed's per-record intrusive queue and the library
// queue, with per-worker queues and one shared queue. Each side is timed
// alone, on one thread, so neither waits for the other:
//   BM_ProducerSend/<path>/<shared>  -- Send of kRecords timestamps (nothing
//                                       drains meanwhile; the bound exceeds them);
//   BM_RecorderDrain/<path>/<shared>/<windows> -- Drain(kAll) of kRecords
//                                       queued timestamps into exact windows
//                                       (PeriodicAndTotalWindows, ns, the daemon's
//                                       sink) or, windows = 0, into a counting sink.
// The other side's work happens with the timer paused. Path: 0 batch,
// 1 per-record, 2 library. Concurrent end-to-end figures are in
// tests/bench/README.md (queue A/B).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "daemon/core/periodic_and_total_windows.h"
#include "daemon/core/timestamp_channels.h"

namespace perld {
namespace {

constexpr int64_t kRecords = 1 << 16;

class CountingSink final : public TimeStampSink {
 public:
  void Accept(const TimeStamp* batch, size_t n) override {
    for (size_t i = 0; i < n; ++i) records += batch[i].records;
  }
  void Tick(int64_t) override {}
  int64_t records = 0;
};

class WindowSink final : public TimeStampSink {
 public:
  WindowSink()
      : windows_(*PeriodicAndTotalWindows::Create(LatencyConfig::ForUnit(TimeUnit::kNs), 0)) {}
  void Accept(const TimeStamp* batch, size_t n) override {
    windows_.RecordBatch(batch, n, 0);
    for (size_t i = 0; i < n; ++i) records += batch[i].records;
  }
  void Tick(int64_t) override {}
  int64_t records = 0;

 private:
  PeriodicAndTotalWindows windows_;
};

std::unique_ptr<TimeStampChannels> Make(int64_t path, int64_t shared) {
  ChannelOptions o;
  o.queue = path == 2 ? QueueKind::kLibrary : QueueKind::kMpsc;
  o.mpsc_batched = path == 0;
  o.max_qs = shared != 0 ? 1 : 0;
  o.max_pending_per_worker = 2 * kRecords;
  auto made = TimeStampChannels::Create(o, 1);
  if (!made.ok()) std::abort();
  return *std::move(made);
}

void Send(TimeStampProducer& p, int64_t base) {
  for (int64_t i = 0; i < kRecords; ++i) {
    const int64_t start = base + i * 1000;
    p.Send(start, start + 100 + (i * 37 & 1023), 1, 1024);
  }
  p.Flush();
}

template <typename Sink>
void DrainAll(TimeStampChannels& channels, Sink& sink, int64_t expected) {
  while (sink.records < expected) channels.Drain(sink, PollMode::kAll);
  if (sink.records != expected) std::abort();  // exact counts, or no figure
}

void BM_ProducerSend(benchmark::State& state) {
  auto channels = Make(state.range(0), state.range(1));
  CountingSink sink;
  int64_t sent = 0;
  for (auto _ : state) {
    Send(channels->producer(0), sent * 1000);
    sent += kRecords;
    state.PauseTiming();
    DrainAll(*channels, sink, sent);
    state.ResumeTiming();
  }
  state.counters["ns_per_record"] =
      benchmark::Counter(static_cast<double>(kRecords) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

template <typename Sink>
void RecorderDrain(benchmark::State& state) {
  auto channels = Make(state.range(0), state.range(1));
  Sink sink;
  int64_t sent = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Send(channels->producer(0), sent * 1000);
    sent += kRecords;
    state.ResumeTiming();
    DrainAll(*channels, sink, sent);
  }
  state.counters["ns_per_record"] =
      benchmark::Counter(static_cast<double>(kRecords) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_RecorderDrain(benchmark::State& state) {
  if (state.range(2) != 0) {
    RecorderDrain<WindowSink>(state);
  } else {
    RecorderDrain<CountingSink>(state);
  }
}

BENCHMARK(BM_ProducerSend)->ArgsProduct({{0, 1, 2}, {0, 1}})->ArgNames({"path", "shared"});
BENCHMARK(BM_RecorderDrain)
    ->ArgsProduct({{0, 1, 2}, {0, 1}, {0, 1}})
    ->ArgNames({"path", "shared", "windows"});

}  // namespace
}  // namespace perld

BENCHMARK_MAIN();
