// DistributionCodec: the compact, checksummed blob of one exact latency
// distribution (the `totals.distribution` column of the state store).
//
// Format (version 1), every integer an unsigned LEB128 varint unless noted:
//
//   magic      4 bytes "PDST"
//   version    1 byte, 1
//   n          bucket count
//   n times    delta, count   delta = latency - previous latency (the first
//                             latency is a delta from 0); delta >= 1 after the
//                             first bucket, count >= 1
//   crc32c     4 bytes little-endian: Crc32c of every byte before it
//
// A dense distribution costs about 2 bytes per bucket (16 in memory); the
// empty distribution is 10 bytes. Varints are canonical (no superfluous
// 0x80 continuation bytes), so Encode(Decode(blob)) == blob for every blob
// Decode accepts.
//
// Decoding never trusts its input: it is meant to face a fuzzer and disk
// corruption, and it allocates at most one bucket per two input bytes.
// DistributionBlobSource decodes a blob it reads piece by piece (a stored
// blob through SQLite's incremental I/O) in fixed memory: a run total's
// spilled segments are merged this way without loading them. Decode is the
// same decoder over a blob in memory, so both accept and refuse alike.
//
// Threads: the functions any thread; a DistributionBlobSource single owner.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/bucket_source.h"
#include "daemon/core/latency_recorder.h"
#include "daemon/state/sqlite_db.h"

namespace perld::state {

// Encodes `buckets`. REQUIRES (else InvalidArgument, naming the bucket):
// latencies >= 0 and strictly ascending, every count >= 1, counts summing to
// at most INT64_MAX (a window's `valid` is an int64).
[[nodiscard]] absl::StatusOr<std::string> EncodeDistribution(
    std::span<const LatencyBucket> buckets);

// Decodes a blob made by EncodeDistribution. Errors, never a crash:
// DataLoss for a blob that is not one (too short, bad magic, checksum
// mismatch); InvalidArgument for an unsupported version or a well-checksummed
// blob that breaks the format (bad or non-canonical varint, bucket count
// beyond what the length can hold, non-ascending latency, zero count, int64
// overflow of a latency or of the count sum, bytes left over).
[[nodiscard]] absl::StatusOr<std::vector<LatencyBucket>> DecodeDistribution(std::string_view blob);

// Fills `into` with the blob's bytes at `offset` (both within the blob).
using BlobReader = std::function<absl::Status(int64_t offset, std::span<char> into)>;

class DistributionBlobSource final : public BucketSource {
 public:
  // Opens a blob of `size` bytes read through `read`: checks its length,
  // magic and checksum (one streaming pass) and its version, and reads the
  // bucket count -- errors as DecodeDistribution's, and a read's own error.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DistributionBlobSource>> Open(
      int64_t size, BlobReader read);
  // Open over a stored blob read through SQLite's incremental I/O. `blob`
  // must outlive the source.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DistributionBlobSource>> OpenStored(
      const SqliteBlob* blob);

  uint64_t buckets() const { return buckets_; }
  // The next buckets (up to kChunk); empty at the end. A format error
  // (InvalidArgument, as DecodeDistribution's) may surface on any call.
  absl::StatusOr<std::span<const LatencyBucket>> Next() override;

  static constexpr size_t kChunk = 4096;

 private:
  DistributionBlobSource(int64_t body_end, BlobReader read);
  // Makes at least `want` unread bytes available in the buffer (fewer only
  // at the end of the body).
  absl::Status Fill(size_t want);
  std::string_view Unread() const { return std::string_view(buffer_).substr(at_, filled_ - at_); }

  BlobReader read_;
  int64_t body_end_;    // offset of the checksum: the last body byte + 1
  int64_t offset_ = 0;  // blob offset of buffer_[filled_]
  std::string buffer_;
  size_t at_ = 0;
  size_t filled_ = 0;
  uint64_t buckets_ = 0;
  uint64_t decoded_ = 0;
  uint64_t latency_ = 0;
  uint64_t sum_ = 0;
  bool done_ = false;
  std::vector<LatencyBucket> chunk_;
};

}  // namespace perld::state
