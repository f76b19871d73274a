// Exact equivalence of every recorder against the reference HashMap recorder
// and an independent sorted-vector oracle: every counter, every percentile,
// every percentile count and the median, bit for bit, through both the
// single-record and the batch paths, over repeated extract/reset cycles.
#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "daemon/core/array_latency_recorder.h"
#include "daemon/core/hash_map_latency_recorder.h"
#include "daemon/core/hybrid_paged_latency_recorder.h"
#include "daemon/core/latency_config.h"
#include "daemon/core/long_hash_map_latency_recorder.h"
#include "gtest/gtest.h"
#include "tests/unit/latency_oracle.h"

namespace perld {
namespace {

using testing::CollectingSink;
using testing::Observation;
using testing::SortedVectorOracle;

struct Spec {
  std::string name;
  std::function<std::unique_ptr<LatencyRecorder>(int64_t, int64_t)> make;
};

template <typename T>
std::unique_ptr<LatencyRecorder> Unwrap(absl::StatusOr<std::unique_ptr<T>> r) {
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::unique_ptr<LatencyRecorder>(std::move(*r)) : nullptr;
}

std::vector<Spec> AllSpecs() {
  return {
      {"Array",
       [](int64_t lo, int64_t hi) { return Unwrap(ArrayLatencyRecorder::Create(lo, hi)); }},
      {"LongHashMap",
       [](int64_t lo, int64_t hi) {
         return Unwrap(LongHashMapLatencyRecorder::Create(lo, hi, 64));
       }},
      {"AbslLongHashMap",
       [](int64_t lo, int64_t hi) {
         return Unwrap(AbslLongHashMapLatencyRecorder::Create(lo, hi, 64));
       }},
      {"HashMap",
       [](int64_t lo, int64_t hi) { return Unwrap(HashMapLatencyRecorder::Create(lo, hi, 64)); }},
      {"Hybrid8x32",
       [](int64_t lo, int64_t hi) {
         return Unwrap(HybridPagedLatencyRecorder::Create(lo, hi, 64, 8, 32,
                                                          HybridMemoryPolicy::kReleaseAfterWindow));
       }},
      {"Hybrid4x3",
       [](int64_t lo, int64_t hi) {
         return Unwrap(HybridPagedLatencyRecorder::Create(lo, hi, 64, 4, 3,
                                                          HybridMemoryPolicy::kReleaseAfterWindow));
       }},
      {"Hybrid1x1",
       [](int64_t lo, int64_t hi) {
         return Unwrap(HybridPagedLatencyRecorder::Create(
             lo, hi, 64, 1, 1, HybridMemoryPolicy::kResetWindowWhenFull));
       }},
  };
}

PercentileSet WideSet() {
  std::vector<double> p = DefaultPercentiles();
  for (double extra : {0.01, 1.0, 33.3, 100.0}) {
    p.push_back(extra);
  }
  auto set = PercentileSet::Create(p);
  EXPECT_TRUE(set.ok());
  return *set;
}

// Feeds `obs` either record by record or in irregular batches.
void Feed(LatencyRecorder& r, const std::vector<Observation>& obs, bool batch, uint64_t seed) {
  if (!batch) {
    for (const Observation& o : obs) {
      r.Record(0, o.records, o.bytes, o.latency);
    }
    return;
  }
  const std::vector<TimeStamp> ts = testing::ToTimeStamps(obs);
  std::mt19937_64 rng(seed);
  size_t i = 0;
  while (i < ts.size()) {
    const size_t n = std::min<size_t>(ts.size() - i, 1 + rng() % 300);
    r.RecordBatch(ts.data() + i, n);
    i += n;
  }
}

LatencySnapshot Close(LatencyRecorder& r, const PercentileSet& set, int64_t end,
                      LatencyRecorder* copy_to = nullptr, LatencyBucketSink* sink = nullptr) {
  LatencySnapshot s;
  r.SetEndTime(end);
  const absl::Status status = r.CopyPercentiles(set, &s, copy_to, sink);
  EXPECT_TRUE(status.ok()) << status;
  return s;
}

// Runs `windows` through every recorder kind (both paths) on ONE instance per
// kind, so each window after the first also tests extract/reset reuse.
void ExpectAllExact(int64_t lo, int64_t hi, const std::vector<std::vector<Observation>>& windows) {
  const PercentileSet set = WideSet();
  for (const Spec& spec : AllSpecs()) {
    for (bool batch : {false, true}) {
      SCOPED_TRACE(spec.name + (batch ? " batch" : " single"));
      auto r = spec.make(lo, hi);
      auto reference = Unwrap(HashMapLatencyRecorder::Create(lo, hi, 64));
      ASSERT_NE(r, nullptr);
      int64_t t = 10;
      r->Reset(t);
      reference->Reset(t);
      for (size_t w = 0; w < windows.size(); ++w) {
        SCOPED_TRACE("window " + std::to_string(w));
        SortedVectorOracle oracle(lo, hi);
        oracle.Add(windows[w]);
        Feed(*r, windows[w], batch, w);
        Feed(*reference, windows[w], false, w);
        CollectingSink sink;
        const LatencySnapshot got = Close(*r, set, t + 5, nullptr, &sink);
        const LatencySnapshot ref = Close(*reference, set, t + 5);
        LatencySnapshot want = oracle.Expect(set);
        want.start_time = t;
        want.end_time = t + 5;
        EXPECT_EQ(got, want);
        EXPECT_EQ(got, ref);
        EXPECT_EQ(got.values, want.values);
        EXPECT_EQ(got.counts, want.counts);
        EXPECT_EQ(sink.buckets(), oracle.Buckets());
        // CopyPercentiles consumed and reset the window.
        EXPECT_EQ(r->counters(), LatencyCounters{});
        EXPECT_EQ(r->window().start_time(), t + 5);
        t += 5;
        r->Reset(t);
        reference->Reset(t);
      }
    }
  }
}

std::vector<Observation> RandomStream(size_t n, int64_t lo, int64_t hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Observation> out;
  const int64_t span = hi - lo + 1;
  for (size_t i = 0; i < n; ++i) {
    Observation o;
    const uint64_t kind = rng() % 100;
    if (kind < 3) {
      o.latency = -static_cast<int64_t>(1 + rng() % 1000);  // invalid
    } else if (kind < 8) {
      o.latency = lo > 0 ? static_cast<int64_t>(rng() % static_cast<uint64_t>(lo)) : hi + 1;
    } else if (kind < 13) {
      o.latency = hi + 1 + static_cast<int64_t>(rng() % 100000);
    } else {
      o.latency = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(span));
    }
    o.records = kind == 50 ? 0 : static_cast<int32_t>(1 + (rng() % 7 == 0 ? rng() % 1000 : 0));
    o.bytes = static_cast<int32_t>(rng() % 4096);
    out.push_back(o);
  }
  return out;
}

TEST(LatencyRecordersTest, NonZeroLowerBound) {
  std::vector<Observation> w;
  for (int64_t v = 100; v <= 200; v += 3) {
    w.push_back({v, 2, 10});
  }
  ExpectAllExact(100, 200, {w});
}

TEST(LatencyRecordersTest, KeepsInclusiveBounds) {
  // Exactly min and max are valid; min - 1 and max + 1 are discarded.
  ExpectAllExact(1000, 1255, {{{1000, 1, 1}, {1255, 3, 1}, {999, 5, 1}, {1256, 7, 1}}});
  // Single-slot range.
  ExpectAllExact(42, 42, {{{42, 4, 0}, {41, 1, 0}, {43, 1, 0}, {42, 1, 0}}});
}

TEST(LatencyRecordersTest, DiscardsBothSidesAndNegative) {
  ExpectAllExact(50, 60,
                 {{{-1, 3, 8},
                   {0, 2, 8},
                   {49, 1, 8},
                   {61, 4, 8},
                   {1'000'000, 1, 8},
                   {55, 6, 8},
                   {-9'000'000'000, 1, 8},
                   {50, 1, 8}}});
}

TEST(LatencyRecordersTest, DuplicatesAndBatchedCounts) {
  std::vector<Observation> w;
  w.reserve(70);
  for (int i = 0; i < 50; ++i) {
    w.push_back({500 + i % 5, 1 + i * 37 % 1000, 100});
  }
  for (int i = 0; i < 20; ++i) {
    w.push_back({503, 1000, 1});
  }
  ExpectAllExact(0, 5095, {w});
}

TEST(LatencyRecordersTest, RejectsNonPositiveRecordCounts) {
  ExpectAllExact(0, 100, {{{10, 0, 5}, {20, -3, 5}, {30, 1, 5}, {-4, 0, 5}}});
}

TEST(LatencyRecordersTest, EmptyWindows) {
  ExpectAllExact(0, 100, {{}, {}, {{5, 1, 0}}, {}, {{-1, 1, 0}}, {{200, 1, 0}}});
}

TEST(LatencyRecordersTest, GrowingAndShrinkingWindows) {
  std::vector<std::vector<Observation>> windows;
  for (size_t n : {1, 10, 1000, 10, 1, 5000, 0, 3, 4096, 2}) {
    windows.push_back(RandomStream(n, 1000, 5095, n * 7 + 1));
  }
  ExpectAllExact(1000, 5095, windows);
}

TEST(LatencyRecordersTest, RepeatedExtractResetCycles) {
  std::vector<std::vector<Observation>> windows;
  windows.reserve(25);
  for (int cycle = 0; cycle < 25; ++cycle) {
    windows.push_back(RandomStream(200, 0, 1000, static_cast<uint64_t>(cycle)));
  }
  ExpectAllExact(0, 1000, windows);
}

TEST(LatencyRecordersTest, DeterministicRandomStreams) {
  ExpectAllExact(0, 65535, {RandomStream(20000, 0, 65535, 42), RandomStream(5000, 0, 65535, 43)});
  ExpectAllExact(777, 100'000, {RandomStream(20000, 777, 100'000, 44)});
}

