// libFuzzer target: the state store's distribution blob decoder (what the
// daemon loads from SQLite). Any blob decodes or is refused; a decoded blob
// encodes back to exactly the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "daemon/state/distribution_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view blob(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<perld::LatencyBucket>> buckets =
      perld::state::DecodeDistribution(blob);
  if (!buckets.ok()) return 0;
  absl::StatusOr<std::string> encoded = perld::state::EncodeDistribution(*buckets);
  if (!encoded.ok() || *encoded != blob) std::abort();
  return 0;
}
