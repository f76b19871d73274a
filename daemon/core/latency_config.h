// LatencyConfig: the latency-window settings of one run, with SBK's defaults.
//
// Plain data; the YAML/flag loader (daemon/config) fills it and calls
// Normalize() once. The core never reads files. Latency bounds are inclusive
// and expressed in the run's time unit. Memory sizes are MiB (2^20 bytes).
// Not thread-safe to mutate; share a const instance freely.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace perld {

enum class TimeUnit { kMs, kUs, kNs };

// SBK's -time spelling ("ms", "mcs", "ns"), its CSV name ("MILLISECONDS",
// "MICROSECONDS", "NANOSECONDS") and the nanoseconds in one unit.
const char* TimeUnitName(TimeUnit unit);
const char* TimeUnitFullName(TimeUnit unit);
// The unit as people read it everywhere but SBK's own formats: "ms", "us",
// "ns" (the live page, /api, messages and logs; SBK's console line, CSV,
// -time option and the metrics' unit label keep SBK's spellings).
const char* TimeUnitSymbol(TimeUnit unit);
int64_t NanosPerUnit(TimeUnit unit);

// SBK's default latency ceiling (3 minutes) expressed in `unit`:
// 180'000 ms, 180'000'000 us or 180'000'000'000 ns.
int64_t DefaultMaxLatency(TimeUnit unit);

// SBK's default percentile set, in percent, ascending: 5, 10, ..., 90, then
// 92.5, 95, 97.5, 99, 99.25, 99.5, 99.75, 99.9, 99.95, 99.99.
std::vector<double> DefaultPercentiles();

struct LatencyConfig {
  TimeUnit time_unit = TimeUnit::kMs;
  int64_t min_latency = 0;                                 // key minLatency, inclusive
  int64_t max_latency = 180'000;                           // key maxLatency, inclusive
  std::vector<double> percentiles = DefaultPercentiles();  // key percentiles, in percent
  int64_t max_array_size_mb = 64;                          // key maxArraySizeMB
  int64_t max_hash_map_size_mb = 192;                      // key maxHashMapSizeMB
  int64_t total_max_hash_map_size_mb = 256;                // key totalMaxHashMapSizeMB
  int64_t exact_latency_page_bits = 8;                     // key exactLatencyPageBits
  int64_t exact_latency_sparse_page_entries = 32;          // key exactLatencySparsePageEntries
  int64_t exact_latency_max_memory_mb = 1024;              // key exactLatencyMaxMemoryMB
  int64_t exact_total_latency_max_memory_mb = 2048;        // key exactTotalLatencyMaxMemoryMB

  // The defaults with min/max latency converted to `unit` (0 .. 3 minutes).
  static LatencyConfig ForUnit(TimeUnit unit);

  // OK, or InvalidArgument whose message starts with the offending key, e.g.
  // "percentiles: -1 is outside [0, 100]". Rules: 0 <= minLatency <=
  // maxLatency < 2^62; every percentile finite, in [0, 100], no duplicates
  // (any order); every MB size >= 1 and <= 2^40; 1 <= exactLatencyPageBits
  // <= 16; 1 <= exactLatencySparsePageEntries < 2^exactLatencyPageBits.
  [[nodiscard]] absl::Status Validate() const;

  // Sorts `percentiles` ascending, then Validate(). Call once after loading.
  [[nodiscard]] absl::Status Normalize();

  bool operator==(const LatencyConfig&) const = default;
};

}  // namespace perld
