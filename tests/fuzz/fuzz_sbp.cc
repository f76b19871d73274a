// libFuzzer target: SBK's SBP record handler. Any bytes are parsed as a
// MessageLatenciesRecord and turned into a remote window for a nanosecond
// run; what is accepted is ascending, within bounds and adds up.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "daemon/service/sbp_service.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ::MessageLatenciesRecord record;
  if (!record.ParseFromArray(data, static_cast<int>(size))) return 0;
  static const perld::LatencyConfig run = perld::LatencyConfig::ForUnit(perld::TimeUnit::kNs);
  absl::StatusOr<perld::runs::RemoteWindow> w = perld::service::SbpWindow(record, run, 1 << 16);
  if (!w.ok()) return 0;
  int64_t valid = 0;
  int64_t previous = run.min_latency - 1;
  for (const perld::LatencyBucket& b : w->buckets) {
    if (b.latency <= previous || b.latency > run.max_latency || b.count < 1) std::abort();
    previous = b.latency;
    valid += b.count;
  }
  if (valid != w->counters.valid) std::abort();
  return 0;
}
