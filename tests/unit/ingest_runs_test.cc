// IngestRuns without gRPC: the rules of proto/perld/v1/ingest.proto that
// issue 24 hardened -- a reconnect naming its run (run_id) lands in that run
// or nowhere, also after the run ended and was forgotten from memory (the
// state store answers); a daemon that holds less than it told a client was
// durable says so (DATA_LOSS); a window counts once in the per-client
// breakdown even when its first attempt was cancelled and it was resent.
#include "daemon/service/ingest_runs.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/core/clock.h"
#include "daemon/runs/run_manager.h"
#include "daemon/service/ingest_codec.h"
#include "daemon/state/run_history.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/state_test_records.h"

namespace perld::service {
namespace {

using ::testing::HasSubstr;

config::DaemonConfig TestConfig() {
  config::DaemonConfig c;
  c.latency = LatencyConfig::ForUnit(TimeUnit::kNs);
  c.reporting_interval_ms = 60'000;
  c.ingest.checkpoints = false;         // durable when applied: no checkpointer here
  c.ingest.client_timeout_ms = 60'000;  // a client that leaves may come back
  return c;
}

v1::IngestOpen Open(const std::string& run, const std::string& client,
                    v1::IngestOpen::Mode mode = v1::IngestOpen::MODE_WINDOWS) {
  v1::IngestOpen open;
  open.set_run_name(run);
  open.set_client_id(client);
  open.set_client_name(client);
  open.set_mode(mode);
  open.set_time_unit(v1::TIME_UNIT_NS);
  return open;
}

// One window of `n` records of latency 100 + sequence.
v1::WindowReport Window(uint64_t sequence, int64_t n = 10) {
  v1::WindowReport w;
  w.set_sequence(sequence);
  w.set_records(n);
  w.set_valid_latency_records(n);
  w.set_min_latency(100 + static_cast<int64_t>(sequence));
  w.set_max_latency(100 + static_cast<int64_t>(sequence));
  w.set_total_latency(n * (100 + static_cast<int64_t>(sequence)));
  w.add_latency_delta(100 + sequence);
  w.add_count(static_cast<uint64_t>(n));
  return w;
}

// A daemon's ingest half: the run manager (recorder running), the state
// store through RunHistory (run rows and clients are stored), IngestRuns.
class IngestRunsTest : public ::testing::Test {
 protected:
  IngestRunsTest() : current_(TestConfig()) {
    absl::StatusOr<std::unique_ptr<state::StateStore>> store =
        state::StateStore::Open(dir_.path(), {});
    EXPECT_TRUE(store.ok()) << store.status();
    history_ = std::make_unique<state::RunHistory>(*std::move(store));
    runs::RunManager::Options options;
    options.first_id = history_->NextRunId();
    options.max_running_runs = 64;
    manager_ = std::make_unique<runs::RunManager>(options);
    manager_->AddObserver(history_.get());
    manager_->Start();
    runs_ = NewRuns();
  }
  ~IngestRunsTest() override {
    runs_->StopAccepting();
    runs_->EndAll();
    runs_.reset();
    manager_->Stop();
    EXPECT_TRUE(history_->store().Flush().ok());
  }

  std::unique_ptr<IngestRuns> NewRuns() {
    return std::make_unique<IngestRuns>(*manager_, current_, stats_, &history_->store());
  }

  // Opens, sends `messages` windows, closes (or not), leaves.
  IngestRuns::Session Feed(const v1::IngestOpen& open, int messages, bool close) {
    absl::StatusOr<IngestRuns::Session> s = runs_->Join(open, &stream_);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return {};
    for (int i = 1; i <= messages; ++i) {
      const uint64_t seq = s->acked_sequence + static_cast<uint64_t>(i);
      absl::StatusOr<IngestRuns::Applied> a = runs_->ApplyWindow(*s, Window(seq), stream_);
      EXPECT_TRUE(a.ok()) << a.status();
    }
    if (close) {
      absl::StatusOr<IngestRuns::Applied> c =
          runs_->Close(*s, s->acked_sequence + static_cast<uint64_t>(messages));
      EXPECT_TRUE(c.ok()) << c.status();
    }
    IngestRuns::Session copy = *s;
    runs_->Leave(*s);
    return copy;
  }

