// The daemon's cost of one GetClients answer's bytes: N clients, each with a
// row and 26 percentiles (0, 5, 10 ... 95, 99.5, 99.9, 99.95, 99.99,
// 99.999, 100), serialized two ways -- BM_ClientsAnswerMessages builds the protobuf
// objects on an arena reused from call to call (ToProtoRow + AddPercentiles,
// as the daemon did up to 2026-12-07) and serializes them; BM_ClientsAnswer
// writes the same answer with SerializeClientsAnswer (what the daemon does). Both
// start from the same ClientViews (RunTable::Clients' output), so neither
// counts the views' copies; both check once that they produce a message
// that parses to the same answer.
//
//   build/release/tests/bench/clients_answer_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <google/protobuf/arena.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "daemon/service/clients_answer.h"
#include "daemon/service/run_proto.h"

namespace perld::service {
namespace {

std::vector<ingest::ClientView> Views(int n) {
  std::mt19937_64 random(7);
  std::vector<double> percents = {0};
  for (double p = 5; p < 100; p += 5) percents.push_back(p);
  for (double p : {99.5, 99.9, 99.95, 99.99, 99.999, 100.0}) percents.push_back(p);
  std::vector<ingest::ClientView> views;
  for (int i = 0; i < n; ++i) {
    ingest::ClientView c;
    c.id = "bench-client-" + std::to_string(i);
    c.mode = ingest::ClientMode::kWindows;
    c.state = "streaming";
    c.acked_sequence = 1000 + static_cast<uint64_t>(i);
    c.reports = 1000;
    c.counters.records = c.counters.valid = 4'096'000;
    c.counters.bytes = 409'600'000;
    c.counters.min_latency = 1000;
    c.counters.max_latency = 29'665;
    c.counters.total_latency = 62'000'000'000;
    c.exact = true;
    c.last_report_unix_ms = 1'796'682'828'600;
    auto snapshot = std::make_shared<LatencySnapshot>();
    int64_t v = 1000;
    for (double p : percents) {
      v += static_cast<int64_t>(random() % 1000);
      snapshot->percents.push_back(p);
      snapshot->values.push_back(v);
      snapshot->counts.push_back(1 + static_cast<int64_t>(random() % 3));
    }
    c.percentiles = std::move(snapshot);
    views.push_back(std::move(c));
  }
  return views;
}

std::string ViaMessages(const std::vector<ingest::ClientView>& views,
                        google::protobuf::Arena* arena) {
  auto* response = google::protobuf::Arena::CreateMessage<v1::GetClientsResponse>(arena);
  for (const ingest::ClientView& c : views) {
    v1::RemoteClient* row = response->add_clients();
    ToProtoRow(c, row);
    AddPercentiles(*c.percentiles, row->mutable_percentiles());
  }
  response->set_run_id(3);
  response->set_breakdown_bytes(1 << 20);
  response->set_breakdown_limit_bytes(64 << 20);
  return response->SerializeAsString();
}

std::string ViaAnswer(const std::vector<ingest::ClientView>& views) {
  std::string wire;
  SerializeClientsAnswer(3, views, 1 << 20, 64 << 20, &wire);
  return wire;
}

void CheckSame(const std::vector<ingest::ClientView>& views) {
  v1::GetClientsResponse a;
  v1::GetClientsResponse b;
  google::protobuf::Arena arena;
  if (!a.ParseFromString(ViaMessages(views, &arena)) || !b.ParseFromString(ViaAnswer(views)) ||
      !google::protobuf::util::MessageDifferencer::Equals(a, b)) {
    std::fprintf(stderr, "clients_answer_bench: the two answers differ\n");
    std::abort();
  }
}

void BM_ClientsAnswerMessages(benchmark::State& state) {
  const std::vector<ingest::ClientView> views = Views(static_cast<int>(state.range(0)));
  CheckSame(views);
  std::vector<char> block(256 << 10);  // the allocator's reused first block
  size_t bytes = 0;
  for (auto _ : state) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block.data();
    options.initial_block_size = block.size();
    google::protobuf::Arena arena(options);
    std::string wire = ViaMessages(views, &arena);
    bytes = wire.size();
    benchmark::DoNotOptimize(wire.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}

void BM_ClientsAnswer(benchmark::State& state) {
  const std::vector<ingest::ClientView> views = Views(static_cast<int>(state.range(0)));
  CheckSame(views);
  size_t bytes = 0;
  for (auto _ : state) {
    std::string wire = ViaAnswer(views);
    bytes = wire.size();
    benchmark::DoNotOptimize(wire.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}

BENCHMARK(BM_ClientsAnswerMessages)->Arg(200)->Arg(1000);
BENCHMARK(BM_ClientsAnswer)->Arg(200)->Arg(1000);

}  // namespace
}  // namespace perld::service

BENCHMARK_MAIN();
