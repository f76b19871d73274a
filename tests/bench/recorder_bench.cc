// Exact latency recorder benchmarks: the seed's tables (exact-latency-
// recorders.txt sections 6.3, 6.6, 10.1, 11) side by side in one run, for the
// dense array (Array), the primitive map over InterleavedLongMap
// (PrimitiveMap), the same recorder over absl::flat_hash_map (AbslMap: the
// baseline that justified the specialized map), the node-based reference map
// std::unordered_map (BoxedMap) and the hybrid pages (Hybrid).
//
//   Update/<kind>          seed "frequency update": the unchecked insert of a
//                          4,096-value cycle starting at 1,000 (batched through
//                          the recorder's private ReportBuckets, one virtual
//                          call per 4,096 updates).
//   RecordBatch/<kind>     production hot path: validated RecordBatch over
//                          TimeStamps carrying the same cycle.
//   RecordBatchNoOpBench/<kind>
//                          the same over a no-op `perld bench -time ns` run's
//                          latencies: 90% one value, runs of equal values.
//   Record/<kind>          validated single Record() call per value.
//   Window4096/<kind>      complete window: RecordBatch 4,096 distinct values,
//                          CopyPercentiles (5 percentiles), Reset.
//   Window4096Sparse/<kind> the same with one value per 256-value page
//                          (1,000 + 256 i): the seed's 6.6 sparse control.
//   MergeWindow4096/<kind>/<0|1>
//                          the aggregator's path: MergeBuckets of a remote
//                          4,096-pair window (0: contiguous, 1: one value
//                          per page), CopyPercentiles, Reset.
//   MergeWindowsSpread/<kind>
//                          ingest_bench's windows: 16 remote windows of ~4,000
//                          distinct values each (100 x U[100, 20000] ns, so
//                          ~20,000 distinct over ~7,800 pages) merged in turn
//                          into one periodic window, closed every 4,000 merges.
//   Extract65536/...       65,536-key sorted extraction: allocating vs reusable
//                          key buffer with std::sort + lookups (seed 6.3) and
//                          the recorder's own extraction (percentile walk and
//                          in-place clear included; refill not timed).
//   SortBuckets/...        std::sort vs the radix sort of latency_bucket_sort.h
//                          on hash-ordered (latency, count) pairs.
//   SweepUpdate|SweepWindow/<kind>/<slots>
//                          clustered lognormal (median slots/64, sigma 1.5)
//                          over 4,096 / 262,144 / 4,194,304 slots from 1 ms,
//                          65,536 observations per window (seed 10.1).
//
// Every benchmark reports "B/item": heap bytes allocated per update (or per
// window) inside the timed loop, counted by alloc_counter.cc.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/core/array_latency_recorder.h"
#include "daemon/core/hash_map_latency_recorder.h"
#include "daemon/core/hybrid_paged_latency_recorder.h"
#include "daemon/core/interleaved_long_map.h"
#include "daemon/core/latency_bucket_sort.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/long_hash_map_latency_recorder.h"
#include "daemon/core/run_total.h"
#include "tests/bench/alloc_counter.h"

