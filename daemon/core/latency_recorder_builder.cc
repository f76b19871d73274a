#include "daemon/core/latency_recorder_builder.h"

#include "daemon/core/array_latency_recorder.h"
#include "daemon/core/hash_map_latency_recorder.h"
#include "daemon/core/long_hash_map_latency_recorder.h"

namespace perld {

RecorderKind ChoosePeriodicRecorderKind(int64_t min_latency, int64_t max_latency,
                                        int64_t max_array_size_mb) {
  const int64_t range = max_latency - min_latency;
  // Test indexability first: it also keeps range * 8 from overflowing.
  if (range >= 0 && range < ArrayLatencyRecorder::kMaxSlots &&
      (range * kLatencyValueSizeBytes) / kBytesPerMb < max_array_size_mb) {
    return RecorderKind::kArray;
  }
  return RecorderKind::kLongHashMap;
}

RecorderKind ChoosePeriodicRecorderKind(const LatencyConfig& config) {
  return ChoosePeriodicRecorderKind(config.min_latency, config.max_latency,
                                    config.max_array_size_mb);
}

absl::StatusOr<std::unique_ptr<LatencyRecorder>> BuildRecorder(RecorderKind kind,
                                                               const LatencyConfig& config,
                                                               int64_t budget_mb) {
  if (absl::Status s = config.Validate(); !s.ok()) {
    return s;
  }
  const int64_t lo = config.min_latency;
  const int64_t hi = config.max_latency;
  switch (kind) {
    case RecorderKind::kArray: {
      auto r = ArrayLatencyRecorder::Create(lo, hi);
      if (!r.ok()) {
        return r.status();
      }
      return std::unique_ptr<LatencyRecorder>(std::move(*r));
    }
    case RecorderKind::kLongHashMap: {
      auto r = LongHashMapLatencyRecorder::Create(lo, hi, budget_mb);
      if (!r.ok()) {
        return r.status();
      }
      return std::unique_ptr<LatencyRecorder>(std::move(*r));
    }
    case RecorderKind::kHashMap: {
      auto r = HashMapLatencyRecorder::Create(lo, hi, budget_mb);
      if (!r.ok()) {
        return r.status();
      }
      return std::unique_ptr<LatencyRecorder>(std::move(*r));
    }
    case RecorderKind::kHybridPaged: {
      auto r = HybridPagedLatencyRecorder::Create(
          lo, hi, budget_mb, static_cast<int>(config.exact_latency_page_bits),
          static_cast<int>(config.exact_latency_sparse_page_entries),
          HybridMemoryPolicy::kReleaseAfterWindow);
      if (!r.ok()) {
        return r.status();
      }
      return std::unique_ptr<LatencyRecorder>(std::move(*r));
    }
  }
  return absl::InvalidArgumentError("unknown recorder kind");
}

absl::StatusOr<std::unique_ptr<LatencyRecorder>> BuildPeriodicRecorder(
    const LatencyConfig& config) {
  if (absl::Status s = config.Validate(); !s.ok()) {
    return s;
  }
  const RecorderKind kind = ChoosePeriodicRecorderKind(config);
  return BuildRecorder(
      kind, config,
      kind == RecorderKind::kArray ? config.max_array_size_mb : config.max_hash_map_size_mb);
}

int64_t TotalBudgetMB(const LatencyConfig& config, RecorderKind total_kind) {
  return total_kind == RecorderKind::kHybridPaged ? config.exact_total_latency_max_memory_mb
                                                  : config.total_max_hash_map_size_mb;
}

absl::StatusOr<std::unique_ptr<LatencyRecorder>> BuildTotalRecorder(const LatencyConfig& config) {
  return BuildRecorder(RecorderKind::kLongHashMap, config,
                       TotalBudgetMB(config, RecorderKind::kLongHashMap));
}

absl::StatusOr<std::unique_ptr<HybridPagedLatencyRecorder>> BuildHybridRecorder(
    const LatencyConfig& config, HybridRole role) {
  if (absl::Status s = config.Validate(); !s.ok()) {
    return s;
  }
  const bool total = role == HybridRole::kTotal;
  return HybridPagedLatencyRecorder::Create(
      config.min_latency, config.max_latency,
      total ? TotalBudgetMB(config, RecorderKind::kHybridPaged)
            : config.exact_latency_max_memory_mb,
      static_cast<int>(config.exact_latency_page_bits),
      static_cast<int>(config.exact_latency_sparse_page_entries),
      total ? HybridMemoryPolicy::kResetWindowWhenFull : HybridMemoryPolicy::kReleaseAfterWindow);
}

}  // namespace perld