  void WaitEnded(runs::RunId id) {
    ASSERT_TRUE(manager_->WaitEnded(id, absl::Seconds(30))) << "run " << id;
  }

  int RunsNamed(const std::string& name) const {
    int n = 0;
    for (const runs::RunInfo& info : manager_->registry().List({})) n += info.spec.name == name;
    return n;
  }

  state::testing::ScratchDir dir_;
  CurrentConfig current_;
  IngestStats stats_;
  FlagIngestStream stream_;
  std::unique_ptr<state::RunHistory> history_;
  std::unique_ptr<runs::RunManager> manager_;
  std::unique_ptr<IngestRuns> runs_;
};

TEST_F(IngestRunsTest, ReconnectWithRunIdRejoinsThatRun) {
  const IngestRuns::Session first = Feed(Open("x", "a"), 3, /*close=*/false);
  v1::IngestOpen again = Open("x", "a");
  again.set_run_id(first.run_id);
  absl::StatusOr<IngestRuns::Session> s = runs_->Join(again, &stream_);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->run_id, first.run_id);
  EXPECT_EQ(s->acked_sequence, 3u);
  EXPECT_FALSE(s->created);
  runs_->Leave(*s);
}

TEST_F(IngestRunsTest, RunIdOfAnotherNameIsRefused) {
  const IngestRuns::Session first = Feed(Open("x", "a"), 1, /*close=*/false);
  v1::IngestOpen wrong = Open("y", "a");
  wrong.set_run_id(first.run_id);
  absl::StatusOr<IngestRuns::Session> s = runs_->Join(wrong, &stream_);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunsNamed("y"), 0);
}

// A client whose run was stopped (and a new run of the same name started by
// another client) must never land in the new run.
TEST_F(IngestRunsTest, ReconnectToAnEndedRunNeverJoinsANewRunOfItsName) {
  const IngestRuns::Session first = Feed(Open("x", "a"), 2, /*close=*/false);
  ASSERT_TRUE(runs_->Stop(first.run_id).ok());
  WaitEnded(first.run_id);
  const IngestRuns::Session other = Feed(Open("x", "b"), 1, /*close=*/false);
  ASSERT_NE(other.run_id, first.run_id);

  v1::IngestOpen again = Open("x", "a");
  again.set_run_id(first.run_id);
  again.set_durable_sequence(2);
  absl::StatusOr<IngestRuns::Session> s = runs_->Join(again, &stream_);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("ended before client 'a' closed"));
  EXPECT_EQ(RunsNamed("x"), 2);
  EXPECT_EQ(stats_.refused(IngestStats::Refusal::kRunEnded), 1u);
}

// The acknowledgement of a close was lost; the run ended and more than
// kEndedBreakdowns runs ended after it, then perld "restarted" (a new
// IngestRuns knows nothing in memory): the state store answers.
TEST_F(IngestRunsTest, ClosedClientOfAForgottenRunIsAnsweredFromTheStore) {
  const IngestRuns::Session done = Feed(Open("x", "a"), 4, /*close=*/true);
  WaitEnded(done.run_id);
  for (size_t i = 0; i < IngestRuns::kEndedBreakdowns + 1; ++i) {
    const IngestRuns::Session s = Feed(Open("other-" + std::to_string(i), "c"), 1, true);
    WaitEnded(s.run_id);
  }
  ASSERT_TRUE(history_->store().Flush().ok());
  for (int life = 0; life < 2; ++life) {
    v1::IngestOpen again = Open("x", "a");
    again.set_run_id(done.run_id);
    again.set_durable_sequence(3);
    absl::StatusOr<IngestRuns::Session> s = runs_->Join(again, &stream_);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(s->closed);
    EXPECT_EQ(s->run_id, done.run_id);
    EXPECT_EQ(s->acked_sequence, 4u);
    EXPECT_TRUE(runs_->CloseDurable(*s));
    runs_->Leave(*s);
    runs_->EndAll();
    runs_ = NewRuns();  // a restart: nothing in memory
  }
  EXPECT_EQ(RunsNamed("x"), 1);
}

