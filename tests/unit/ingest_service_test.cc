// IngestService's stream reactor through a real in-process gRPC server
// (port 0) over the ingest domain (RunTable, a running RunManager): the
// read path reads ahead of the worker that handles the messages, so these
// clients write everything at once, without waiting for acknowledgements.
// Every message is applied once and in order (the run's total is exact),
// also while messages park for room (a tiny ingest.maxClientMemoryBytes);
// what follows a close is not handled; a stream that ends without a close,
// or with an oversized message behind queued ones, ends with its status
// after the queued messages were handled; many streams at once stay exact.
#include "daemon/service/ingest_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/runs/run_manager.h"
#include "perld/v1/ingest.grpc.pb.h"

namespace perld::service {
namespace {

constexpr int64_t kPairs = 50;  // latency/count pairs a window

config::DaemonConfig TestConfig(int64_t client_memory_bytes, int64_t max_message_bytes) {
  config::DaemonConfig c;
  c.limits.max_message_bytes = max_message_bytes;
  c.latency = LatencyConfig::ForUnit(TimeUnit::kNs);
  c.reporting_interval_ms = 100;  // windows merge (and free room) often
  c.ingest.checkpoints = false;   // durable when applied: no checkpointer here
  c.ingest.client_timeout_ms = 60'000;
  c.ingest.max_client_memory_bytes = client_memory_bytes;
  c.limits.max_running_runs = 64;
  return c;
}

v1::IngestRequest OpenMessage(const std::string& run, const std::string& client) {
  v1::IngestRequest m;
  v1::IngestOpen* open = m.mutable_open();
  open->set_run_name(run);
  open->set_client_id(client);
  open->set_client_name(client);
  open->set_time_unit(v1::TIME_UNIT_NS);
  open->set_mode(v1::IngestOpen::MODE_WINDOWS);
  return m;
}

// Window `sequence`: kPairs latencies from 1,000 + sequence, 2 records each.
v1::IngestRequest WindowMessage(uint64_t sequence) {
  v1::IngestRequest m;
  v1::WindowReport* w = m.mutable_window();
  w->set_sequence(sequence);
  int64_t prev = 0;
  int64_t sum = 0;
  for (int64_t i = 0; i < kPairs; ++i) {
    const int64_t latency = 1'000 + static_cast<int64_t>(sequence) + 10 * i;
    w->add_latency_delta(static_cast<uint64_t>(latency - prev));
    w->add_count(2);
    prev = latency;
    sum += 2 * latency;
  }
  w->set_records(2 * kPairs);
  w->set_valid_latency_records(2 * kPairs);
  w->set_total_latency(sum);
  w->set_min_latency(1'000 + static_cast<int64_t>(sequence));
  w->set_max_latency(prev);
  return m;
}

v1::IngestRequest CloseMessage(uint64_t last) {
  v1::IngestRequest m;
  m.mutable_close()->set_last_sequence(last);
  return m;
}

// What a client saw: the run it was in, the highest acknowledged sequence
// and the stream's status.
struct Outcome {
  uint64_t run = 0;
  uint64_t acked = 0;
  grpc::Status status;
};

class IngestServiceTest : public ::testing::Test {
 protected:
  void Start(int64_t client_memory_bytes, int64_t max_message_bytes = 4 << 20) {
    current_ =
        std::make_unique<config::CurrentConfig>(TestConfig(client_memory_bytes, max_message_bytes));
    runs::RunManager::Options options;
    options.max_running_runs = 64;
    manager_ = std::make_unique<runs::RunManager>(options);
    manager_->Start();
    table_ = std::make_unique<ingest::RunTable>(*manager_, *current_, stats_);
    service_ = std::make_unique<IngestService>(*table_, stats_, *current_, auth_, 2);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Ingest::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    if (table_ != nullptr) {
      table_->StopAccepting();
      table_->EndAll();
    }
    service_.reset();  // its workers run what is queued, then join
    table_.reset();
    if (manager_ != nullptr) manager_->Stop();
  }

  // Writes `messages` whole (no wait for any acknowledgement), optionally
  // half-closes, then reads every answer until the stream ends.
  Outcome Stream(const std::vector<v1::IngestRequest>& messages) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto stream = stub_->Stream(&context);
    for (const v1::IngestRequest& m : messages) {
      if (!stream->Write(m)) break;
    }
    stream->WritesDone();
    Outcome out;
    v1::IngestResponse r;
    while (stream->Read(&r)) {
      if (r.has_opened()) out.run = r.opened().run_id();
      if (r.has_ack()) out.acked = std::max(out.acked, r.ack().acked_sequence());
    }
    out.status = stream->Finish();
    return out;
  }

  static std::vector<v1::IngestRequest> Client(const std::string& run, const std::string& id,
                                               int windows, bool close) {
    std::vector<v1::IngestRequest> m{OpenMessage(run, id)};
    for (int s = 1; s <= windows; ++s) m.push_back(WindowMessage(static_cast<uint64_t>(s)));
    if (close) m.push_back(CloseMessage(static_cast<uint64_t>(windows)));
    return m;
  }

  runs::RunView Ended(uint64_t run) {
    EXPECT_TRUE(manager_->WaitEnded(run, absl::Seconds(30))) << "run " << run;
    absl::StatusOr<runs::RunView> v = manager_->registry().Get(run);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : runs::RunView{};
  }

  ingest::IngestStats stats_;
  CallAuth auth_;
  std::unique_ptr<config::CurrentConfig> current_;
  std::unique_ptr<runs::RunManager> manager_;
  std::unique_ptr<ingest::RunTable> table_;
  std::unique_ptr<IngestService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Ingest::Stub> stub_;
};

TEST_F(IngestServiceTest, EveryMessageAppliesOnceInOrderWhileTheyParkForRoom) {
  // Room for about one window: most messages park, and reads go on ahead.
  Start(/*client_memory_bytes=*/4'096);
  constexpr int kWindows = 200;
  const Outcome o = Stream(Client("parked", "a", kWindows, /*close=*/true));
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(o.acked, uint64_t{kWindows});
  const runs::RunView v = Ended(o.run);
  EXPECT_EQ(v.total.snapshot.records, int64_t{kWindows} * 2 * kPairs);
  EXPECT_EQ(v.total.snapshot.min_latency, 1'001);
  EXPECT_EQ(v.total.snapshot.max_latency, 1'000 + kWindows + 10 * (kPairs - 1));
  EXPECT_GT(stats_.memory_waits.load(), 0u) << "the messages were meant to park";
}

TEST_F(IngestServiceTest, WhatFollowsACloseIsNotHandled) {
  Start(int64_t{256} << 20);
  std::vector<v1::IngestRequest> m = Client("closed", "a", 20, /*close=*/true);
  m.push_back(WindowMessage(21));  // after the close: read ahead, never applied
  const Outcome o = Stream(m);
  ASSERT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(o.acked, 20u);
  EXPECT_EQ(Ended(o.run).total.snapshot.records, 2 * kPairs * 20);
}

TEST_F(IngestServiceTest, AStreamEndingWithoutACloseEndsAfterItsQueuedMessages) {
  Start(int64_t{256} << 20);
  const Outcome o = Stream(Client("unclosed", "a", 50, /*close=*/false));
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << o.status.error_message();
  // Every message read before the end was applied: the client counts as
  // gone, its run keeps them.
  const Outcome again = Stream({OpenMessage("unclosed", "a"), CloseMessage(50)});
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_EQ(again.acked, 50u) << "the reconnect was told everything was applied";
  EXPECT_EQ(Ended(o.run).total.snapshot.records, 2 * kPairs * 50);
}

TEST_F(IngestServiceTest, AnOversizedMessageBehindQueuedOnesEndsTheStream) {
  Start(int64_t{256} << 20, /*max_message_bytes=*/16 << 10);
  std::vector<v1::IngestRequest> m = Client("oversized", "a", 30, /*close=*/false);
  v1::IngestRequest big = WindowMessage(31);
  for (int i = 0; i < 40'000; ++i) big.mutable_window()->add_count(1);  // ~40 KB > 16 KiB
  m.push_back(big);
  const Outcome o = Stream(m);
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << o.status.error_message();
  EXPECT_NE(o.status.error_message().find("limits.maxMessageBytes"), std::string::npos)
      << o.status.error_message();
  EXPECT_LE(o.acked, 30u);
}

TEST_F(IngestServiceTest, ManyStreamsAtOnceStayExact) {
  Start(/*client_memory_bytes=*/16'384);
  constexpr int kClients = 8;
  constexpr int kWindows = 100;
  std::vector<Outcome> outcomes(kClients);
  std::vector<std::thread> threads;
  threads.reserve(kClients);
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      outcomes[static_cast<size_t>(c)] =
          Stream(Client("many", absl::StrCat("c", c), kWindows, /*close=*/true));
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Outcome& o : outcomes) {
    ASSERT_TRUE(o.status.ok()) << o.status.error_message();
    EXPECT_EQ(o.acked, uint64_t{kWindows});
    EXPECT_EQ(o.run, outcomes[0].run) << "one run of the name";
  }
  EXPECT_EQ(Ended(outcomes[0].run).total.snapshot.records,
            int64_t{kClients} * kWindows * 2 * kPairs);
}

}  // namespace
}  // namespace perld::service
