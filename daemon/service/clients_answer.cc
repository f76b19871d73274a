#include "daemon/service/clients_answer.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "daemon/service/run_proto.h"

namespace perld::service {
namespace {

// Wire types and the tags of the fields written here (perld.proto).
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t Tag(uint32_t field, uint32_t wire_type) { return field << 3 | wire_type; }
// GetClientsResponse
constexpr uint32_t kRunIdTag = Tag(1, kVarint);
constexpr uint32_t kClientsTag = Tag(2, kLengthDelimited);
constexpr uint32_t kBreakdownBytesTag = Tag(3, kVarint);
constexpr uint32_t kBreakdownLimitTag = Tag(4, kVarint);
// RemoteClient.percentiles and Percentile's fields
constexpr uint32_t kPercentilesTag = Tag(18, kLengthDelimited);
constexpr uint32_t kPercentTag = Tag(1, kFixed64);
constexpr uint32_t kLatencyTag = Tag(2, kVarint);
constexpr uint32_t kCountTag = Tag(3, kVarint);

size_t VarintSize(uint64_t v) { return static_cast<size_t>(std::bit_width(v | 1) + 6) / 7; }

uint8_t* PutVarint(uint64_t v, uint8_t* p) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

// A proto3 int64 field: absent when 0, negative values as 10-byte varints.
size_t Int64FieldSize(uint32_t tag, int64_t v) {
  return v == 0 ? 0 : VarintSize(tag) + VarintSize(static_cast<uint64_t>(v));
}

uint8_t* PutInt64Field(uint32_t tag, int64_t v, uint8_t* p) {
  return v == 0 ? p : PutVarint(static_cast<uint64_t>(v), PutVarint(tag, p));
}

// One Percentile's body (without its tag and length).
size_t PercentileSize(double percent, int64_t latency, int64_t count) {
  const size_t percent_size = std::bit_cast<uint64_t>(percent) == 0 ? 0 : 1 + sizeof(double);
  return percent_size + Int64FieldSize(kLatencyTag, latency) + Int64FieldSize(kCountTag, count);
}

uint8_t* PutPercentile(double percent, int64_t latency, int64_t count, uint8_t* p) {
  if (const auto bits = std::bit_cast<uint64_t>(percent); bits != 0) {  // +0.0 is proto3's default
    *p++ = kPercentTag;
    for (int i = 0; i < 8; ++i) *p++ = static_cast<uint8_t>(bits >> (8 * i));  // little-endian
  }
  return PutInt64Field(kCountTag, count, PutInt64Field(kLatencyTag, latency, p));
}

// Makes room for `bytes` more at the end of `out`; where they start.
uint8_t* Grow(std::string* out, size_t bytes) {
  const size_t at = out->size();
  if (out->capacity() < at + bytes) out->reserve(std::max(2 * out->capacity(), at + bytes));
  out->resize(at + bytes);
  return reinterpret_cast<uint8_t*>(out->data() + at);
}

}  // namespace

void SerializeClientsAnswer(uint64_t run_id, std::span<const ingest::ClientView> clients,
                            int64_t breakdown_bytes, int64_t breakdown_limit_bytes,
                            std::string* out) {
  PutInt64Field(kRunIdTag, static_cast<int64_t>(run_id),
                Grow(out, Int64FieldSize(kRunIdTag, static_cast<int64_t>(run_id))));
  v1::RemoteClient row;        // every client's: its strings keep their capacity
  std::vector<size_t> bodies;  // the current client's percentile sizes
  for (const ingest::ClientView& c : clients) {
    row.Clear();
    ToProtoRow(c, &row);
    bodies.clear();
    size_t size = row.ByteSizeLong();
    if (c.exact && c.percentiles != nullptr) {
      const LatencySnapshot& s = *c.percentiles;
      const size_t n = std::min({s.percents.size(), s.values.size(), s.counts.size()});
      for (size_t i = 0; i < n; ++i) {
        bodies.push_back(PercentileSize(s.percents[i], s.values[i], s.counts[i]));
        size += VarintSize(kPercentilesTag) + VarintSize(bodies.back()) + bodies.back();
      }
    }
    uint8_t* p = Grow(out, VarintSize(kClientsTag) + VarintSize(size) + size);
    p = row.SerializeWithCachedSizesToArray(PutVarint(size, PutVarint(kClientsTag, p)));
    for (size_t i = 0; i < bodies.size(); ++i) {
      const LatencySnapshot& s = *c.percentiles;
      p = PutVarint(bodies[i], PutVarint(kPercentilesTag, p));
      p = PutPercentile(s.percents[i], s.values[i], s.counts[i], p);
    }
  }
  const size_t tail = Int64FieldSize(kBreakdownBytesTag, breakdown_bytes) +
                      Int64FieldSize(kBreakdownLimitTag, breakdown_limit_bytes);
  PutInt64Field(kBreakdownLimitTag, breakdown_limit_bytes,
                PutInt64Field(kBreakdownBytesTag, breakdown_bytes, Grow(out, tail)));
}

}  // namespace perld::service
