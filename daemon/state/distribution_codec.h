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
// Pure functions, any thread. Decode never trusts its input: it is meant to
// face a fuzzer and disk corruption, and it allocates at most one bucket per
// two input bytes.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/latency_recorder.h"

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

}  // namespace perld::state
