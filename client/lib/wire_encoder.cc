#include "client/lib/wire_encoder.h"

#include <algorithm>

#include "daemon/core/run_total.h"

namespace perld::client {
namespace {

template <typename T>
bool AllEqual(const std::vector<T>& v) {
  return std::all_of(v.begin(), v.end(), [&](const T& x) { return x == v.front(); });
}

}  // namespace

namespace {

// Wrapping differences: the daemon's running sum wraps back to each value.
void AddDeltas(const std::vector<int64_t>& values, google::protobuf::RepeatedField<int64_t>* out) {
  out->Reserve(static_cast<int>(values.size()));
  int64_t prev = 0;
  for (int64_t v : values) {
    out->Add(static_cast<int64_t>(static_cast<uint64_t>(v) - static_cast<uint64_t>(prev)));
    prev = v;
  }
}

}  // namespace

void BatchEncoder::Take(uint64_t sequence, v1::TimestampBatch* out, int64_t skipped) {
  out->Clear();
  out->set_sequence(sequence);
  out->set_count(static_cast<uint32_t>(latencies_.size()));
  AddDeltas(latencies_, out->mutable_latency_delta());
  if (paced_) {
    AddDeltas(lags_, out->mutable_start_lag_delta());
    out->set_skipped(static_cast<uint64_t>(std::max<int64_t>(skipped, 0)));
    lags_.clear();
  }
  if (!records_.empty() && AllEqual(records_)) {
    out->set_constant_records(records_.front());
  } else {
    out->mutable_records()->Add(records_.begin(), records_.end());
  }
  if (!bytes_.empty() && AllEqual(bytes_)) {
    out->set_constant_bytes(bytes_.front());
  } else {
    out->mutable_bytes()->Add(bytes_.begin(), bytes_.end());
  }
  latencies_.clear();
  records_.clear();
  bytes_.clear();
}

namespace {

// One WindowReport of counters `c` and pairs `pairs`.
void Encode(const LatencyCounters& c, std::span<const LatencyBucket> pairs, uint64_t sequence,
            int64_t start_unix_ms, int64_t end_unix_ms, v1::WindowReport* out) {
  out->Clear();
  out->set_sequence(sequence);
  out->set_start_unix_ms(start_unix_ms);
  out->set_end_unix_ms(end_unix_ms);
  out->set_records(c.records);
  out->set_bytes(c.bytes);
  out->set_valid_latency_records(c.valid);
  out->set_invalid_latency_records(c.invalid);
  out->set_lower_latency_discard_records(c.lower_discard);
  out->set_higher_latency_discard_records(c.higher_discard);
  out->set_min_latency(c.min_latency == kNoMinLatency ? 0 : c.min_latency);
  out->set_max_latency(c.max_latency);
  out->set_total_latency(c.total_latency);
  out->set_rejected_records(c.rejected);
  out->mutable_latency_delta()->Reserve(static_cast<int>(pairs.size()));
  out->mutable_count()->Reserve(static_cast<int>(pairs.size()));
  int64_t prev = 0;
  for (const LatencyBucket& b : pairs) {
    out->add_latency_delta(static_cast<uint64_t>(b.latency - prev));
    out->add_count(static_cast<uint64_t>(b.count));
    prev = b.latency;
  }
}

}  // namespace

std::vector<v1::WindowReport> EncodeWindowParts(const LatencySnapshot& s,
                                                std::span<const LatencyBucket> distribution,
                                                int64_t max_pairs, uint64_t first_sequence,
                                                int64_t start_unix_ms, int64_t end_unix_ms) {
  const auto part = static_cast<size_t>(std::max<int64_t>(max_pairs, 1));
  std::vector<v1::WindowReport> out;
  LatencyCounters rest = CountersOf(s);
  uint64_t sequence = first_sequence;
  while (distribution.size() > part) {
    const std::span<const LatencyBucket> pairs = distribution.first(part);
    LatencyCounters c;
    for (const LatencyBucket& b : pairs) {
      c.valid += b.count;
      c.total_latency += b.latency * b.count;
    }
    c.records = c.valid;
    c.min_latency = pairs.front().latency;
    c.max_latency = pairs.back().latency;
    rest.records -= c.records;
    rest.valid -= c.valid;
    rest.total_latency -= c.total_latency;
    Encode(c, pairs, sequence++, start_unix_ms, end_unix_ms, &out.emplace_back());
    distribution = distribution.subspan(part);
  }
  Encode(rest, distribution, sequence, start_unix_ms, end_unix_ms, &out.emplace_back());
  return out;
}

}  // namespace perld::client
