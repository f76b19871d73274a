// SerializeClientsAnswer writes GetClients' answer straight to the wire; a reader
// must parse exactly the message a generated serializer would have written
// from protobuf objects (ToProtoRow + AddPercentiles), whatever the values:
// zeros (proto3 leaves them out), negative and extreme latencies, -0.0,
// clients without percentiles, sizes whose lengths need multi-byte varints.
#include "daemon/service/clients_answer.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "daemon/service/run_proto.h"

namespace perld::service {
namespace {

v1::GetClientsResponse FromObjects(uint64_t run_id, const std::vector<ingest::ClientView>& clients,
                                   int64_t bytes, int64_t limit) {
  v1::GetClientsResponse out;
  out.set_run_id(run_id);
  for (const ingest::ClientView& c : clients) {
    v1::RemoteClient* row = out.add_clients();
    ToProtoRow(c, row);
    if (c.exact && c.percentiles) AddPercentiles(*c.percentiles, row->mutable_percentiles());
  }
  out.set_breakdown_bytes(bytes);
  out.set_breakdown_limit_bytes(limit);
  return out;
}

void ExpectSameAnswer(uint64_t run_id, const std::vector<ingest::ClientView>& clients,
                      int64_t bytes, int64_t limit) {
  std::string wire = "prefix";  // Serialize appends
  SerializeClientsAnswer(run_id, clients, bytes, limit, &wire);
  ASSERT_EQ(wire.substr(0, 6), "prefix");
  v1::GetClientsResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.substr(6)));
  const v1::GetClientsResponse expected = FromObjects(run_id, clients, bytes, limit);
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(expected, parsed)) << diff;
  // The same size as the generated serializer's (only the order may differ).
  EXPECT_EQ(wire.size() - 6, expected.ByteSizeLong());
}

ingest::ClientView Client(int i, bool exact, std::vector<double> percents,
                          std::vector<int64_t> values, std::vector<int64_t> counts) {
  ingest::ClientView c;
  c.id = "client-" + std::to_string(i);
  c.name = i % 2 == 0 ? "" : "node-" + std::to_string(i);
  c.clock = "tsc 1 ns";
  c.mode = exact ? ingest::ClientMode::kWindows : ingest::ClientMode::kRaw;
  c.state = "streaming";
  c.acked_sequence = 1000 + static_cast<uint64_t>(i);
  c.reports = i;
  c.counters.records = 4096LL * i;
  c.counters.valid = 4096LL * i;
  c.counters.min_latency = 1;
  c.counters.max_latency = 1 << 20;
  c.exact = exact;
  c.last_report_unix_ms = 1796682828600;
  auto p = std::make_shared<LatencySnapshot>();
  p->percents = std::move(percents);
  p->values = std::move(values);
  p->counts = std::move(counts);
  c.percentiles = std::move(p);
  return c;
}

TEST(ClientsAnswerTest, EmptyRunIsTheGeneratedMessage) {
  ExpectSameAnswer(0, {}, 0, 0);
  ExpectSameAnswer(7, {}, 123, 64LL << 20);
}

TEST(ClientsAnswerTest, EdgeValuesParseToTheGeneratedMessage) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  const int64_t min = std::numeric_limits<int64_t>::min();
  std::vector<ingest::ClientView> clients;
  // Zeros everywhere a proto3 field is left out, and -0.0 (not left out).
  clients.push_back(Client(0, true, {0.0, -0.0, 50}, {0, 0, 0}, {0, 1, 0}));
  // Negative and extreme latencies and counts: 10-byte varints.
  clients.push_back(Client(1, true, {99.999, 100, 1e-9}, {max, min, -1}, {max, 1, -5}));
  // Not exact: its percentiles are not written even if the view holds some.
  clients.push_back(Client(2, false, {50, 99}, {10, 20}, {1, 1}));
  // Mismatched lengths: the shortest counts (as AddPercentiles).
  clients.push_back(Client(3, true, {50, 99, 99.9}, {10, 20}, {1, 1, 1}));
  // An empty client row, and an exact one without percentiles.
  clients.push_back(ingest::ClientView{});
  clients.emplace_back().exact = true;
  ExpectSameAnswer(42, clients, -1, max);
}

TEST(ClientsAnswerTest, ManyClientsWithFullPercentileSetsParseToTheGeneratedMessage) {
  std::mt19937_64 random(2026);
  std::vector<double> percents;
  for (double p = 5; p < 100; p += 5) percents.push_back(p);
  for (double p : {99.5, 99.9, 99.95, 99.99, 99.999, 100.0}) percents.push_back(p);
  std::vector<ingest::ClientView> clients;
  for (int i = 0; i < 300; ++i) {
    std::vector<int64_t> values;
    std::vector<int64_t> counts;
    int64_t v = static_cast<int64_t>(random() % 1000);
    for (size_t k = 0; k < percents.size(); ++k) {
      v += static_cast<int64_t>(random() % (1ULL << (random() % 40)));  // 1- to 6-byte varints
      values.push_back(v);
      counts.push_back(static_cast<int64_t>(random() % 100000));
    }
    // Long names make rows whose lengths need 2- and 3-byte varints.
    ingest::ClientView c = Client(i, i % 7 != 0, percents, values, counts);
    c.name.append(static_cast<size_t>(random() % 20000), 'x');
    clients.push_back(std::move(c));
  }
  ExpectSameAnswer(3, clients, 1 << 30, 2LL << 30);
}

}  // namespace
}  // namespace perld::service
