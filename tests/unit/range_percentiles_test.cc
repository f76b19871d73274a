// RangePercentiles: windows with random raw latencies, stored as their
// distributions; every range's answer equals an oracle that sorts the raw
// latencies of those windows and applies SBK's index rule by hand (not the
// merge or the walker under test). And the refusals: nothing in the range,
// a window no longer stored, a gap, a window without its distribution.
#include "daemon/runs/range_percentiles.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace perld::runs {
namespace {

using ::testing::HasSubstr;

struct RawWindow {
  std::vector<int64_t> latencies;
  WindowRecord record;
};

RawWindow MakeRaw(int64_t seq, std::mt19937_64& rng) {
  RawWindow w;
  w.latencies.resize(rng() % 500);
  const uint64_t spread = 1 + rng() % 100'000;
  for (int64_t& v : w.latencies) v = static_cast<int64_t>(rng() % spread);
  std::map<int64_t, int64_t> counts;
  for (int64_t v : w.latencies) ++counts[v];
  WindowRecord& r = w.record;
  r.seq = seq;
  r.start_unix_ms = 1'000 * seq;
  r.end_unix_ms = 1'000 * seq + 999;
  r.seconds = 1;
  LatencySnapshot& s = r.snapshot;
  s.records = s.valid = static_cast<int64_t>(w.latencies.size());
  for (const auto& [latency, count] : counts) r.distribution.push_back({latency, count});
  if (!w.latencies.empty()) {
    s.min_latency = counts.begin()->first;
    s.max_latency = counts.rbegin()->first;
    for (int64_t v : w.latencies) s.total_latency += v;
  }
  return w;
}

TEST(RangePercentilesTest, EveryRangeEqualsTheOracleOverTheRawLatencies) {
  std::mt19937_64 rng(7);
  std::vector<RawWindow> raw;
  for (int64_t seq = 1; seq <= 30; ++seq) raw.push_back(MakeRaw(seq, rng));
  absl::StatusOr<PercentileSet> set = PercentileSet::Create({0, 5, 50, 90, 99, 99.9, 100});
  ASSERT_TRUE(set.ok());
  for (int trial = 0; trial < 100; ++trial) {
    const size_t a = rng() % raw.size();
    const size_t b = a + rng() % (raw.size() - a);
    std::vector<WindowRecord> windows;
    std::vector<int64_t> all;
    for (size_t i = a; i <= b; ++i) {
      windows.push_back(raw[i].record);
      all.insert(all.end(), raw[i].latencies.begin(), raw[i].latencies.end());
    }
    std::sort(all.begin(), all.end());
    absl::StatusOr<RangeAnswer> answer =
        RangePercentiles(9, windows, static_cast<int64_t>(a + 1), *set);
    ASSERT_TRUE(answer.ok()) << answer.status();
    const LatencySnapshot& s = answer->snapshot;
    ASSERT_EQ(s.valid, static_cast<int64_t>(all.size()));
    EXPECT_EQ(answer->first_window, static_cast<int64_t>(a + 1));
    EXPECT_EQ(answer->last_window, static_cast<int64_t>(b + 1));
    EXPECT_EQ(answer->seconds, static_cast<double>(b - a + 1));
    if (all.empty()) continue;
    EXPECT_EQ(s.min_latency, all.front());
    EXPECT_EQ(s.max_latency, all.back());
    const auto n = static_cast<int64_t>(all.size());
    for (size_t k = 0; k < set->size(); ++k) {
      const auto index = std::min(
          n - 1, static_cast<int64_t>(static_cast<double>(n) * (set->percents()[k] / 100.0)));
      EXPECT_EQ(s.values[k], all[static_cast<size_t>(index)])
          << "trial " << trial << " p" << set->percents()[k];
      EXPECT_EQ(s.counts[k], std::count(all.begin(), all.end(), s.values[k]));
    }
    EXPECT_EQ(s.median, all[static_cast<size_t>(n >> 1)]);
  }
}

TEST(RangePercentilesTest, RefusesWhatItCannotAnswerExactly) {
  std::mt19937_64 rng(8);
  const PercentileSet set = PercentileSet::Default();
  std::vector<WindowRecord> windows;
  for (int64_t seq = 4; seq <= 6; ++seq) windows.push_back(MakeRaw(seq, rng).record);
  windows[1].snapshot.valid = windows[1].snapshot.records = 10;
  windows[1].distribution = {{1, 10}};

  absl::StatusOr<RangeAnswer> none = RangePercentiles(3, {}, 0, set);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kOutOfRange);
  absl::StatusOr<RangeAnswer> pruned = RangePercentiles(3, windows, 2, set);
  EXPECT_EQ(pruned.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(pruned.status().message(), HasSubstr("windows 2-3 are no longer stored"));
  std::vector<WindowRecord> gap = {windows[0], windows[2]};
  absl::StatusOr<RangeAnswer> holed = RangePercentiles(3, gap, 4, set);
  EXPECT_EQ(holed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(holed.status().message(), HasSubstr("windows 5-5 of the range are not stored"));
  windows[1].distribution.clear();
  absl::StatusOr<RangeAnswer> blind = RangePercentiles(3, windows, 4, set);
  EXPECT_EQ(blind.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(blind.status().message(), HasSubstr("window 5 was stored without its distribution"));
}

}  // namespace
}  // namespace perld::runs
