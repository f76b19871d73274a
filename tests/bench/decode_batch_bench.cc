// What the daemon does per raw timestamp before the recorder: parse the
// TimestampBatch, then DecodeBatch into the run's TimeStamp layout (which
// counts the batch's records as it goes). ingest_bench's batches: 4,096 timestamps, ascending
// latencies from ~1 µs (sint64 deltas), constant bytes. Results per
// timestamp (items/s) in tests/bench/INGEST.md.
//
//   decode_batch_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>

#include "daemon/runs/remote_window_inbox.h"
#include "daemon/service/ingest_codec.h"
#include "perld/v1/ingest.pb.h"

namespace {

constexpr int kBatch = 4096;

perld::v1::TimestampBatch MakeBatch(bool per_record_columns) {
  perld::v1::TimestampBatch b;
  b.set_sequence(1);
  b.set_count(kBatch);
  b.set_constant_bytes(1024);
  std::mt19937_64 rng(7);
  std::vector<int64_t> latencies(kBatch);
  for (int64_t& v : latencies) v = 1000 + static_cast<int64_t>(rng() % 100'000);
  std::sort(latencies.begin(), latencies.end());
  int64_t prev = 0;
  for (const int64_t v : latencies) {
    b.add_latency_delta(v - prev);
    prev = v;
    if (per_record_columns) {
      b.add_records(1 + static_cast<uint32_t>(rng() % 3));
      b.add_bytes(1024);
    }
  }
  return b;
}

void BM_Parse(benchmark::State& state) {
  const std::string wire = MakeBatch(state.range(0) != 0).SerializeAsString();
  perld::v1::TimestampBatch batch;
  for (auto _ : state) {
    batch.ParseFromString(wire);
    benchmark::DoNotOptimize(batch.latency_delta_size());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_Decode(benchmark::State& state) {
  const perld::v1::TimestampBatch batch = MakeBatch(state.range(0) != 0);
  perld::runs::RemoteWindow w;
  for (auto _ : state) {
    const absl::StatusOr<int64_t> s = perld::service::DecodeBatch(batch, kBatch, &w);
    benchmark::DoNotOptimize(s.ok());
    benchmark::DoNotOptimize(w.timestamps.data());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

// Arg: 0 constant records/bytes (perlctl load, ingest_bench), 1 per-record columns.
BENCHMARK(BM_Parse)->Arg(0)->Arg(1);
BENCHMARK(BM_Decode)->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();
