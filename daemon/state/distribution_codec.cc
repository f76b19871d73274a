#include "daemon/state/distribution_codec.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/crc32c.h"

namespace perld::state {
namespace {

constexpr std::string_view kMagic = "PDST";
constexpr uint8_t kVersion = 1;
constexpr size_t kCrcBytes = 4;
constexpr size_t kMaxVarintBytes = 10;  // ceil(64 / 7)
constexpr uint64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kReadBytes = int64_t{64} << 10;  // one read of a streamed blob

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

DistributionBlobSource::DistributionBlobSource(int64_t body_end, BlobReader read)
    : read_(std::move(read)), body_end_(body_end) {}

absl::StatusOr<std::unique_ptr<DistributionBlobSource>> DistributionBlobSource::Open(
    int64_t size, BlobReader read) {
  constexpr int64_t kMinBytes = kMagic.size() + 1 + 1 + kCrcBytes;
  if (size < kMinBytes) {
    return absl::DataLossError(absl::StrCat(
        "distribution blob: ", size, " bytes is shorter than the smallest blob (", kMinBytes, ")"));
  }
  const int64_t body_end = size - static_cast<int64_t>(kCrcBytes);
  std::string piece(std::min<int64_t>(kReadBytes, body_end), '\0');
  if (absl::Status s = read(0, std::span<char>(piece.data(), kMagic.size())); !s.ok()) return s;
  if (std::string_view(piece).substr(0, kMagic.size()) != kMagic) {
    return absl::DataLossError("distribution blob: bad magic (not a perld distribution)");
  }
  char crc_bytes[kCrcBytes];
  if (absl::Status s = read(body_end, std::span<char>(crc_bytes, kCrcBytes)); !s.ok()) return s;
  const uint32_t stored = GetFixed32(std::string_view(crc_bytes, kCrcBytes));
  uint32_t actual = 0;
  for (int64_t at = 0; at < body_end;) {
    const auto n = static_cast<size_t>(std::min<int64_t>(kReadBytes, body_end - at));
    if (absl::Status s = read(at, std::span<char>(piece.data(), n)); !s.ok()) return s;
    actual = common::Crc32cExtend(actual, std::string_view(piece.data(), n));
    at += static_cast<int64_t>(n);
  }
  if (stored != actual) {
    return absl::DataLossError(absl::StrCat("distribution blob: checksum mismatch (stored ",
                                            absl::Hex(stored, absl::kZeroPad8), ", computed ",
                                            absl::Hex(actual, absl::kZeroPad8), ")"));
  }
  std::unique_ptr<DistributionBlobSource> source(
      new DistributionBlobSource(body_end, std::move(read)));
  source->offset_ = static_cast<int64_t>(kMagic.size());
  if (absl::Status s = source->Fill(1 + kMaxVarintBytes); !s.ok()) return s;
  const auto version = static_cast<uint8_t>(source->buffer_[source->at_++]);
  if (version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat("distribution blob: unsupported format version ",
                                                   version, " (this perld reads version ", kVersion,
                                                   ")"));
  }
  std::string_view unread = source->Unread();
  if (!GetVarint(&unread, &source->buckets_)) {
    return Corrupt("bad bucket-count varint");
  }
  source->at_ = source->filled_ - unread.size();
  const int64_t left = body_end - (source->offset_ - static_cast<int64_t>(unread.size()));
  if (source->buckets_ > static_cast<uint64_t>(left) / 2) {  // a bucket takes two bytes or more
    return Corrupt(
        absl::StrCat("bucket count ", source->buckets_, " does not fit in ", left, " bytes"));
  }
  return source;
}

absl::StatusOr<std::unique_ptr<DistributionBlobSource>> DistributionBlobSource::OpenStored(
    const SqliteBlob* blob) {
  return Open(blob->size(), [blob](int64_t offset, std::span<char> into) {
    return blob->Read(offset, into.data(), static_cast<int>(into.size()));
  });
}

absl::Status DistributionBlobSource::Fill(size_t want) {
  if (filled_ - at_ >= want || offset_ == body_end_) return absl::OkStatus();
  // Keep the unread tail, then read as much as the buffer holds.
  buffer_.erase(0, at_);
  filled_ -= at_;
  at_ = 0;
  const auto n = static_cast<size_t>(std::min<int64_t>(kReadBytes, body_end_ - offset_));
  buffer_.resize(filled_ + n);
  if (absl::Status s = read_(offset_, std::span<char>(buffer_.data() + filled_, n)); !s.ok()) {
    return s;
  }
  filled_ += n;
  offset_ += static_cast<int64_t>(n);
  return absl::OkStatus();
}

absl::StatusOr<std::span<const LatencyBucket>> DistributionBlobSource::Next() {
  chunk_.clear();
  if (done_) return std::span<const LatencyBucket>();
  while (decoded_ < buckets_ && chunk_.size() < kChunk) {
    if (absl::Status s = Fill(2 * kMaxVarintBytes); !s.ok()) return s;
    std::string_view unread = Unread();
    uint64_t delta = 0;
    uint64_t count = 0;
    if (!GetVarint(&unread, &delta) || !GetVarint(&unread, &count)) {
      return Corrupt(absl::StrCat("bucket ", decoded_, ": bad or truncated varint"));
    }
    at_ = filled_ - unread.size();
    if (decoded_ > 0 && delta == 0) {
      return Corrupt(
          absl::StrCat("bucket ", decoded_, ": latency ", latency_, " is not ascending"));
    }
    if (delta > kInt64Max - latency_) {
      return Corrupt(absl::StrCat("bucket ", decoded_, ": latency overflows int64"));
    }
    if (count == 0) {
      return Corrupt(absl::StrCat("bucket ", decoded_, ": zero count"));
    }
    if (count > kInt64Max - sum_) {
      return Corrupt(absl::StrCat("bucket ", decoded_, ": the count sum overflows int64"));
    }
    latency_ += delta;
    sum_ += count;
    ++decoded_;
    chunk_.push_back(LatencyBucket{static_cast<int64_t>(latency_), static_cast<int64_t>(count)});
  }
  if (decoded_ == buckets_) {
    const int64_t left = static_cast<int64_t>(filled_ - at_) + (body_end_ - offset_);
    if (left != 0) {
      return Corrupt(absl::StrCat(left, " unexpected bytes after the last bucket"));
    }
    done_ = chunk_.empty();
  }
  return std::span<const LatencyBucket>(chunk_);
}

absl::StatusOr<std::vector<LatencyBucket>> DecodeDistribution(std::string_view blob) {
  absl::StatusOr<std::unique_ptr<DistributionBlobSource>> source = DistributionBlobSource::Open(
      static_cast<int64_t>(blob.size()), [blob](int64_t offset, std::span<char> into) {
        blob.copy(into.data(), into.size(), static_cast<size_t>(offset));
        return absl::OkStatus();
      });
  if (!source.ok()) return source.status();
  std::vector<LatencyBucket> buckets;
  buckets.reserve(static_cast<size_t>((*source)->buckets()));
  for (;;) {
    absl::StatusOr<std::span<const LatencyBucket>> chunk = (*source)->Next();
    if (!chunk.ok()) return chunk.status();
    if (chunk->empty()) return buckets;
    buckets.insert(buckets.end(), chunk->begin(), chunk->end());
  }
}

}  // namespace perld::state