namespace perld {

// Benchmark-only access to the unchecked insert (friend of LatencyRecorder).
class RecorderBenchPeer {
 public:
  static void Insert(LatencyRecorder& r, const LatencyBucket* buckets, size_t n) {
    r.ReportBuckets(buckets, n);
  }
};

namespace {

enum Kind : int { kArray, kLongMap, kAbslMap, kHashMap, kHybrid };
const char* const kKindNames[] = {"Array", "PrimitiveMap", "AbslMap", "BoxedMap", "Hybrid"};
constexpr Kind kAllKinds[] = {kArray, kLongMap, kAbslMap, kHashMap, kHybrid};

std::unique_ptr<LatencyRecorder> Make(Kind kind, int64_t lo, int64_t hi) {
  switch (kind) {
    case kArray:
      return std::move(*ArrayLatencyRecorder::Create(lo, hi));
    case kLongMap:
      return std::move(*LongHashMapLatencyRecorder::Create(lo, hi, 64));
    case kAbslMap:
      return std::move(*AbslLongHashMapLatencyRecorder::Create(lo, hi, 64));
    case kHashMap:
      return std::move(*HashMapLatencyRecorder::Create(lo, hi, 64));
    case kHybrid:
      return std::move(*HybridPagedLatencyRecorder::Create(
          lo, hi, 1024, 8, 32, HybridMemoryPolicy::kReleaseAfterWindow));
  }
  return nullptr;
}

// The seed's update workload: 4,096 values cycling from latency 1,000; the
// array covers [0, 5095] (5,096 slots as in the seed's JMH configuration).
constexpr int64_t kCycleBase = 1000;
constexpr int64_t kCycle = 4096;
constexpr int64_t kCycleLo = 0;
constexpr int64_t kCycleHi = 5095;

std::vector<LatencyBucket> CycleBuckets() {
  std::vector<LatencyBucket> b;
  for (int64_t i = 0; i < kCycle; ++i) {
    b.push_back({kCycleBase + i, 1});
  }
  return b;
}

std::vector<TimeStamp> ToTimeStamps(const std::vector<int64_t>& latencies) {
  std::vector<TimeStamp> ts;
  ts.reserve(latencies.size());
  int64_t t = 1'000'000;
  for (int64_t latency : latencies) {
    ts.push_back(TimeStamp{t, t + latency, 1, 1024});
    t += 3;
  }
  return ts;
}

std::vector<int64_t> CycleLatencies() {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < kCycle; ++i) {
    v.push_back(kCycleBase + i);
  }
  return v;
}

// A closed-loop no-op PerlBench run in ns (the shape of `perld bench
// -time ns`'s percentiles): 90% 10 ns, 5% 9 ns, 5% spread over 11..130 ns,
// in a fixed pseudo-random order (runs of equal values, as the recorder sees them).
std::vector<int64_t> NoOpBenchLatencies() {
  std::vector<int64_t> v;
  uint64_t x = 88172645463325252ULL;
  for (int64_t i = 0; i < kCycle; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const uint64_t p = x % 100;
    v.push_back(p < 90 ? 10 : p < 95 ? 9 : 11 + static_cast<int64_t>((x >> 8) % 120));
  }
  return v;
}

PercentileSet FivePercentiles() { return *PercentileSet::Create({50, 90, 99, 99.9, 99.99}); }

class AllocMeter {
 public:
  AllocMeter() : start_(bench::AllocatedBytes()) {}
  void Report(benchmark::State& state, double items_per_iteration) const {
    const double bytes = static_cast<double>(bench::AllocatedBytes() - start_);
    state.counters["B/item"] =
        bytes / (static_cast<double>(state.iterations()) * items_per_iteration);
  }

 private:
  uint64_t start_;
};

void BM_Update(benchmark::State& state, Kind kind) {
  auto r = Make(kind, kCycleLo, kCycleHi);
  r->Reset(0);
  const std::vector<LatencyBucket> buckets = CycleBuckets();
  RecorderBenchPeer::Insert(*r, buckets.data(), buckets.size());  // steady state: keys exist
  AllocMeter meter;
  for (auto _ : state) {
    RecorderBenchPeer::Insert(*r, buckets.data(), buckets.size());
    benchmark::ClobberMemory();
  }
  meter.Report(state, kCycle);
  state.SetItemsProcessed(state.iterations() * kCycle);
}

// Times RecordBatch over `latencies` (one window, steady state).
void TimeRecordBatch(benchmark::State& state, Kind kind, const std::vector<int64_t>& latencies) {
  auto r = Make(kind, kCycleLo, kCycleHi);
  r->Reset(0);
  const std::vector<TimeStamp> ts = ToTimeStamps(latencies);
  r->RecordBatch(ts.data(), ts.size());
  AllocMeter meter;
  for (auto _ : state) {
    r->RecordBatch(ts.data(), ts.size());
    benchmark::ClobberMemory();
  }
  meter.Report(state, static_cast<double>(ts.size()));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(ts.size()));
}

