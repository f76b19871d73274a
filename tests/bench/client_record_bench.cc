// The client library's Record() against the in-process channel Send it wraps,
// side by side (issue 9's goal: Record within 1.5x of Send). Both run one
// producer thread against a live consumer that records into exact windows:
//   BM_ChannelSend  -- TimeStampChannels + RecorderThread + a sink recording
//                      into PeriodicAndTotalWindows (the daemon's path);
//   BM_ClientRecord -- perld::Client in windows mode (its local channels,
//                      recorder thread and windows), through the public
//                      Recorder::Record. Its interval is longer than the
//                      benchmark, so nothing is sent meanwhile and the target
//                      need not exist: the wire is measured by ingest_bench.
// Fixed work (30 M records each), so each filter also runs as a whole process:
//   client_record_bench --benchmark_filter=BM_ClientRecord   (and BM_ChannelSend)
#include <benchmark/benchmark.h>

#include <memory>

#include "daemon/core/clock.h"
#include "daemon/core/periodic_and_total_windows.h"
#include "daemon/core/recorder_thread.h"
#include "daemon/core/timestamp_channels.h"
#include "perld/client.h"

namespace perld {
namespace {

class WindowSink final : public TimeStampSink {
 public:
  explicit WindowSink(PeriodicAndTotalWindows w) : windows_(std::move(w)) {}
  void Accept(const TimeStamp* batch, size_t n) override { windows_.RecordBatch(batch, n, 0); }
  void Tick(int64_t) override {}

 private:
  PeriodicAndTotalWindows windows_;
};

void BM_ChannelSend(benchmark::State& state) {
  const LatencyConfig config = LatencyConfig::ForUnit(TimeUnit::kNs);
  auto windows = PeriodicAndTotalWindows::Create(config, 0);
  WindowSink sink(std::move(*windows));
  ChannelOptions options;
  options.q_per_worker = 1;
  auto channels = TimeStampChannels::Create(options, 1);
  RecorderThread recorder(**channels, sink);
  recorder.Start();
  TimeStampProducer& producer = (*channels)->producer(0);
  int64_t i = 0;
  for (auto _ : state) {
    producer.Send(i, i + 100 + (i & 1023), 1, 1024);
    ++i;
  }
  producer.Flush();
  recorder.StopAndDrain();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ChannelSend)->UseRealTime()->Iterations(30'000'000);

void BM_ClientRecord(benchmark::State& state) {
  ClientOptions options;
  options.target = "127.0.0.1:1";  // nothing is sent within the interval
  options.run = "client-record-bench";
  options.mode = IngestMode::kWindows;
  options.reporting_interval_ms = 3'600'000;
  options.max_recorders = 1;
  std::string error;
  std::unique_ptr<Client> client = Client::Create(options, &error);
  if (!client) {
    state.SkipWithError(error.c_str());
    return;
  }
  Recorder* recorder = client->NewRecorder();
  int64_t i = 0;
  for (auto _ : state) {
    recorder->Record(i, i + 100 + (i & 1023), 1, 1024);
    ++i;
  }
  client->Abandon();
  client->Close(std::chrono::milliseconds(0));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ClientRecord)->UseRealTime()->Iterations(30'000'000);

}  // namespace
}  // namespace perld
BENCHMARK_MAIN();
