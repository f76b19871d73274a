// libFuzzer target: the Ingest decoder and validator. Any bytes are parsed
// as a perld.v1.IngestRequest; batches and window reports are decoded
// against a run's limits. A decoded window's buckets are ascending, within
// bounds, with counts >= 1 summing to its valid records.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "daemon/service/ingest_codec.h"

namespace {
constexpr int64_t kMaxBatch = 1 << 16;
constexpr int64_t kMaxPairs = 1 << 16;
constexpr int64_t kMin = 1;
constexpr int64_t kMax = 180'000'000'000;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  perld::v1::IngestRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  if (request.has_batch()) {
    perld::runs::RemoteWindow stamps;
    if (perld::service::DecodeBatch(request.batch(), kMaxBatch, &stamps).ok() &&
        (stamps.timestamps.size() != request.batch().count() ||
         (!stamps.intended.empty() && stamps.intended.size() != stamps.timestamps.size()))) {
      std::abort();
    }
  }
  if (request.has_window()) {
    absl::StatusOr<perld::runs::RemoteWindow> w =
        perld::service::DecodeWindow(request.window(), kMaxPairs, kMin, kMax);
    if (w.ok()) {
      int64_t valid = 0;
      int64_t previous = kMin - 1;
      for (const perld::LatencyBucket& b : w->buckets) {
        if (b.latency <= previous || b.latency > kMax || b.count < 1) std::abort();
        previous = b.latency;
        valid += b.count;
      }
      if (valid != w->counters.valid) std::abort();
    }
  }
  return 0;
}
