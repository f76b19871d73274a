// Recorder selection policy (seed section 7, SBK PerlBuilder) and factories.
//
//   periodic window: ArrayLatencyRecorder when the dense payload fits, i.e.
//       (max - min) < 2^31 - 1  and  floor((max - min) * 8 / MiB) < maxArraySizeMB,
//     else LongHashMapLatencyRecorder with budget maxHashMapSizeMB;
//   total window: always LongHashMapLatencyRecorder, totalMaxHashMapSizeMB;
//   aggregator (SBM): HybridPagedLatencyRecorder, exactLatencyMaxMemoryMB with
//     kReleaseAfterWindow for periodic windows, exactTotalLatencyMaxMemoryMB
//     with kResetWindowWhenFull for totals.
// The boxed HashMapLatencyRecorder is never chosen (tests and benchmarks only).
//
// Every factory validates the config (LatencyConfig::Validate) and returns
// its Status instead of constructing. Stateless; callable from any thread.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "daemon/core/hybrid_paged_latency_recorder.h"
#include "daemon/core/latency_config.h"
#include "daemon/core/latency_recorder.h"

namespace perld {

inline constexpr int64_t kLatencyValueSizeBytes = 8;  // SBK LATENCY_VALUE_SIZE_BYTES
inline constexpr int64_t kBytesPerMb = int64_t{1} << 20;

// kArray or kLongHashMap by the periodic rule above.
RecorderKind ChoosePeriodicRecorderKind(int64_t min_latency, int64_t max_latency,
                                        int64_t max_array_size_mb);
RecorderKind ChoosePeriodicRecorderKind(const LatencyConfig& config);

// The periodic (interval) window for `config`.
absl::StatusOr<std::unique_ptr<LatencyRecorder>> BuildPeriodicRecorder(const LatencyConfig& config);
// The whole-run window for `config`.
// The memory budget (MB) of a run's total window of this kind: the
// aggregator's exactTotalLatencyMaxMemoryMB for hybrid pages, PerL's
// totalMaxHashMapSizeMB otherwise. The run's live total keeps the same.
int64_t TotalBudgetMB(const LatencyConfig& config, RecorderKind total_kind);
absl::StatusOr<std::unique_ptr<LatencyRecorder>> BuildTotalRecorder(const LatencyConfig& config);

enum class HybridRole { kPeriodic, kTotal };
// SBM's exact nanosecond recorder for aggregated windows.
absl::StatusOr<std::unique_ptr<HybridPagedLatencyRecorder>> BuildHybridRecorder(
    const LatencyConfig& config, HybridRole role);

// Any kind with `config`'s bounds; `budget_mb` is the map budget for the map
// kinds and the memory target for kHybridPaged (kReleaseAfterWindow), unused
// by kArray. For tests, benchmarks and explicit operator choices.
absl::StatusOr<std::unique_ptr<LatencyRecorder>> BuildRecorder(RecorderKind kind,
                                                               const LatencyConfig& config,
                                                               int64_t budget_mb);

}  // namespace perld