void BM_RecordBatch(benchmark::State& state, Kind kind) {
  TimeRecordBatch(state, kind, CycleLatencies());
}

// RecordBatch over the no-op bench's latencies (mostly one value).
void BM_RecordBatchNoOpBench(benchmark::State& state, Kind kind) {
  TimeRecordBatch(state, kind, NoOpBenchLatencies());
}

void BM_Record(benchmark::State& state, Kind kind) {
  auto r = Make(kind, kCycleLo, kCycleHi);
  r->Reset(0);
  const std::vector<int64_t> latencies = CycleLatencies();
  for (int64_t latency : latencies) {
    r->Record(0, 1, 1024, latency);
  }
  AllocMeter meter;
  for (auto _ : state) {
    for (int64_t latency : latencies) {
      r->Record(0, 1, 1024, latency);
    }
    benchmark::ClobberMemory();
  }
  meter.Report(state, kCycle);
  state.SetItemsProcessed(state.iterations() * kCycle);
}

void RunWindows(benchmark::State& state, Kind kind, int64_t lo, int64_t hi,
                const std::vector<TimeStamp>& ts) {
  auto r = Make(kind, lo, hi);
  r->Reset(0);
  const PercentileSet set = FivePercentiles();
  LatencySnapshot snapshot;
  for (int warm = 0; warm < 2; ++warm) {  // reach the retained high-water mark
    r->RecordBatch(ts.data(), ts.size());
    static_cast<void>(r->CopyPercentiles(set, &snapshot));
    r->Reset(0);
  }
  AllocMeter meter;
  for (auto _ : state) {
    r->RecordBatch(ts.data(), ts.size());
    benchmark::DoNotOptimize(r->CopyPercentiles(set, &snapshot));
    benchmark::DoNotOptimize(snapshot.values.data());
    r->Reset(0);
  }
  meter.Report(state, 1);
  state.counters["p99"] = static_cast<double>(snapshot.values[2]);
}

void BM_Window4096(benchmark::State& state, Kind kind) {
  RunWindows(state, kind, kCycleLo, kCycleHi, ToTimeStamps(CycleLatencies()));
}

std::vector<int64_t> OnePerPageLatencies() {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < kCycle; ++i) {
    v.push_back(kCycleBase + 256 * i);
  }
  return v;
}

void BM_Window4096Sparse(benchmark::State& state, Kind kind) {
  RunWindows(state, kind, kCycleLo, kCycleBase + 256 * kCycle, ToTimeStamps(OnePerPageLatencies()));
}

// The aggregator's complete window: one remote window of 4,096 pairs merged
// (validated MergeBuckets), 5 percentiles extracted, reset.
void BM_MergeWindow4096(benchmark::State& state, Kind kind) {
  const bool sparse = state.range(0) != 0;
  const std::vector<int64_t> latencies = sparse ? OnePerPageLatencies() : CycleLatencies();
  std::vector<LatencyBucket> pairs;
  LatencyCounters counters;
  for (int64_t latency : latencies) {
    pairs.push_back({latency, 3});
    counters.records += 3;
    counters.valid += 3;
    counters.total_latency += 3 * latency;
  }
  counters.min_latency = latencies.front();
  counters.max_latency = latencies.back();
  auto r = Make(kind, kCycleLo, kCycleBase + 256 * kCycle);
  r->Reset(0);
  const PercentileSet set = FivePercentiles();
  LatencySnapshot snapshot;
  for (int warm = 0; warm < 2; ++warm) {
    static_cast<void>(r->MergeBuckets(counters, pairs));
    static_cast<void>(r->CopyPercentiles(set, &snapshot));
    r->Reset(0);
  }
  AllocMeter meter;
  for (auto _ : state) {
    benchmark::DoNotOptimize(r->MergeBuckets(counters, pairs));
    benchmark::DoNotOptimize(r->CopyPercentiles(set, &snapshot));
    benchmark::DoNotOptimize(snapshot.values.data());
    r->Reset(0);
  }
  meter.Report(state, 1);
  state.counters["p99"] = static_cast<double>(snapshot.values[2]);
}

