// Test helpers for the state store tests: a scratch directory, records with a
// distinct value in every field, and a field-by-field RunInfo comparison
// (RunInfo's defaulted operator== is deleted: LatencyConfig has none).
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "daemon/runs/run_info.h"
#include "daemon/runs/window_record.h"
#include "gtest/gtest.h"

namespace perld::state::testing {

// A fresh directory under $TMPDIR, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "perld-state-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
    EXPECT_FALSE(path_.empty()) << "mkdtemp failed";
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A run with a distinct, awkward value in every field.
inline runs::RunInfo MakeRun(runs::RunId id, runs::RunState state = runs::RunState::kRunning,
                             int64_t end_unix_ms = 0) {
  runs::RunInfo r;
  r.id = id;
  r.spec.name = "run \"" + std::to_string(id) + "\" \\ ünïcode";
  r.spec.labels = {{"host", "node-7"}, {"quote\"key", "line\nbreak\ttab\x01"}, {"", "empty key"}};
  r.spec.source = runs::RunSource::kIngest;
  r.spec.latency.time_unit = TimeUnit::kUs;
  r.spec.latency.min_latency = 3;
  r.spec.latency.max_latency = (int64_t{1} << 62) - 1;
  r.spec.latency.percentiles = {0.1, 5, 33.333333333333336, 50, 99.9, 99.99, 100};
  r.spec.latency.max_array_size_mb = 11;
  r.spec.latency.max_hash_map_size_mb = 12;
  r.spec.latency.total_max_hash_map_size_mb = 13;
  r.spec.latency.exact_latency_page_bits = 14;
  r.spec.latency.exact_latency_sparse_page_entries = 15;
  r.spec.latency.exact_latency_max_memory_mb = 16;
  r.spec.latency.exact_total_latency_max_memory_mb = 17;
  r.spec.reporting_interval_ms = 1234;
  r.spec.periodic_recorder = RecorderKind::kHybridPaged;
  r.spec.total_recorder = RecorderKind::kHashMap;
  r.spec.clock = "monotonic (tsc not in available clocksources)";
  r.spec.clock_resolution_ns = 19;
  r.spec.parameters = "-writers 4 -size 1024";
  r.spec.writers = 4;
  r.spec.readers = 2;
  r.state = state;
  r.failure_reason = state == runs::RunState::kFailed ? "client vanished" : "";
  r.start_unix_ms = 1'700'000'000'000 + static_cast<int64_t>(id);
  r.end_unix_ms = end_unix_ms;
  return r;
}

// A window whose counters all differ; percentiles as PercentileSet makes them.
inline runs::WindowRecord MakeWindow(runs::RunId run_id, runs::WindowRecord::Kind kind,
                                     int64_t seq) {
  runs::WindowRecord w;
  w.run_id = run_id;
  w.kind = kind;
  w.seq = seq;
  w.start_unix_ms = 1'700'000'000'000 + seq * 1000;
  w.end_unix_ms = w.start_unix_ms + 999;
  w.seconds = 0.999 + static_cast<double>(seq) / 3.0;
  w.rate_seconds = w.seconds * 7.0 / 3.0;  // clients' spans (window_rate.h), bit exact
  LatencySnapshot& s = w.snapshot;
  s.start_time = seq * 1'000'000'000;
  s.end_time = s.start_time + 999'999'999;
  s.records = 1000 + seq;
  s.bytes = (int64_t{1} << 40) + seq;
  s.total_latency = (int64_t{1} << 62) + seq;
  s.min_latency = 3;
  s.max_latency = (int64_t{1} << 61) + 5;
  s.invalid = 2;
  s.lower_discard = 4;
  s.higher_discard = 6;
  s.valid = 900 + seq;
  s.rejected = 8;
  s.overflow = seq % 2 == 0;
  s.closed_full = seq % 3 == 0;
  s.full_closes = seq / 3;
  for (const double p : {5.0, 50.0, 99.9, 99.99, 100.0}) {
    s.percents.push_back(p);
    s.fractions.push_back(p / 100.0);
    s.values.push_back(static_cast<int64_t>(p * 1000) + seq);
    s.counts.push_back(static_cast<int64_t>(p) + 1);
  }
  s.median = 50'000 + seq;
  w.distribution = {{3, 1}, {4, 2}};  // windows are stored without it
  return w;
}

// A final total with `buckets` distinct latencies (some near 2^62).
inline runs::WindowRecord MakeTotal(runs::RunId run_id, size_t buckets) {
  runs::WindowRecord t = MakeWindow(run_id, runs::WindowRecord::Kind::kTotal, 1);
  t.segments = 3;
  t.exact_total = false;
  t.distribution.clear();
  int64_t valid = 0;
  for (size_t i = 0; i < buckets; ++i) {
    const int64_t latency = i + 1 < buckets ? static_cast<int64_t>(3 + 7 * i)
                                            : (int64_t{1} << 62) - 1;  // the last one: huge
    const int64_t count = 1 + static_cast<int64_t>(i % 5);
    t.distribution.push_back({latency, count});
    valid += count;
  }
  t.snapshot.valid = valid;
  return t;
}

inline void ExpectSameRun(const runs::RunInfo& a, const runs::RunInfo& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.spec.name, b.spec.name);
  EXPECT_EQ(a.spec.labels, b.spec.labels);
  EXPECT_EQ(a.spec.source, b.spec.source);
  const LatencyConfig& x = a.spec.latency;
  const LatencyConfig& y = b.spec.latency;
  EXPECT_EQ(x.time_unit, y.time_unit);
  EXPECT_EQ(x.min_latency, y.min_latency);
  EXPECT_EQ(x.max_latency, y.max_latency);
  EXPECT_EQ(x.percentiles, y.percentiles);  // bit-exact doubles
  EXPECT_EQ(x.max_array_size_mb, y.max_array_size_mb);
  EXPECT_EQ(x.max_hash_map_size_mb, y.max_hash_map_size_mb);
  EXPECT_EQ(x.total_max_hash_map_size_mb, y.total_max_hash_map_size_mb);
  EXPECT_EQ(x.exact_latency_page_bits, y.exact_latency_page_bits);
  EXPECT_EQ(x.exact_latency_sparse_page_entries, y.exact_latency_sparse_page_entries);
  EXPECT_EQ(x.exact_latency_max_memory_mb, y.exact_latency_max_memory_mb);
  EXPECT_EQ(x.exact_total_latency_max_memory_mb, y.exact_total_latency_max_memory_mb);
  EXPECT_EQ(a.spec.reporting_interval_ms, b.spec.reporting_interval_ms);
  EXPECT_EQ(a.spec.periodic_recorder, b.spec.periodic_recorder);
  EXPECT_EQ(a.spec.total_recorder, b.spec.total_recorder);
  EXPECT_EQ(a.spec.clock, b.spec.clock);
  EXPECT_EQ(a.spec.clock_resolution_ns, b.spec.clock_resolution_ns);
  EXPECT_EQ(a.spec.parameters, b.spec.parameters);
  EXPECT_EQ(a.spec.writers, b.spec.writers);
  EXPECT_EQ(a.spec.readers, b.spec.readers);
  EXPECT_EQ(a.spec.checkpointed, b.spec.checkpointed);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.failure_reason, b.failure_reason);
  EXPECT_EQ(a.start_unix_ms, b.start_unix_ms);
  EXPECT_EQ(a.end_unix_ms, b.end_unix_ms);
  EXPECT_TRUE(a == b) << "a RunInfo field the checks above do not name differs";
}

// The window as the store keeps it: without its distribution.
inline runs::WindowRecord Stored(runs::WindowRecord w) {
  w.distribution.clear();
  return w;
}

}  // namespace perld::state::testing