TEST_F(IngestRunsTest, UnknownRunIdIsNotFoundAndCreatesNothing) {
  v1::IngestOpen open = Open("x", "a");
  open.set_run_id(999);
  absl::StatusOr<IngestRuns::Session> s = runs_->Join(open, &stream_);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound) << s.status();
  EXPECT_EQ(RunsNamed("x"), 0);
  EXPECT_EQ(stats_.refused(IngestStats::Refusal::kUnknownRun), 1u);
}

TEST_F(IngestRunsTest, DurableAboveWhatTheDaemonHoldsIsDataLoss) {
  const IngestRuns::Session first = Feed(Open("x", "a"), 3, /*close=*/false);
  v1::IngestOpen again = Open("x", "a");
  again.set_run_id(first.run_id);
  again.set_durable_sequence(5);
  absl::StatusOr<IngestRuns::Session> s = runs_->Join(again, &stream_);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("messages 4..5 were lost"));
  // A client the run does not know at all, told something was durable.
  v1::IngestOpen stranger = Open("x", "z");
  stranger.set_run_id(first.run_id);
  stranger.set_durable_sequence(1);
  EXPECT_EQ(runs_->Join(stranger, &stream_).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(stats_.refused(IngestStats::Refusal::kDataLoss), 2u);
  // The client may still come back with what the daemon holds.
  again.set_durable_sequence(3);
  absl::StatusOr<IngestRuns::Session> ok = runs_->Join(again, &stream_);
  ASSERT_TRUE(ok.ok()) << ok.status();
  runs_->Leave(*ok);
}

TEST_F(IngestRunsTest, SizeLimitsAreFinalNotTransient) {
  config::DaemonConfig c = TestConfig();
  c.ingest.max_pairs_per_report = 1;
  current_.Set(c);
  absl::StatusOr<IngestRuns::Session> s = runs_->Join(Open("x", "a"), &stream_);
  ASSERT_TRUE(s.ok()) << s.status();
  v1::WindowReport w = Window(1, 2);
  w.add_latency_delta(1);
  w.add_count(1);
  w.set_records(3);
  w.set_valid_latency_records(3);
  w.set_max_latency(102);
  w.set_total_latency(2 * 101 + 102);
  absl::StatusOr<IngestRuns::Applied> a = runs_->ApplyWindow(*s, w, stream_);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << a.status();
  runs_->Leave(*s);
}

// Backpressure with the recorder not running: nothing is merged, so a
// second window waits for room; its stream is cancelled, and the client's
// breakdown must not count it (it is resent later).
TEST(IngestRunsBreakdownTest, CancelledWindowIsNotCounted) {
  CurrentConfig current(TestConfig());
  IngestStats stats;
  runs::RunManager manager({});  // never started: the inbox is not drained
  IngestRuns ingest(manager, current, stats);
  absl::StatusOr<IngestRuns::Session> s = ingest.Join(Open("x", "a"), nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  FlagIngestStream stream;
  ASSERT_TRUE(ingest.ApplyWindow(*s, Window(1), stream).ok());
  // The limit is one window: the second waits for the first one's merge.
  absl::StatusOr<runs::RemoteWindow> one = DecodeWindow(Window(2), 1 << 20, 0, 1 << 30);
  ASSERT_TRUE(one.ok()) << one.status();
  config::DaemonConfig tight = TestConfig();
  tight.ingest.max_client_memory_bytes = one->bytes();
  current.Set(tight);
  absl::StatusOr<IngestRuns::Session> again = ingest.Join(Open("x", "a"), &stream);
  ASSERT_TRUE(again.ok()) << again.status();
  std::thread cancel([&stream] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stream.Cancel();
  });
  absl::StatusOr<IngestRuns::Applied> waited = ingest.ApplyWindow(*again, Window(2), stream);
  cancel.join();
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kCancelled) << waited.status();
  google::protobuf::RepeatedPtrField<v1::RemoteClient> clients;
  ASSERT_TRUE(ingest.Clients(s->run_id, *PercentileSet::Create({50}), &clients).ok());
  ASSERT_EQ(clients.size(), 1);
  EXPECT_EQ(clients[0].reports(), 1);
  EXPECT_EQ(clients[0].records(), 10);
  EXPECT_EQ(clients[0].acked_sequence(), 1u);
  ingest.Leave(*again);
}

}  // namespace
}  // namespace perld::service
