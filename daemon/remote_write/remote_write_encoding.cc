#include "daemon/remote_write/remote_write_encoding.h"

#include <snappy.h>

#include <algorithm>
#include <bit>
#include <cstdint>

#include "absl/container/flat_hash_map.h"

namespace perld::remote_write {
namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void PutTag(uint32_t field, uint32_t wire_type, std::string* out) {
  PutVarint((uint64_t{field} << 3) | wire_type, out);
}

void PutString(uint32_t field, std::string_view s, std::string* out) {
  PutTag(field, kLengthDelimited, out);
  PutVarint(s.size(), out);
  out->append(s);
}

// TimeSeries.samples = 2 entry: Sample{value = 1 (double), timestamp = 2
// (int64)}; proto3 leaves a zero field out, as the generated encoder does.
void PutSample(double value, int64_t timestamp_ms, std::string* out) {
  const auto bits = std::bit_cast<uint64_t>(value);
  const auto ts = static_cast<uint64_t>(timestamp_ms);
  const size_t size = (bits != 0 ? 9 : 0) + (ts != 0 ? 1 + VarintSize(ts) : 0);
  PutTag(2, kLengthDelimited, out);
  PutVarint(size, out);
  if (bits != 0) {
    PutTag(1, kFixed64, out);
    for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  }
  if (ts != 0) {
    PutTag(2, kVarint, out);
    PutVarint(ts, out);
  }
}

}  // namespace

std::string EncodeLabels(std::vector<Label> labels) {
  std::sort(labels.begin(), labels.end(),
            [](const Label& a, const Label& b) { return a.first < b.first; });
  std::string out;
  std::string label;
  for (const auto& [name, value] : labels) {
    label.clear();
    if (!name.empty()) PutString(1, name, &label);
    if (!value.empty()) PutString(2, value, &label);
    PutString(1, label, &out);  // TimeSeries.labels = 1
  }
  return out;
}

std::string EncodeWriteRequest(std::span<const QueuedSample> samples) {
  // Series in order of first appearance, each with its samples' bytes.
  struct Series {
    const std::string* labels;
    std::string samples;  // TimeSeries.samples = 2 entries
  };
  std::vector<Series> series;
  absl::flat_hash_map<const std::string*, size_t> index;
  index.reserve(samples.size());
  for (const QueuedSample& s : samples) {
    const std::string* key = s.series.get();
    auto [it, inserted] = index.try_emplace(key, series.size());
    if (inserted) series.push_back({key, {}});
    PutSample(s.value, s.timestamp_ms, &series[it->second].samples);
  }
  size_t total = 0;
  for (const Series& s : series) {
    const size_t body = s.labels->size() + s.samples.size();
    total += 1 + VarintSize(body) + body;
  }
  std::string out;
  out.reserve(total);
  for (const Series& s : series) {
    PutTag(1, kLengthDelimited, &out);  // WriteRequest.timeseries = 1
    PutVarint(s.labels->size() + s.samples.size(), &out);
    out.append(*s.labels);
    out.append(s.samples);
  }
  return out;
}

std::string SnappyBlock(std::string_view raw) {
  std::string out;
  snappy::Compress(raw.data(), raw.size(), &out);
  return out;
}

}  // namespace perld::remote_write
