// A user program built WITHOUT NDEBUG (this file: -UNDEBUG, see
// tests/unit/CMakeLists.txt) against perld_core built as the configuration
// says (NDEBUG in Release). The core's headers must give it the same layouts
// and inline behaviour as the library: before PERLD_CONTRACT_CHECKS, the
// per-record path aborted here with a false "node that is still in a queue"
// (the user's inline Add marked nodes the library's Poll never cleared, and
// the node layouts differed).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "daemon/core/recorder_thread.h"
#include "daemon/core/timestamp_channels.h"

#ifdef NDEBUG
#error "this test must be compiled without NDEBUG"
#endif

namespace perld {
namespace {

class CountingSink final : public TimeStampSink {
 public:
  void Accept(const TimeStamp* batch, size_t n) override {
    for (size_t i = 0; i < n; ++i) records += batch[i].records;
  }
  void Tick(int64_t) override {}
  int64_t records = 0;  // recorder thread
};

void RunChannels(bool batched) {
  ChannelOptions options;
  options.mpsc_batched = batched;
  options.max_pending_per_worker = 64;  // small: nodes are recycled many times
  constexpr int kWriters = 3;
  constexpr int64_t kPerWriter = 200'000;
  absl::StatusOr<std::unique_ptr<TimeStampChannels>> channels =
      TimeStampChannels::Create(options, kWriters);
  ASSERT_TRUE(channels.ok()) << channels.status();
  CountingSink sink;
  RecorderThread recorder(**channels, sink);
  recorder.Start();
  std::vector<std::thread> writers;
  writers.reserve(kWriters);
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      TimeStampProducer& p = (*channels)->producer(w);
      for (int64_t i = 0; i < kPerWriter; ++i) p.Send(i, i + 7, 1, 64);
      p.Flush();
    });
  }
  for (std::thread& t : writers) t.join();
  recorder.StopAndDrain();
  EXPECT_EQ(sink.records, kWriters * kPerWriter);
  EXPECT_EQ((*channels)->dropped(), 0u);
}

TEST(NdebugConsumerTest, PerRecordPathAgreesWithTheLibrary) { RunChannels(false); }
TEST(NdebugConsumerTest, BatchPathAgreesWithTheLibrary) { RunChannels(true); }

}  // namespace
}  // namespace perld