TEST(LatencyRecordersTest, ClusteredLognormalStreams) {
  ExpectAllExact(0, 262'143,
                 {testing::ClusteredLognormal(30000, 0, 262'144, 7),
                  testing::ClusteredLognormal(30000, 0, 262'144, 8)});
  ExpectAllExact(1000, 1000 + 4095, {testing::ClusteredLognormal(20000, 1000, 4096, 9)});
}

TEST(LatencyRecordersTest, DenseAndSparseExtractionBoundaries) {
  // The primitive map drains by direct addressing when span <= 2 * distinct
  // and radix-sorts otherwise; both sides of the boundary, and std::sort's
  // small-input path, must give identical results.
  std::vector<std::vector<Observation>> windows;
  for (int64_t distinct : {10, 63, 64, 65, 100, 1000}) {
    std::vector<Observation> stride2;  // span 2d - 1: dense
    std::vector<Observation> edge;     // span exactly 2d + 1: sparse
    for (int64_t i = 0; i < distinct; ++i) {
      stride2.push_back({500 + 2 * i, static_cast<int32_t>(1 + i % 3), 1});
      edge.push_back({500 + 2 * i, 1, 1});
    }
    edge.back().latency = 500 + 2 * distinct;
    windows.push_back(stride2);
    windows.push_back(edge);
    std::vector<Observation> outlier = stride2;  // far outlier forces the sparse path
    outlier.push_back({90'000, 2, 1});
    windows.push_back(outlier);
  }
  ExpectAllExact(0, 100'000, windows);
}

TEST(LatencyRecordersTest, BatchSumsMatchSingleRecordsAtExtremes) {
  // Maximal record counts at the upper bound stress the batch path's local
  // 64-bit (small bounds) and 128-bit (large bounds) latency sums.
  constexpr int32_t kMaxRecords = std::numeric_limits<int32_t>::max();
  for (int64_t hi : {int64_t{180'000}, int64_t{180'000'000'000}}) {
    for (const Spec& spec : AllSpecs()) {
      if (spec.name == "Array" && hi > 1'000'000) {
        continue;
      }
      SCOPED_TRACE(spec.name + " hi=" + std::to_string(hi));
      auto single = spec.make(0, hi);
      auto batch = spec.make(0, hi);
      single->Reset(0);
      batch->Reset(0);
      std::vector<Observation> obs(30'000, Observation{hi, kMaxRecords, 7});
      obs.push_back({hi + 1, kMaxRecords, 7});
      obs.push_back({-1, kMaxRecords, 7});
      // One call: spans several of the batch path's internal sum chunks.
      const std::vector<TimeStamp> ts = testing::ToTimeStamps(obs);
      Feed(*single, obs, false, 1);
      batch->RecordBatch(ts.data(), ts.size());
      EXPECT_EQ(batch->counters(), single->counters());
      EXPECT_EQ(batch->counters().valid, int64_t{30'000} * kMaxRecords);
      // Keep going until every latency sum saturates: both paths must agree.
      for (int round = 0; round < 40; ++round) {
        Feed(*single, obs, false, 2);
        batch->RecordBatch(ts.data(), ts.size());
      }
      EXPECT_EQ(batch->counters(), single->counters());
      EXPECT_EQ(batch->counters().total_latency, std::numeric_limits<int64_t>::max());
      EXPECT_TRUE(batch->IsFull());
    }
  }
}

TEST(LatencyRecordersTest, ResetWithoutExtractionDoesNotLeak) {
  const PercentileSet set = WideSet();
  for (const Spec& spec : AllSpecs()) {
    SCOPED_TRACE(spec.name);
    auto r = spec.make(0, 1000);
    r->Reset(0);
    Feed(*r, RandomStream(500, 0, 1000, 3), true, 1);
    r->Reset(1);  // no extraction: the distribution must still be emptied
    const std::vector<Observation> w = {{10, 1, 0}, {20, 2, 0}};
    Feed(*r, w, true, 2);
    SortedVectorOracle oracle(0, 1000);
    oracle.Add(w);
    LatencySnapshot want = oracle.Expect(set);
    want.start_time = 1;
    want.end_time = 2;
    EXPECT_EQ(Close(*r, set, 2), want);
  }
}

TEST(LatencyRecordersTest, SnapshotReportsSbkPrintRules) {
  for (const Spec& spec : AllSpecs()) {
    SCOPED_TRACE(spec.name);
    auto r = spec.make(10, 20);
    r->Reset(0);
    r->Record(0, 2, 100, -5);  // invalid only: no min/max/total
    LatencySnapshot s = Close(*r, PercentileSet::Default(), 1);
    EXPECT_EQ(s.min_latency, 0);
    EXPECT_EQ(s.invalid, 2);
    EXPECT_EQ(s.AvgLatency(), 0.0);
    r->Record(0, 1, 0, 5);   // lower discard still counts in min/max/total/avg
    r->Record(0, 1, 0, 30);  // higher discard likewise
    r->Record(0, 2, 0, 15);
    s = Close(*r, PercentileSet::Default(), 2);
    EXPECT_EQ(s.min_latency, 5);
    EXPECT_EQ(s.max_latency, 30);
    EXPECT_EQ(s.total_latency, 5 + 30 + 30);
    EXPECT_DOUBLE_EQ(s.AvgLatency(), 65.0 / 4.0);
    EXPECT_EQ(s.valid, 2);
    EXPECT_EQ(s.median, 15);
  }
}

// Merging K windows equals recording the concatenated stream, for every
// source/target kind combination, and never consumes the sources.
TEST(LatencyRecordersTest, MergeOfKWindowsEqualsConcatenatedStream) {
  const int64_t lo = 100;
  const int64_t hi = 70'000;
  const PercentileSet set = WideSet();
  std::vector<std::vector<Observation>> parts;
  parts.reserve(5);
  for (int k = 0; k < 5; ++k) {
    parts.push_back(k % 2 == 0 ? RandomStream(4000, lo, hi, 100 + k)
                               : testing::ClusteredLognormal(4000, lo, 60'000, 200 + k));
  }
  SortedVectorOracle all(lo, hi);
  for (const auto& p : parts) {
    all.Add(p);
  }
  LatencySnapshot want = all.Expect(set);
  want.start_time = 0;
  want.end_time = 9;

  const std::vector<Spec> specs = AllSpecs();
  for (const Spec& target_spec : specs) {
    SCOPED_TRACE("target " + target_spec.name);
    auto target = target_spec.make(lo, hi);
    target->Reset(0);
    std::vector<std::unique_ptr<LatencyRecorder>> sources;
    for (size_t k = 0; k < parts.size(); ++k) {
      sources.push_back(specs[k % specs.size()].make(lo, hi));
      sources.back()->Reset(0);
      Feed(*sources.back(), parts[k], true, k);
      ASSERT_TRUE(target->MergeFrom(*sources.back()).ok());
    }
    EXPECT_EQ(Close(*target, set, 9), want);
    // Sources were not consumed.
    for (size_t k = 0; k < parts.size(); ++k) {
      SortedVectorOracle one(lo, hi);
      one.Add(parts[k]);
      LatencySnapshot w = one.Expect(set);
      w.end_time = 9;
      EXPECT_EQ(Close(*sources[k], set, 9), w);
    }
    // The same through the window -> total copy of CopyPercentiles.
    auto total = target_spec.make(lo, hi);
    total->Reset(0);
    for (size_t k = 0; k < parts.size(); ++k) {
      auto window = specs[(k + 1) % specs.size()].make(lo, hi);
      window->Reset(0);
      Feed(*window, parts[k], false, k);
      Close(*window, set, 9, total.get());
    }
    EXPECT_EQ(Close(*total, set, 9), want);
  }
}

// What a remote client reports for `obs`: its window's counters and
// buckets, in its hash map's order or, with `ascending`, sorted (as the
// wire carries them).
struct RemoteReport {
  LatencyCounters counters;
  std::vector<LatencyBucket> buckets;
};
RemoteReport ReportOf(const std::vector<Observation>& obs, int64_t lo, int64_t hi, uint64_t seed,
                      bool ascending) {
  auto remote = Unwrap(LongHashMapLatencyRecorder::Create(lo, hi, 64));
  remote->Reset(0);
  Feed(*remote, obs, true, seed);
  CollectingSink sink;
  remote->VisitBuckets(&sink);
  RemoteReport r{remote->counters(), sink.buckets()};
  if (ascending) {
    std::sort(r.buckets.begin(), r.buckets.end(),
              [](const LatencyBucket& a, const LatencyBucket& b) { return a.latency < b.latency; });
  }
  return r;
}

TEST(LatencyRecordersTest, MergeBucketsFromRemoteReports) {
  const int64_t lo = 0;
  const int64_t hi = 1'000'000;
  const PercentileSet set = WideSet();
  for (const Spec& target_spec : AllSpecs()) {
    SCOPED_TRACE(target_spec.name);
    auto target = target_spec.make(lo, hi);
    target->Reset(0);
    SortedVectorOracle oracle(lo, hi);
    for (int client = 0; client < 4; ++client) {
      const auto obs = RandomStream(3000, lo, hi, 300 + client);
      oracle.Add(obs);
      const RemoteReport r = ReportOf(obs, lo, hi, static_cast<uint64_t>(client), false);
      // Half of them checked by their producer for these bounds already.
      const CheckedBounds checked =
          client % 2 == 1 ? CheckedBounds{.min_bound = lo, .max_bound = hi} : CheckedBounds{};
      ASSERT_TRUE(target->MergeBuckets(r.counters, r.buckets, checked).ok());
    }
    LatencySnapshot want = oracle.Expect(set);
    want.end_time = 3;
    EXPECT_EQ(Close(*target, set, 3), want);
  }
}

// Remote windows as the aggregator merges them -- ascending buckets -- at
// every density a page can have: a value or two a page (each bucket on a
// page of its own), a handful (a page's inline entries), tens (its heap
// array, searched in chunks, and its promotion to a dense page), and runs of
// windows that reuse the pages of the ones before (stale entries past a
// page's size must never count). Every period equals the records merged.
TEST(LatencyRecordersTest, MergeAscendingBucketsAtEveryPageDensity) {
  const int64_t lo = 0;
  const int64_t hi = 200'000;
  const PercentileSet set = WideSet();
  for (const Spec& spec : AllSpecs()) {
    SCOPED_TRACE(spec.name);
    auto target = spec.make(lo, hi);
    target->Reset(0);
    std::mt19937_64 rng(17);
    for (int period = 0; period < 6; ++period) {
      SortedVectorOracle oracle(lo, hi);
      for (int window = 0; window < 4; ++window) {
        const int64_t percent = std::array<int64_t, 6>{1, 3, 8, 15, 40, 90}[rng() % 6];
        const int64_t from = static_cast<int64_t>(rng() % 150'000);
        const int64_t to = std::min<int64_t>(hi, from + 1 + static_cast<int64_t>(rng() % 60'000));
        std::vector<Observation> obs;
        for (int64_t v = from; v <= to; ++v) {
          if (static_cast<int64_t>(rng() % 100) < percent) {
            obs.push_back(Observation{v, static_cast<int32_t>(1 + rng() % 3), 0});
          }
        }
        if (obs.empty()) continue;
        oracle.Add(obs);
        const RemoteReport r =
            ReportOf(obs, lo, hi, static_cast<uint64_t>(period * 4 + window), true);
        ASSERT_TRUE(target->MergeBuckets(r.counters, r.buckets).ok());
      }
      LatencySnapshot want = oracle.Expect(set);
      want.start_time = 0;
      want.end_time = period + 1;
      EXPECT_EQ(Close(*target, set, period + 1), want) << "period " << period;
      target->Reset(0);
    }
  }
}

TEST(LatencyRecordersTest, MergeBucketsRejectsBadInputWithoutChange) {
  for (const Spec& spec : AllSpecs()) {
    SCOPED_TRACE(spec.name);
    auto r = spec.make(10, 20);
    r->Reset(0);
    r->Record(0, 1, 0, 15);
    LatencyCounters c;
    c.records = 1;
    c.valid = 1;
    c.min_latency = 9;
    c.max_latency = 21;
    const std::vector<LatencyBucket> below = {{9, 1}};
    const std::vector<LatencyBucket> above = {{21, 1}};
    const std::vector<LatencyBucket> zero = {{12, 0}};
    const std::vector<LatencyBucket> two = {{12, 2}};
    EXPECT_EQ(r->MergeBuckets(c, below).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r->MergeBuckets(c, above).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r->MergeBuckets(c, zero).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r->MergeBuckets(c, two).code(), absl::StatusCode::kInvalidArgument);
    LatencyCounters negative = c;
    negative.valid = -1;
    EXPECT_EQ(r->MergeBuckets(negative, {}).code(), absl::StatusCode::kInvalidArgument);
    LatencyCounters contradicting = c;
    contradicting.min_latency = 13;
    const std::vector<LatencyBucket> one = {{12, 1}};
    EXPECT_EQ(r->MergeBuckets(contradicting, one).code(), absl::StatusCode::kInvalidArgument);
    // Checked by the caller against other bounds: still checked here.
    EXPECT_EQ(r->MergeBuckets(c, above, CheckedBounds{.min_bound = 10, .max_bound = 21}).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r->MergeBuckets(c, below, CheckedBounds{.min_bound = 9, .max_bound = 20}).code(),
              absl::StatusCode::kInvalidArgument);
    // Nothing changed.
    const LatencySnapshot s = Close(*r, PercentileSet::Default(), 1);
    EXPECT_EQ(s.records, 1);
    EXPECT_EQ(s.valid, 1);
    EXPECT_EQ(s.median, 15);
  }
}

TEST(LatencyRecordersTest, MergeRequiresIdenticalBounds) {
  auto a = Unwrap(LongHashMapLatencyRecorder::Create(0, 100, 1));
  auto b = Unwrap(ArrayLatencyRecorder::Create(0, 99));
  b->Record(0, 1, 0, 50);
  EXPECT_EQ(a->MergeFrom(*b).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(a->MergeFrom(*a).code(), absl::StatusCode::kInvalidArgument);
  LatencySnapshot s;
  EXPECT_EQ(b->CopyPercentiles(PercentileSet::Default(), &s, a.get()).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(b->CopyPercentiles(PercentileSet::Default(), &s, b.get()).code(),
            absl::StatusCode::kInvalidArgument);
  // Refused copies consume nothing.
  EXPECT_EQ(b->counters().valid, 1);
  EXPECT_EQ(a->counters(), LatencyCounters{});
}

TEST(LatencyRecordersTest, FactoriesRejectBadBounds) {
  EXPECT_FALSE(ArrayLatencyRecorder::Create(-1, 10).ok());
  EXPECT_FALSE(ArrayLatencyRecorder::Create(10, 9).ok());
  EXPECT_FALSE(ArrayLatencyRecorder::Create(0, ArrayLatencyRecorder::kMaxSlots).ok());
  EXPECT_FALSE(LongHashMapLatencyRecorder::Create(5, 4, 1).ok());
  EXPECT_FALSE(LongHashMapLatencyRecorder::Create(0, 4, 0).ok());
  EXPECT_FALSE(HashMapLatencyRecorder::Create(-2, 4, 1).ok());
  using H = HybridPagedLatencyRecorder;
  const auto p = HybridMemoryPolicy::kReleaseAfterWindow;
  EXPECT_FALSE(H::Create(0, 10, 0, 8, 32, p).ok());
  EXPECT_FALSE(H::Create(0, 10, 1, 0, 1, p).ok());
  EXPECT_FALSE(H::Create(0, 10, 1, 17, 1, p).ok());
  EXPECT_FALSE(H::Create(0, 10, 1, 8, 256, p).ok());
  EXPECT_FALSE(H::Create(0, 10, 1, 8, 0, p).ok());
  EXPECT_TRUE(H::Create(0, 10, 1, 8, 255, p).ok());
  EXPECT_TRUE(H::Create(0, 10, 1, 16, 65535, p).ok());
}

TEST(ArrayLatencyRecorderTest, SlotsAreInclusiveAndScanOnlyTheSpan) {
  auto r = ArrayLatencyRecorder::Create(0, 5095);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->slots(), 5096);
  EXPECT_EQ((*r)->RetainedBytes(), 5096u * 8u);
  EXPECT_EQ((*r)->kind(), RecorderKind::kArray);
}

TEST(LongHashMapLatencyRecorderTest, ClearRetainsTableAndSortBuffer) {
  auto made = LongHashMapLatencyRecorder::Create(0, 1'000'000, 64);
  ASSERT_TRUE(made.ok());
  LongHashMapLatencyRecorder& r = **made;
  const PercentileSet set = PercentileSet::Default();
  r.Reset(0);
  for (int64_t v = 0; v < 5000; ++v) {
    r.Record(0, 1, 0, v * 3);
  }
  const size_t capacity = r.table_capacity();
  EXPECT_EQ(r.distinct(), 5000u);
  EXPECT_EQ(r.map_bytes(), 5000 * 16);
  Close(r, set, 1);
  EXPECT_EQ(r.distinct(), 0u);
  EXPECT_EQ(r.map_bytes(), 0);
  EXPECT_EQ(r.table_capacity(), capacity);  // absl's clear() would have freed it
  const size_t buffer = r.sort_buffer_capacity();
  EXPECT_GE(buffer, 5000u);
  for (int cycle = 0; cycle < 5; ++cycle) {
    for (int64_t v = 0; v < 5000; ++v) {
      r.Record(0, 1, 0, v * 7 + cycle);
    }
    Close(r, set, 2);
    EXPECT_EQ(r.table_capacity(), capacity);
    EXPECT_EQ(r.sort_buffer_capacity(), buffer);
  }
  for (int64_t v = 0; v < 100; ++v) {
    r.Record(0, 1, 0, v);
  }
  Close(r, set, 3);
  EXPECT_EQ(r.sort_buffer_capacity(), buffer);  // small windows do not shrink it
  for (int64_t v = 0; v < 9000; ++v) {
    r.Record(0, 1, 0, v);  // dense window: drained by direct addressing, no sort buffer
  }
  Close(r, set, 4);
  EXPECT_EQ(r.sort_buffer_capacity(), buffer);
  for (int64_t v = 0; v < 9000; ++v) {
    r.Record(0, 1, 0, v * 5);  // sparse window past the high-water mark
  }
  Close(r, set, 5);
  EXPECT_GE(r.sort_buffer_capacity(), 9000u);
}

TEST(LongHashMapLatencyRecorderTest, BudgetCountsSixteenBytesPerDistinctKey) {
  auto made = LongHashMapLatencyRecorder::Create(0, int64_t{1} << 40, 1);
  ASSERT_TRUE(made.ok());
  LongHashMapLatencyRecorder& r = **made;
  r.Reset(0);
  for (int64_t v = 0; v < 65536; ++v) {
    r.Record(0, 1, 0, v);
  }
  for (int64_t v = 0; v < 65536; ++v) {
    r.Record(0, 1, 0, v);  // repeats cost nothing
  }
  EXPECT_EQ(r.map_bytes(), 1 << 20);
  EXPECT_FALSE(r.IsFull());  // SBK: full only when strictly above the budget
  r.Record(0, 1, 0, 65536);
  EXPECT_TRUE(r.IsFull());
  Close(r, PercentileSet::Default(), 1);
  EXPECT_FALSE(r.IsFull());
}

TEST(HashMapLatencyRecorderTest, BudgetMatchesPrimitiveMap) {
  auto made = HashMapLatencyRecorder::Create(0, 1 << 30, 1);
  ASSERT_TRUE(made.ok());
  HashMapLatencyRecorder& r = **made;
  r.Reset(0);
  for (int64_t v = 0; v <= 65536; ++v) {
    r.Record(0, 1, 0, v);
  }
  EXPECT_TRUE(r.IsFull());
  EXPECT_EQ(r.kind(), RecorderKind::kHashMap);
}

class HybridPagedLatencyRecorderTest : public ::testing::Test {
 protected:
  static std::unique_ptr<HybridPagedLatencyRecorder> Make(int64_t mb, int bits, int limit,
                                                          HybridMemoryPolicy policy) {
    auto r = HybridPagedLatencyRecorder::Create(0, int64_t{1} << 40, mb, bits, limit, policy);
    EXPECT_TRUE(r.ok()) << r.status();
    (*r)->Reset(0);
    return std::move(*r);
  }
};

TEST_F(HybridPagedLatencyRecorderTest, RetainedMemoryFollowsTheSeedEstimate) {
  auto r = Make(64, 8, 32, HybridMemoryPolicy::kReleaseAfterWindow);
  // One value: page 32 + map entry 32 + two array headers 32 + 4 x (2 + 8);
  // active ids: 4 x 8 + 16.
  r->Record(0, 1, 0, 5 * 256 + 7);
  EXPECT_EQ(r->RetainedBytes(), 136u + 48u);
  // 32 distinct values in the page: sparse capacity 4 -> 8 -> 16 -> 32.
  for (int64_t off = 0; off < 31; ++off) {
    r->Record(0, 1, 0, int64_t{5} * 256 + off * 3);
  }
  EXPECT_EQ(r->dense_pages(), 0u);
  EXPECT_EQ(r->RetainedBytes(), 64u + 32u + 320u + 48u);
  // The 33rd distinct value promotes the page to 256 dense counters.
  r->Record(0, 1, 0, 5 * 256 + 200);
  EXPECT_EQ(r->dense_pages(), 1u);
  EXPECT_EQ(r->RetainedBytes(), 64u + 16u + 2048u + 48u);
  // Five more pages: the active-id array grows 4 -> 8.
  for (int64_t page = 10; page < 15; ++page) {
    r->Record(0, 1, 0, page * 256);
  }
  EXPECT_EQ(r->RetainedBytes(), 2128u + 5 * 136u + 8 * 8u + 16u);
}

TEST_F(HybridPagedLatencyRecorderTest, PromotionBoundaryAndPageReuse) {
  const PercentileSet set = WideSet();
  auto r = Make(64, 8, 32, HybridMemoryPolicy::kReleaseAfterWindow);
  SortedVectorOracle oracle(0, int64_t{1} << 40);
  std::vector<Observation> w;
  for (int64_t off = 31; off >= 0; --off) {
    w.push_back({int64_t{3} * 256 + off * 8, 2, 0});  // 32: sparse
  }
  w.push_back({255, 1, 0});  // page 0 last slot
  w.push_back({256, 1, 0});  // page 1 first slot
  for (const auto& o : w) {
    r->Record(0, o.records, o.bytes, o.latency);
  }
  oracle.Add(w);
  EXPECT_EQ(r->dense_pages(), 0u);
  EXPECT_EQ(r->active_pages(), 3u);
  LatencySnapshot want = oracle.Expect(set);
  want.end_time = 1;
  EXPECT_EQ(Close(*r, set, 1), want);
  EXPECT_EQ(r->retained_pages(), 3u);  // kept for reuse
  EXPECT_EQ(r->active_pages(), 0u);

  // Next window: the page of 3 * 256 receives 33 distinct values -> dense.
  oracle.Clear();
  w.clear();
  for (int64_t off = 0; off < 33; ++off) {
    w.push_back({int64_t{3} * 256 + off, 1, 0});
  }
  w.push_back({3 * 256 + 5, 4, 0});
  for (const auto& o : w) {
    r->Record(0, o.records, o.bytes, o.latency);
  }
  oracle.Add(w);
  EXPECT_EQ(r->dense_pages(), 1u);
  want = oracle.Expect(set);
  want.start_time = 1;
  want.end_time = 2;
  EXPECT_EQ(Close(*r, set, 2), want);
  EXPECT_EQ(r->retained_pages(), 3u);
  EXPECT_EQ(r->dense_pages(), 1u);  // stays dense, zeroed, reusable

  // A dense page reused with few values still reports exactly.
  oracle.Clear();
  w = {{3 * 256 + 1, 1, 0}, {3 * 256 + 200, 2, 0}, {7, 1, 0}};
  for (const auto& o : w) {
    r->Record(0, o.records, o.bytes, o.latency);
  }
  oracle.Add(w);
  want = oracle.Expect(set);
  want.start_time = 2;
  want.end_time = 3;
  EXPECT_EQ(Close(*r, set, 3), want);
}

TEST_F(HybridPagedLatencyRecorderTest, ReleasesOversizedCacheAfterTheNaturalReport) {
  const PercentileSet set = WideSet();
  auto r = Make(1, 8, 32, HybridMemoryPolicy::kReleaseAfterWindow);
  SortedVectorOracle oracle(0, int64_t{1} << 40);
  std::vector<Observation> w;
  for (int64_t page = 0; page < 10000; ++page) {
    w.push_back({page * 256 + page % 256, 1, 0});
  }
  Feed(*r, w, true, 1);
  oracle.Add(w);
  EXPECT_GT(r->RetainedBytes(), size_t{1} << 20);
  EXPECT_FALSE(r->IsFull());  // periodic policy never cuts a window short
  LatencySnapshot want = oracle.Expect(set);
  want.end_time = 1;
  EXPECT_EQ(Close(*r, set, 1), want);  // the full window is still reported exactly
  EXPECT_EQ(r->retained_pages(), 0u);
  EXPECT_EQ(r->RetainedBytes(), 0u);
  // And works normally afterwards.
  r->Record(0, 1, 0, 99);
  EXPECT_EQ(Close(*r, set, 2).median, 99);
}

TEST_F(HybridPagedLatencyRecorderTest, TotalPolicyReportsFullAndResetReleases) {
  auto r = Make(1, 8, 32, HybridMemoryPolicy::kResetWindowWhenFull);
  for (int64_t page = 0; page < 10000; ++page) {
    r->Record(0, 1, 0, page * 256);
  }
  EXPECT_TRUE(r->IsFull());
  r->Reset(5);  // reset without extraction also releases the oversized cache
  EXPECT_FALSE(r->IsFull());
  EXPECT_EQ(r->retained_pages(), 0u);
  EXPECT_EQ(r->RetainedBytes(), 0u);
}

TEST_F(HybridPagedLatencyRecorderTest, UnderLimitCacheIsKept) {
  auto r = Make(64, 8, 32, HybridMemoryPolicy::kReleaseAfterWindow);
  for (int64_t page = 0; page < 1000; ++page) {
    r->Record(0, 1, 0, page * 256);
  }
  const size_t retained = r->RetainedBytes();
  Close(*r, PercentileSet::Default(), 1);
  EXPECT_EQ(r->retained_pages(), 1000u);
  EXPECT_EQ(r->RetainedBytes(), retained);
}

}  // namespace
}  // namespace perld
