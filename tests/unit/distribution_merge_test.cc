// MergeDistributions against an oracle that never merges: the raw values of
// every window concatenated and counted (std::map), over random windows.
#include "daemon/core/distribution_merge.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "daemon/core/run_total.h"

namespace perld {
namespace {

std::vector<LatencyBucket> Counted(const std::vector<int64_t>& raw) {
  std::map<int64_t, int64_t> counts;
  for (int64_t v : raw) ++counts[v];
  std::vector<LatencyBucket> out;
  out.reserve(counts.size());
  for (const auto& [latency, count] : counts) out.push_back({latency, count});
  return out;
}

TEST(DistributionMergeTest, EqualsTheCountOfTheConcatenatedRawValues) {
  std::mt19937_64 rng(20261205);
  for (int trial = 0; trial < 200; ++trial) {
    const int windows = static_cast<int>(rng() % 40);
    std::vector<std::vector<LatencyBucket>> stored;
    std::vector<int64_t> all;
    for (int w = 0; w < windows; ++w) {
      std::vector<int64_t> raw(rng() % 300);
      const int64_t spread = 1 + static_cast<int64_t>(rng() % 5000);
      for (int64_t& v : raw) v = static_cast<int64_t>(rng() % static_cast<uint64_t>(spread));
      all.insert(all.end(), raw.begin(), raw.end());
      stored.push_back(Counted(raw));
    }
    std::vector<std::span<const LatencyBucket>> inputs(stored.begin(), stored.end());
    EXPECT_EQ(MergeDistributions(inputs), Counted(all)) << "trial " << trial;
  }
}

TEST(DistributionMergeTest, EmptyInputsAndSaturation) {
  EXPECT_TRUE(MergeDistributions({}).empty());
  const std::vector<LatencyBucket> none;
  const std::vector<LatencyBucket> big = {{7, std::numeric_limits<int64_t>::max() - 1}};
  const std::vector<LatencyBucket> two = {{7, 2}, {9, 1}};
  const std::vector<std::span<const LatencyBucket>> inputs = {none, big, two, none};
  const std::vector<LatencyBucket> merged = MergeDistributions(inputs);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].count, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(merged[1], (LatencyBucket{9, 1}));
}

// A source that hands its buckets out in random-sized chunks (as a stored
// blob is read), so merges see chunk boundaries everywhere.
class ChunkedSource final : public BucketSource {
 public:
  ChunkedSource(std::vector<LatencyBucket> buckets, uint64_t seed)
      : buckets_(std::move(buckets)), rng_(seed) {}
  absl::StatusOr<std::span<const LatencyBucket>> Next() override {
    const size_t left = buckets_.size() - at_;
    const size_t n = left == 0 ? 0 : 1 + rng_() % std::min<size_t>(left, 7);
    std::span<const LatencyBucket> chunk(buckets_.data() + at_, n);
    at_ += n;
    return chunk;
  }

 private:
  std::vector<LatencyBucket> buckets_;
  size_t at_ = 0;
  std::mt19937_64 rng_;
};

class CollectSink final : public LatencyBucketSink {
 public:
  void OnBuckets(std::span<const LatencyBucket> b) override {
    all.insert(all.end(), b.begin(), b.end());
  }
  std::vector<LatencyBucket> all;
};

TEST(DistributionMergeTest, StreamMergeOfChunkedSourcesEqualsTheRawCount) {
  std::mt19937_64 rng(20261206);
  const PercentileSet set = PercentileSet::Default();
  for (int trial = 0; trial < 200; ++trial) {
    const int inputs = static_cast<int>(rng() % 30);
    std::vector<std::vector<LatencyBucket>> stored;
    std::vector<int64_t> all;
    for (int i = 0; i < inputs; ++i) {
      std::vector<int64_t> raw(rng() % 2000);
      const int64_t spread = 1 + static_cast<int64_t>(rng() % 100'000);
      for (int64_t& v : raw) v = static_cast<int64_t>(rng() % static_cast<uint64_t>(spread));
      all.insert(all.end(), raw.begin(), raw.end());
      stored.push_back(Counted(raw));
    }
    // Fresh chunked sources over the stored distributions, for one merge.
    const uint64_t seed = rng();
    std::vector<std::unique_ptr<ChunkedSource>> owned;
    std::vector<BucketSource*> sources;
    const auto open = [&] {
      owned.clear();
      sources.clear();
      for (size_t i = 0; i < stored.size(); ++i) {
        owned.push_back(std::make_unique<ChunkedSource>(stored[i], seed + i));
        sources.push_back(owned.back().get());
      }
    };
    const std::vector<LatencyBucket> want = Counted(all);
    open();
    CollectSink sink;
    ASSERT_TRUE(StreamMerge(sources, &sink).ok());
    EXPECT_EQ(sink.all, want) << "trial " << trial;
    // Percentiles walked off the stream equal those of the whole merge.
    LatencySnapshot expected;
    expected.valid = static_cast<int64_t>(all.size());
    FillPercentiles(set, want, &expected);
    open();
    LatencySnapshot got;
    got.valid = expected.valid;
    ASSERT_TRUE(MergedPercentiles(sources, set, &got).ok());
    EXPECT_EQ(got.values, expected.values) << "trial " << trial;
    EXPECT_EQ(got.counts, expected.counts);
    EXPECT_EQ(got.median, expected.median);
    EXPECT_TRUE(got.percentiles_exact);
  }
}

TEST(DistributionMergeTest, MergedPercentilesRefusesAMismatchAndBadInput) {
  const PercentileSet set = PercentileSet::Default();
  const std::vector<LatencyBucket> a = {{1, 2}, {5, 1}};
  SpanBucketSource source(a);
  BucketSource* one[] = {&source};
  LatencySnapshot out;
  out.valid = 4;  // the counters say 4, the distribution holds 3
  absl::Status s = MergedPercentiles(one, set, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_FALSE(out.percentiles_exact);
  EXPECT_TRUE(out.values.empty());

  const std::vector<LatencyBucket> descending = {{5, 1}, {1, 1}};
  SpanBucketSource bad(descending);
  BucketSource* worse[] = {&bad};
  CollectSink sink;
  EXPECT_EQ(StreamMerge(worse, &sink).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace perld