// ingest_bench's windows mode (tests/bench/ingest_bench.cc): 16 bodies of
// 4,000 values drawn from 100 x U[100, 20000], each ascending and distinct,
// count 3 each, merged in turn into one periodic window that is reported
// and reset every 4,000 merges (a 1 s interval at ~4,000 windows/s).
struct SpreadBody {
  std::vector<LatencyBucket> pairs;
  LatencyCounters counters;
};
constexpr int64_t kSpreadLo = 100 * 100;
constexpr int64_t kSpreadHi = 20'000 * 100;

std::vector<SpreadBody> SpreadBodies() {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> latency(100, 20'000);
  std::vector<SpreadBody> bodies(16);
  for (SpreadBody& body : bodies) {
    std::vector<int64_t> values;
    for (int i = 0; i < 4000; ++i) values.push_back(latency(rng) * 100);
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    for (int64_t v : values) {
      body.pairs.push_back({v, 3});
      body.counters.records += 3;
      body.counters.valid += 3;
      body.counters.total_latency += 3 * v;
    }
    body.counters.min_latency = values.front();
    body.counters.max_latency = values.back();
  }
  return bodies;
}

void BM_MergeWindowsSpread(benchmark::State& state, Kind kind) {
  const std::vector<SpreadBody> bodies = SpreadBodies();
  auto r = Make(kind, kSpreadLo, kSpreadHi);
  r->Reset(0);
  const PercentileSet set = FivePercentiles();
  LatencySnapshot snapshot;
  int64_t merges = 0;
  int64_t pairs = 0;
  AllocMeter meter;
  for (auto _ : state) {
    const SpreadBody& body = bodies[static_cast<size_t>(merges % bodies.size())];
    benchmark::DoNotOptimize(r->MergeBuckets(body.counters, body.pairs));
    pairs += static_cast<int64_t>(body.pairs.size());
    if (++merges % 4000 == 0) {
      benchmark::DoNotOptimize(r->CopyPercentiles(set, &snapshot));
      r->Reset(0);
    }
  }
  meter.Report(state, 1);
  state.SetItemsProcessed(pairs);
}

// A live run total (RunTotal, the registry's per-run total on the
// dispatcher thread) of `range` distinct latencies taking one closed window
// of 4,096 pairs after another, each of latencies it mostly holds already.
void BM_RunTotalAddWindow(benchmark::State& state) {
  const int64_t range = state.range(0);
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> latency(0, range - 1);
  std::vector<std::vector<LatencyBucket>> windows(16);
  for (std::vector<LatencyBucket>& w : windows) {
    std::vector<int64_t> values;
    for (int i = 0; i < 4096; ++i) values.push_back(latency(rng) * 10);
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    for (int64_t v : values) w.push_back({v, 2});
  }
  RunTotal total(size_t{1} << 40);
  std::vector<LatencyBucket> all;
  for (int64_t i = 0; i < range; ++i) all.push_back({i * 10, 1});
  LatencyCounters seed;
  seed.records = seed.valid = range;
  total.Add(seed, all);
  int64_t added = 0;
  for (auto _ : state) {
    const std::vector<LatencyBucket>& w = windows[static_cast<size_t>(added++ % 16)];
    LatencyCounters c;
    c.records = c.valid = 2 * static_cast<int64_t>(w.size());
    total.Add(c, w);
  }
  benchmark::DoNotOptimize(total.windows());
  state.SetItemsProcessed(added);
}

// --- 65,536-key extraction (seed 6.3) ---------------------------------------

constexpr int64_t kExtractKeys = 65536;

absl::flat_hash_map<int64_t, int64_t> ExtractMap() {
  absl::flat_hash_map<int64_t, int64_t> m;
  m.reserve(kExtractKeys);
  for (int64_t i = 0; i < kExtractKeys; ++i) {
    m.emplace(kCycleBase + i, i + 1);
  }
  return m;
}

// Former mechanism: a freshly allocated key list per extraction.
void BM_Extract65536_AllocatingKeys(benchmark::State& state) {
  const auto m = ExtractMap();
  AllocMeter meter;
  for (auto _ : state) {
    std::vector<int64_t> keys;
    for (const auto& kv : m) {
      keys.push_back(kv.first);
    }
    std::sort(keys.begin(), keys.end());
    int64_t checksum = 0;
    for (int64_t k : keys) {
      checksum += k ^ m.find(k)->second;
    }
    benchmark::DoNotOptimize(checksum);
  }
  meter.Report(state, 1);
}

// Seed's reusable primitive array: keys copied into a retained buffer.
void BM_Extract65536_ReusableKeys(benchmark::State& state) {
  const auto m = ExtractMap();
  std::vector<int64_t> keys(kExtractKeys);
  AllocMeter meter;
  for (auto _ : state) {
    size_t n = 0;
    for (const auto& kv : m) {
      keys[n++] = kv.first;
    }
    std::sort(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(n));
    int64_t checksum = 0;
    for (size_t i = 0; i < n; ++i) {
      checksum += keys[i] ^ m.find(keys[i])->second;
    }
    benchmark::DoNotOptimize(checksum);
  }
  meter.Report(state, 1);
}

// perld's recorder extraction (reusable (latency, count) buffer, sort, one
// percentile walk, in-place clear); the refill is excluded from the timing.
void BM_Extract65536_Recorder(benchmark::State& state) {
  auto r = Make(kLongMap, 0, int64_t{1} << 40);
  r->Reset(0);
  std::vector<LatencyBucket> buckets;
  for (int64_t i = 0; i < kExtractKeys; ++i) {
    buckets.push_back({kCycleBase + i, i + 1});
  }
  const PercentileSet set = FivePercentiles();
  LatencySnapshot snapshot;
  RecorderBenchPeer::Insert(*r, buckets.data(), buckets.size());
  static_cast<void>(r->CopyPercentiles(set, &snapshot));
  uint64_t allocated = 0;
  for (auto _ : state) {
    state.PauseTiming();
    RecorderBenchPeer::Insert(*r, buckets.data(), buckets.size());
    const uint64_t before = bench::AllocatedBytes();
    state.ResumeTiming();
    benchmark::DoNotOptimize(r->CopyPercentiles(set, &snapshot));
    allocated += bench::AllocatedBytes() - before;
  }
  state.counters["B/item"] =
      static_cast<double>(allocated) / static_cast<double>(state.iterations());
}

// std::sort vs the radix sort the map recorders use, on (latency, count)
// pairs in hash-table order (what a drained table yields).
void BM_SortBuckets(benchmark::State& state, bool radix) {
  const auto n = static_cast<size_t>(state.range(0));
  InterleavedLongMap table;
  for (size_t i = 0; i < n; ++i) {
    table.Add(kCycleBase + static_cast<int64_t>(i), 1);
  }
  std::vector<LatencyBucket> hash_order;
  table.ForEach([&](int64_t k, int64_t c) { hash_order.push_back({k, c}); });
  std::vector<LatencyBucket> work(n);
  std::vector<LatencyBucket> scratch(n);
  std::vector<uint32_t> histogram;
  const int64_t hi = kCycleBase + static_cast<int64_t>(n) - 1;
  for (auto _ : state) {
    std::copy(hash_order.begin(), hash_order.end(), work.begin());
    if (radix) {
      benchmark::DoNotOptimize(
          SortBucketsByLatency(work.data(), scratch.data(), n, kCycleBase, hi, &histogram));
    } else {
      std::sort(work.begin(), work.end(), [](const LatencyBucket& a, const LatencyBucket& b) {
        return a.latency < b.latency;
      });
      benchmark::DoNotOptimize(work.data());
    }
  }
}

// --- clustered-lognormal sweep (seed 10.1) ----------------------------------

constexpr int64_t kSweepBase = 1'000'000;  // 1 ms in ns
constexpr int64_t kSweepObservations = 65536;

std::vector<int64_t> SweepLatencies(int64_t slots) {
  std::mt19937_64 rng(0x5B6C7D8E9F012345ULL);
  std::normal_distribution<double> gauss(0.0, 1.0);
  const double location = std::log(std::max(1.0, static_cast<double>(slots) / 64.0));
  std::vector<int64_t> v;
  v.reserve(kSweepObservations);
  for (int64_t i = 0; i < kSweepObservations; ++i) {
    const double sample = std::exp(location + 1.5 * gauss(rng));
    const int64_t offset =
        std::min<int64_t>(slots - 1, std::max<int64_t>(0, std::llround(sample) - 1));
    v.push_back(kSweepBase + offset);
  }
  return v;
}

void BM_SweepUpdate(benchmark::State& state, Kind kind) {
  const int64_t slots = state.range(0);
  auto r = Make(kind, kSweepBase, kSweepBase + slots - 1);
  r->Reset(0);
  std::vector<LatencyBucket> buckets;
  for (int64_t latency : SweepLatencies(slots)) {
    buckets.push_back({latency, 1});
  }
  RecorderBenchPeer::Insert(*r, buckets.data(), buckets.size());
  AllocMeter meter;
  for (auto _ : state) {
    RecorderBenchPeer::Insert(*r, buckets.data(), buckets.size());
    benchmark::ClobberMemory();
  }
  meter.Report(state, kSweepObservations);
  state.SetItemsProcessed(state.iterations() * kSweepObservations);
}

void BM_SweepWindow(benchmark::State& state, Kind kind) {
  const int64_t slots = state.range(0);
  RunWindows(state, kind, kSweepBase, kSweepBase + slots - 1, ToTimeStamps(SweepLatencies(slots)));
}

void RegisterAll() {
  for (Kind kind : kAllKinds) {
    const std::string name = kKindNames[kind];
    benchmark::RegisterBenchmark(("Update/" + name).c_str(), BM_Update, kind);
    benchmark::RegisterBenchmark(("RecordBatch/" + name).c_str(), BM_RecordBatch, kind);
    benchmark::RegisterBenchmark(("RecordBatchNoOpBench/" + name).c_str(), BM_RecordBatchNoOpBench,
                                 kind);
    benchmark::RegisterBenchmark(("Record/" + name).c_str(), BM_Record, kind);
    benchmark::RegisterBenchmark(("Window4096/" + name).c_str(), BM_Window4096, kind)
        ->Unit(benchmark::kMicrosecond);
  }
  for (Kind kind : {kLongMap, kHashMap, kHybrid}) {
    const std::string name = kKindNames[kind];
    benchmark::RegisterBenchmark(("Window4096Sparse/" + name).c_str(), BM_Window4096Sparse, kind)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("MergeWindow4096/" + name).c_str(), BM_MergeWindow4096, kind)
        ->Arg(0)
        ->Arg(1)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("MergeWindowsSpread/" + name).c_str(), BM_MergeWindowsSpread,
                                 kind)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("RunTotalAddWindow", BM_RunTotalAddWindow)
      ->Arg(10'000)
      ->Arg(200'000)
      ->Arg(2'000'000)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("Extract65536/AllocatingKeys", BM_Extract65536_AllocatingKeys)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("Extract65536/ReusableKeys", BM_Extract65536_ReusableKeys)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("Extract65536/Recorder", BM_Extract65536_Recorder)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("SortBuckets/StdSort", BM_SortBuckets, false)
      ->Arg(4096)
      ->Arg(65536)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("SortBuckets/Radix", BM_SortBuckets, true)
      ->Arg(4096)
      ->Arg(65536)
      ->Unit(benchmark::kMicrosecond);
  for (Kind kind : kAllKinds) {
    const std::string name = kKindNames[kind];
    benchmark::RegisterBenchmark(("SweepUpdate/" + name).c_str(), BM_SweepUpdate, kind)
        ->Arg(4096)
        ->Arg(262144)
        ->Arg(4194304);
    benchmark::RegisterBenchmark(("SweepWindow/" + name).c_str(), BM_SweepWindow, kind)
        ->Arg(4096)
        ->Arg(262144)
        ->Arg(4194304)
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace
}  // namespace perld

int main(int argc, char** argv) {
  perld::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
