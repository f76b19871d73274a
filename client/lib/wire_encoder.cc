#include "client/lib/wire_encoder.h"

#include <algorithm>

namespace perld::client {
namespace {

template <typename T>
bool AllEqual(const std::vector<T>& v) {
  return std::all_of(v.begin(), v.end(), [&](const T& x) { return x == v.front(); });
}

}  // namespace

void BatchEncoder::Take(uint64_t sequence, v1::TimestampBatch* out) {
  out->Clear();
  out->set_sequence(sequence);
  out->set_count(static_cast<uint32_t>(latencies_.size()));
  out->mutable_latency_delta()->Reserve(static_cast<int>(latencies_.size()));
  int64_t prev = 0;
  for (int64_t v : latencies_) {
    // Wrapping difference: the daemon's running sum wraps back to v.
    out->add_latency_delta(
        static_cast<int64_t>(static_cast<uint64_t>(v) - static_cast<uint64_t>(prev)));
    prev = v;
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

void EncodeWindow(const WindowReport& report, uint64_t sequence, int64_t start_unix_ms,
                  int64_t end_unix_ms, v1::WindowReport* out) {
  const LatencySnapshot& s = report.snapshot;
  out->Clear();
  out->set_sequence(sequence);
  out->set_start_unix_ms(start_unix_ms);
  out->set_end_unix_ms(end_unix_ms);
  out->set_records(s.records);
  out->set_bytes(s.bytes);
  out->set_valid_latency_records(s.valid);
  out->set_invalid_latency_records(s.invalid);
  out->set_lower_latency_discard_records(s.lower_discard);
  out->set_higher_latency_discard_records(s.higher_discard);
  out->set_min_latency(s.min_latency);
  out->set_max_latency(s.max_latency);
  out->set_total_latency(s.total_latency);
  out->set_rejected_records(s.rejected);
  out->mutable_latency_delta()->Reserve(static_cast<int>(report.distribution.size()));
  out->mutable_count()->Reserve(static_cast<int>(report.distribution.size()));
  int64_t prev = 0;
  for (const LatencyBucket& b : report.distribution) {
    out->add_latency_delta(static_cast<uint64_t>(b.latency - prev));
    out->add_count(static_cast<uint64_t>(b.count));
    prev = b.latency;
  }
}

}  // namespace perld::client
