#include "daemon/state/distribution_codec.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "daemon/common/crc32c.h"

namespace perld::state {
namespace {

constexpr std::string_view kMagic = "PDST";
constexpr uint8_t kVersion = 1;
constexpr size_t kCrcBytes = 4;
constexpr size_t kMaxVarintBytes = 10;  // ceil(64 / 7)
constexpr uint64_t kInt64Max = std::numeric_limits<int64_t>::max();

void PutVarint(std::string* out, uint64_t v) {
  char buf[kMaxVarintBytes];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out->append(buf, n);
}

// Reads one canonical varint from the front of `in`, advancing it. Returns
// false on truncation, more than 64 bits, or a non-canonical encoding.
bool GetVarint(std::string_view* in, uint64_t* out) {
  uint64_t v = 0;
  for (size_t i = 0; i < kMaxVarintBytes && i < in->size(); ++i) {
    const auto byte = static_cast<uint8_t>((*in)[i]);
    const uint64_t bits = byte & 0x7F;
    if (i == kMaxVarintBytes - 1 && bits > 1) {
      return false;  // the 10th byte may only carry bit 63
    }
    v |= bits << (7 * i);
    if ((byte & 0x80) == 0) {
      if (byte == 0 && i > 0) {
        return false;  // non-canonical: a trailing zero group
      }
      in->remove_prefix(i + 1);
      *out = v;
      return true;
    }
  }
  return false;
}

void PutFixed32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) {
    out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
}

uint32_t GetFixed32(std::string_view in) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) {
    v = (v << 8) | static_cast<uint8_t>(in[static_cast<size_t>(i)]);
  }
  return v;
}

absl::Status Corrupt(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("distribution blob: ", what));
}

}  // namespace

absl::StatusOr<std::string> EncodeDistribution(std::span<const LatencyBucket> buckets) {
  std::string out;
  // A dense distribution needs ~2 bytes per bucket; reserve for that.
  out.reserve(kMagic.size() + 1 + kMaxVarintBytes + 2 * buckets.size() + kCrcBytes);
  out.append(kMagic);
  out.push_back(static_cast<char>(kVersion));
  PutVarint(&out, buckets.size());
  int64_t previous = 0;
  uint64_t sum = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    const LatencyBucket& b = buckets[i];
    if (b.latency < 0 || (i > 0 && b.latency <= previous)) {
      return absl::InvalidArgumentError(
          absl::StrCat("distribution bucket ", i, ": latency ", b.latency,
                       i > 0 ? absl::StrCat(" after ", previous) : std::string(),
                       " (latencies must be >= 0 and strictly ascending)"));
    }
    if (b.count < 1) {
      return absl::InvalidArgumentError(absl::StrCat("distribution bucket ", i, " (latency ",
                                                     b.latency, "): count ", b.count, " < 1"));
    }
    sum += static_cast<uint64_t>(b.count);  // both <= 2^63 - 1: cannot wrap
    if (sum > kInt64Max) {
      return absl::InvalidArgumentError(
          absl::StrCat("distribution bucket ", i, ": the count sum exceeds INT64_MAX"));
    }
    PutVarint(&out, static_cast<uint64_t>(b.latency) - static_cast<uint64_t>(previous));
    PutVarint(&out, static_cast<uint64_t>(b.count));
    previous = b.latency;
  }
  PutFixed32(&out, common::Crc32c(out));
  return out;
}

absl::StatusOr<std::vector<LatencyBucket>> DecodeDistribution(std::string_view blob) {
  constexpr size_t kMinBytes = kMagic.size() + 1 + 1 + kCrcBytes;
  if (blob.size() < kMinBytes) {
    return absl::DataLossError(absl::StrCat("distribution blob: ", blob.size(),
                                            " bytes is shorter than the smallest blob (", kMinBytes,
                                            ")"));
  }
  if (blob.substr(0, kMagic.size()) != kMagic) {
    return absl::DataLossError("distribution blob: bad magic (not a perld distribution)");
  }
  std::string_view body = blob.substr(0, blob.size() - kCrcBytes);
  const uint32_t stored = GetFixed32(blob.substr(body.size()));
  const uint32_t actual = common::Crc32c(body);
  if (stored != actual) {
    return absl::DataLossError(absl::StrCat("distribution blob: checksum mismatch (stored ",
                                            absl::Hex(stored, absl::kZeroPad8), ", computed ",
                                            absl::Hex(actual, absl::kZeroPad8), ")"));
  }
  body.remove_prefix(kMagic.size());
  const auto version = static_cast<uint8_t>(body.front());
  body.remove_prefix(1);
  if (version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat("distribution blob: unsupported format version ",
                                                   version, " (this perld reads version ", kVersion,
                                                   ")"));
  }
  uint64_t n = 0;
  if (!GetVarint(&body, &n)) {
    return Corrupt("bad bucket-count varint");
  }
  if (n > body.size() / 2) {  // every bucket takes at least two bytes
    return Corrupt(absl::StrCat("bucket count ", n, " does not fit in ", body.size(), " bytes"));
  }
  std::vector<LatencyBucket> buckets;
  buckets.reserve(static_cast<size_t>(n));
  uint64_t latency = 0;
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t delta = 0;
    uint64_t count = 0;
    if (!GetVarint(&body, &delta) || !GetVarint(&body, &count)) {
      return Corrupt(absl::StrCat("bucket ", i, ": bad or truncated varint"));
    }
    if (i > 0 && delta == 0) {
      return Corrupt(absl::StrCat("bucket ", i, ": latency ", latency, " is not ascending"));
    }
    if (delta > kInt64Max - latency) {
      return Corrupt(absl::StrCat("bucket ", i, ": latency overflows int64"));
    }
    if (count == 0) {
      return Corrupt(absl::StrCat("bucket ", i, ": zero count"));
    }
    if (count > kInt64Max - sum) {
      return Corrupt(absl::StrCat("bucket ", i, ": the count sum overflows int64"));
    }
    latency += delta;
    sum += count;
    buckets.push_back(LatencyBucket{static_cast<int64_t>(latency), static_cast<int64_t>(count)});
  }
  if (!body.empty()) {
    return Corrupt(absl::StrCat(body.size(), " unexpected bytes after the last bucket"));
  }
  return buckets;
}

}  // namespace perld::state
