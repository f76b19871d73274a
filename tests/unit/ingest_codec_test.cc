// The ingest wire decoders: exact round trips, and every malformed or
// inconsistent message refused whole with the status the protocol names.
#include "daemon/service/ingest_codec.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "client/lib/wire_encoder.h"

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
  runs::RemoteWindow w;
  absl::StatusOr<int64_t> records = DecodeBatch(b, 10, &w);
  ASSERT_TRUE(records.ok());
  EXPECT_EQ(*records, 4);
  b.set_constant_records(3);
  records = DecodeBatch(b, 10, &w);
  EXPECT_EQ(*records, 12);
  b.set_constant_records(0);
  ASSERT_TRUE(DecodeBatch(b, 10, &w).ok());
  const std::vector<TimeStamp>& out = w.timestamps;
  EXPECT_TRUE(w.intended.empty());  // closed loop
  ASSERT_EQ(out.size(), 4u);
  const int64_t want[] = {5, 3, -2, 1000};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i].end - out[i].start, want[i]);
    EXPECT_EQ(out[i].records, 1);  // constant_records 0 means 1
    EXPECT_EQ(out[i].bytes, 64);
  }
}

// A pooled buffer (RemoteWindowInbox::TakeTimestampBuffer) is decoded into
// when it suits the batch; one far larger than a small batch is not kept,
// since the client's memory is charged at the buffer's capacity.
TEST(IngestCodecTest, BatchReusesAPooledBufferOfItsSize) {
  const v1::TimestampBatch b = Batch(1, {5, 3, -2, 1000});
  runs::RemoteWindow w;
  w.timestamps.reserve(8);
  const TimeStamp* pooled = w.timestamps.data();
  ASSERT_TRUE(DecodeBatch(b, 10, &w).ok());
  EXPECT_EQ(w.timestamps.data(), pooled) << "decoded into the pooled buffer";
  ASSERT_EQ(w.timestamps.size(), 4u);
  EXPECT_EQ(w.timestamps[3].end, 1000);
  runs::RemoteWindow small;
  small.timestamps.reserve(100'000);
  ASSERT_TRUE(DecodeBatch(b, 10, &small).ok());
  EXPECT_LT(small.timestamps.capacity(), 2'000u);
  EXPECT_EQ(small.timestamps.size(), 4u);
}

TEST(IngestCodecTest, BatchPerEntryColumns) {
  v1::TimestampBatch b = Batch(1, {1, 2});
  b.add_records(3);
  b.add_records(4);
  b.add_bytes(10);
  b.add_bytes(20);
  runs::RemoteWindow w;
  absl::StatusOr<int64_t> records = DecodeBatch(b, 10, &w);
  ASSERT_TRUE(records.ok());
  EXPECT_EQ(*records, 7);
  const std::vector<TimeStamp>& out = w.timestamps;
  EXPECT_EQ(out[1].records, 4);
  EXPECT_EQ(out[1].bytes, 20);
}

TEST(IngestCodecTest, BatchRefusals) {
  runs::RemoteWindow w;
  EXPECT_EQ(DecodeBatch(Batch(1, {1, 2, 3}), 2, &w).status().code(),
            absl::StatusCode::kResourceExhausted);
  v1::TimestampBatch short_column = Batch(1, {1, 2});
  short_column.set_count(3);
  EXPECT_EQ(DecodeBatch(short_column, 10, &w).status().code(), absl::StatusCode::kInvalidArgument);
  v1::TimestampBatch records = Batch(1, {1, 2});
  records.add_records(1);
  EXPECT_EQ(DecodeBatch(records, 10, &w).status().code(), absl::StatusCode::kInvalidArgument);
  v1::TimestampBatch zero = Batch(1, {1});
  zero.add_records(0);
  EXPECT_EQ(DecodeBatch(zero, 10, &w).status().code(), absl::StatusCode::kInvalidArgument);
  v1::TimestampBatch huge = Batch(1, {1});
  huge.set_constant_bytes(0x80000000u);
  EXPECT_EQ(DecodeBatch(huge, 10, &w).status().code(), absl::StatusCode::kInvalidArgument);
  v1::TimestampBatch overflow;
  overflow.set_count(2);
  overflow.add_latency_delta(INT64_MAX);
  overflow.add_latency_delta(1);
  EXPECT_EQ(DecodeBatch(overflow, 10, &w).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(w.timestamps.empty());  // refused whole
}

// A rate-controlled batch: start lags beside the latencies, intended start
// = -lag (the timestamps start at 0), so response = latency + lag.
TEST(IngestCodecTest, BatchStartLagsGiveIntendedStarts) {
  v1::TimestampBatch b = Batch(7, {5, 3, 9});
  for (int64_t d : {0, 1000, -400}) b.add_start_lag_delta(d);  // lags 0, 1000, 600
  b.set_skipped(4);
  runs::RemoteWindow w;
  ASSERT_TRUE(DecodeBatch(b, 10, &w).ok());
  ASSERT_EQ(w.intended.size(), 3u);
  EXPECT_EQ(w.intended[0], 0);
  EXPECT_EQ(w.intended[1], -1000);
  EXPECT_EQ(w.intended[2], -600);
  EXPECT_EQ(w.timestamps[1].end - w.intended[1], 1003);  // response of operation 1
  EXPECT_EQ(w.schedule.skipped, 4);
}

// The client's encoder and the daemon's decoder are inverses, start lags
// and skipped slots included; a closed-loop encoder sends no lag column.
TEST(IngestCodecTest, PacedEncoderRoundTripsThroughTheDecoder) {
  client::BatchEncoder paced(/*paced=*/true);
  const std::vector<std::pair<TimeStamp, int64_t>> ops = {
      {TimeStamp{100, 130, 1, 8}, 0},
      {TimeStamp{200, 1200, 2, 8}, 999'000},
      {TimeStamp{300, 305, 1, 8}, 7},
      {TimeStamp{400, 390, 1, 8}, INT64_MAX / 2}};  // a negative latency, a huge lag
  for (const auto& [ts, lag] : ops) paced.Add(ts, lag);
  v1::TimestampBatch wire;
  paced.Take(9, &wire, /*skipped=*/12);
  EXPECT_EQ(paced.size(), 0u);
  runs::RemoteWindow w;
  ASSERT_TRUE(DecodeBatch(wire, 10, &w).ok());
  ASSERT_EQ(w.intended.size(), ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(w.timestamps[i].end - w.timestamps[i].start, ops[i].first.end - ops[i].first.start);
    EXPECT_EQ(w.timestamps[i].start - w.intended[i], ops[i].second);
  }
  EXPECT_EQ(w.schedule.skipped, 12);

  client::BatchEncoder closed;
  closed.Add(TimeStamp{0, 5, 1, 0}, 77);  // a lag given to a closed-loop encoder is not sent
  closed.Take(1, &wire);
  EXPECT_EQ(wire.start_lag_delta_size(), 0);
  EXPECT_EQ(wire.skipped(), 0u);
}

TEST(IngestCodecTest, BatchStartLagRefusals) {
  runs::RemoteWindow w;
  v1::TimestampBatch short_lags = Batch(1, {1, 2});
  short_lags.add_start_lag_delta(1);
  EXPECT_EQ(DecodeBatch(short_lags, 10, &w).status().code(), absl::StatusCode::kInvalidArgument);
  v1::TimestampBatch negative = Batch(1, {1, 2});
  negative.add_start_lag_delta(5);
  negative.add_start_lag_delta(-6);  // lag -1: started before its slot
  EXPECT_EQ(DecodeBatch(negative, 10, &w).status().code(), absl::StatusCode::kInvalidArgument);
  v1::TimestampBatch overflow = Batch(1, {INT64_MAX - 1});
  overflow.add_start_lag_delta(2);  // latency + lag overflows
  EXPECT_EQ(DecodeBatch(overflow, 10, &w).status().code(), absl::StatusCode::kInvalidArgument);
  v1::TimestampBatch skipped = Batch(1, {1});
  skipped.set_skipped(uint64_t{1} << 63);
  EXPECT_EQ(DecodeBatch(skipped, 10, &w).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(w.timestamps.empty());
  EXPECT_TRUE(w.intended.empty());
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
