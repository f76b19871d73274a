// The ingest wire decoders: exact round trips, and every malformed or
// inconsistent message refused whole with the status the protocol names.
#include "daemon/service/ingest_codec.h"

#include <gtest/gtest.h>

#include <vector>

namespace perld::service {
namespace {

v1::TimestampBatch Batch(uint64_t seq, const std::vector<int64_t>& latencies) {
  v1::TimestampBatch b;
  b.set_sequence(seq);
  b.set_count(static_cast<uint32_t>(latencies.size()));
  int64_t prev = 0;
  for (int64_t v : latencies) {
    b.add_latency_delta(v - prev);
    prev = v;
  }
  return b;
}

v1::WindowReport Window(const std::vector<LatencyBucket>& pairs) {
  v1::WindowReport w;
  w.set_sequence(1);
  int64_t prev = 0;
  int64_t valid = 0;
  int64_t sum = 0;
  for (const LatencyBucket& p : pairs) {
    w.add_latency_delta(static_cast<uint64_t>(p.latency - prev));
    w.add_count(static_cast<uint64_t>(p.count));
    prev = p.latency;
    valid += p.count;
    sum += p.latency * p.count;
  }
  w.set_records(valid);
  w.set_valid_latency_records(valid);
  w.set_total_latency(sum);
  if (!pairs.empty()) {
    w.set_min_latency(pairs.front().latency);
    w.set_max_latency(pairs.back().latency);
  }
  return w;
}

TEST(IngestCodecTest, BatchDecodesLatenciesAndConstantColumns) {
  v1::TimestampBatch b = Batch(1, {5, 3, -2, 1000});
  b.set_constant_bytes(64);
  std::vector<TimeStamp> out;
  ASSERT_TRUE(DecodeBatch(b, 10, &out).ok());
  ASSERT_EQ(out.size(), 4u);
  const int64_t want[] = {5, 3, -2, 1000};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i].end - out[i].start, want[i]);
    EXPECT_EQ(out[i].records, 1);  // constant_records 0 means 1
    EXPECT_EQ(out[i].bytes, 64);
  }
}

TEST(IngestCodecTest, BatchPerEntryColumns) {
  v1::TimestampBatch b = Batch(1, {1, 2});
  b.add_records(3);
  b.add_records(4);
  b.add_bytes(10);
  b.add_bytes(20);
  std::vector<TimeStamp> out;
  ASSERT_TRUE(DecodeBatch(b, 10, &out).ok());
  EXPECT_EQ(out[1].records, 4);
  EXPECT_EQ(out[1].bytes, 20);
}

TEST(IngestCodecTest, BatchRefusals) {
  std::vector<TimeStamp> out;
  EXPECT_EQ(DecodeBatch(Batch(1, {1, 2, 3}), 2, &out).code(), absl::StatusCode::kResourceExhausted);
  v1::TimestampBatch short_column = Batch(1, {1, 2});
  short_column.set_count(3);
  EXPECT_EQ(DecodeBatch(short_column, 10, &out).code(), absl::StatusCode::kInvalidArgument);
  v1::TimestampBatch records = Batch(1, {1, 2});
  records.add_records(1);
  EXPECT_EQ(DecodeBatch(records, 10, &out).code(), absl::StatusCode::kInvalidArgument);
  v1::TimestampBatch zero = Batch(1, {1});
  zero.add_records(0);
  EXPECT_EQ(DecodeBatch(zero, 10, &out).code(), absl::StatusCode::kInvalidArgument);
  v1::TimestampBatch huge = Batch(1, {1});
  huge.set_constant_bytes(0x80000000u);
  EXPECT_EQ(DecodeBatch(huge, 10, &out).code(), absl::StatusCode::kInvalidArgument);
  v1::TimestampBatch overflow;
  overflow.set_count(2);
  overflow.add_latency_delta(INT64_MAX);
  overflow.add_latency_delta(1);
  EXPECT_EQ(DecodeBatch(overflow, 10, &out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(out.empty());  // refused whole
}

TEST(IngestCodecTest, WindowRoundTrip) {
  const std::vector<LatencyBucket> pairs = {{3, 2}, {7, 1}, {1000, 5}};
  absl::StatusOr<runs::RemoteWindow> w = DecodeWindow(Window(pairs), 10, 0, 5000);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->buckets, pairs);
  EXPECT_EQ(w->counters.valid, 8);
  EXPECT_EQ(w->counters.min_latency, 3);
  EXPECT_EQ(w->counters.max_latency, 1000);
}

TEST(IngestCodecTest, EmptyWindowHasNoMinimum) {
  v1::WindowReport w;
  w.set_sequence(1);
  w.set_records(2);
  w.set_invalid_latency_records(2);
  w.set_min_latency(0);
  absl::StatusOr<runs::RemoteWindow> decoded = DecodeWindow(w, 10, 0, 5000);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->counters.min_latency, kNoMinLatency);
}

TEST(IngestCodecTest, WindowRefusals) {
  const std::vector<LatencyBucket> pairs = {{3, 2}, {7, 1}};
  EXPECT_EQ(DecodeWindow(Window(pairs), 1, 0, 5000).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(DecodeWindow(Window(pairs), 10, 0, 5).status().code(),
            absl::StatusCode::kInvalidArgument);  // 7 beyond the run's range
  v1::WindowReport sum = Window(pairs);
  sum.set_valid_latency_records(4);
  sum.set_records(4);
  EXPECT_EQ(DecodeWindow(sum, 10, 0, 5000).status().code(), absl::StatusCode::kInvalidArgument);
  v1::WindowReport repeat = Window(pairs);
  repeat.set_latency_delta(1, 0);
  EXPECT_EQ(DecodeWindow(repeat, 10, 0, 5000).status().code(), absl::StatusCode::kInvalidArgument);
  v1::WindowReport columns = Window(pairs);
  columns.add_count(1);
  EXPECT_EQ(DecodeWindow(columns, 10, 0, 5000).status().code(), absl::StatusCode::kInvalidArgument);
  v1::WindowReport negative = Window(pairs);
  negative.set_lower_latency_discard_records(-1);
  EXPECT_EQ(DecodeWindow(negative, 10, 0, 5000).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::WindowReport zero_count = Window(pairs);
  zero_count.set_count(0, 0);
  zero_count.set_valid_latency_records(1);
  zero_count.set_records(1);
  EXPECT_EQ(DecodeWindow(zero_count, 10, 0, 5000).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace perld::service
