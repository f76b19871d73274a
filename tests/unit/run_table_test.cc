// The ingest domain without any transport (RunTable, ClientSession): every
// rule of proto/perld/v1/ingest.proto's header -- sequences, duplicates,
// gaps, takeover, close, reconnect, timeouts, limits -- the reconnect rules
// of issue 24 (a reconnect naming its run lands in that run or nowhere, also
// after the run ended and was forgotten from memory; DATA_LOSS when the
// daemon holds less than it declared durable), and backpressure without a
// thread (a message that does not fit is parked and resumed in order). It
// builds without gRPC or protobuf, so it also runs under ThreadSanitizer.
#include "daemon/ingest/run_table.h"

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/clock.h"
#include "daemon/core/percentile_index.h"
#include "daemon/runs/run_manager.h"
#include "daemon/state/run_history.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/remote_window_records.h"
#include "tests/unit/state_test_records.h"

namespace perld::ingest {
namespace {

using ::testing::HasSubstr;
using Session = RunTable::Session;
using Refusal = IngestStats::Refusal;

#ifdef PERLD_TSAN
constexpr int kStressMessages = 300;
#else
constexpr int kStressMessages = 2000;
#endif

config::DaemonConfig TestConfig() {
  config::DaemonConfig c;
  c.latency = LatencyConfig::ForUnit(TimeUnit::kNs);
  c.reporting_interval_ms = 60'000;
  c.ingest.checkpoints = false;         // durable when applied: no checkpointer here
  c.ingest.client_timeout_ms = 60'000;  // a client that leaves may come back
  c.limits.max_running_runs = 64;
  return c;
}

OpenRequest Open(const std::string& run, const std::string& client,
                 ClientMode mode = ClientMode::kWindows) {
  OpenRequest open;
  open.run_name = run;
  open.client_id = client;
  open.client_name = client;
  open.mode = mode;
  open.time_unit = TimeUnit::kNs;
  return open;
}

// A window of `n` records of latency 100 + sequence, as a decoder builds it.
runs::RemoteWindow Window(uint64_t sequence, int64_t n = 10) {
  return testing::RemoteWindowAt(static_cast<int64_t>(100 + sequence), n);
}

// Offers window `sequence`; waits for a parked one's outcome.
absl::StatusOr<Applied> Apply(RunTable& table, const Session& s, uint64_t sequence,
                              int64_t n = 10) {
  auto parked = std::make_shared<std::promise<absl::StatusOr<Applied>>>();
  absl::StatusOr<Offered> offered = table.OfferWindow(
      s, sequence, [&](const LatencyConfig&, int64_t) { return Window(sequence, n); },
      [parked](absl::StatusOr<Applied> a) { parked->set_value(std::move(a)); });
  if (!offered.ok()) return offered.status();
  if (!offered->parked) return offered->applied;
  return parked->get_future().get();
}

// A daemon's ingest half: the run manager (recorder running), the state
// store through RunHistory (run rows and clients are stored), the table.
class RunTableTest : public ::testing::Test {
 protected:
  RunTableTest() : current_(TestConfig()) {
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
    table_ = NewTable();
  }
  ~RunTableTest() override {
    table_->StopAccepting();
    table_->EndAll();
    table_.reset();
    manager_->Stop();
    EXPECT_TRUE(history_->store().Flush().ok());
  }

  std::unique_ptr<RunTable> NewTable() {
    return std::make_unique<RunTable>(*manager_, current_, stats_, &history_->store());
  }

  // Opens, applies `messages` windows, closes (or not), leaves.
  Session Feed(const OpenRequest& open, int messages, bool close) {
    absl::StatusOr<Session> s = table_->Join(open, &stream_);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return {};
    for (int i = 1; i <= messages; ++i) {
      absl::StatusOr<Applied> a = Apply(*table_, *s, s->acked_sequence + static_cast<uint64_t>(i));
      EXPECT_TRUE(a.ok()) << a.status();
    }
    if (close) {
      absl::StatusOr<Applied> c =
          table_->Close(*s, s->acked_sequence + static_cast<uint64_t>(messages));
      EXPECT_TRUE(c.ok()) << c.status();
    }
    Session copy = *s;
    table_->Leave(*s);
    return copy;
  }

  void WaitEnded(runs::RunId id) {
    ASSERT_TRUE(manager_->WaitEnded(id, absl::Seconds(30))) << "run " << id;
  }

  int RunsNamed(const std::string& name) const {
    int n = 0;
    for (const runs::RunInfo& info : manager_->registry().List(runs::RunFilter{})) {
      n += info.spec.name == name;
    }
    return n;
  }

  runs::RunView View(runs::RunId id) const {
    absl::StatusOr<runs::RunView> v = manager_->registry().Get(id);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : runs::RunView{};
  }

  state::testing::ScratchDir dir_;
  config::CurrentConfig current_;
  IngestStats stats_;
  FlagIngestStream stream_;
  std::unique_ptr<state::RunHistory> history_;
  std::unique_ptr<runs::RunManager> manager_;
  std::unique_ptr<RunTable> table_;
};

// --- sequences, duplicates, gaps ----------------------------------------------

TEST_F(RunTableTest, SequencesApplyOnceDuplicatesAreCountedGapsRefused) {
  absl::StatusOr<Session> s = table_->Join(Open("x", "a"), &stream_);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->created);
  EXPECT_EQ(s->acked_sequence, 0u);
  EXPECT_EQ(Apply(*table_, *s, 0).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(Apply(*table_, *s, 1).ok());
  ASSERT_TRUE(Apply(*table_, *s, 2).ok());
  absl::StatusOr<Applied> again = Apply(*table_, *s, 1);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->acked_sequence, 2u);
  EXPECT_EQ(again->duplicates, 1u);
  absl::StatusOr<Applied> gap = Apply(*table_, *s, 4);
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(gap.status().message()), HasSubstr("expected 3, got 4"));
  EXPECT_EQ(stats_.refused(Refusal::kSequenceGap), 1u);
  EXPECT_EQ(stats_.duplicates.load(), 1u);
  // A window from a raw client is malformed.
  absl::StatusOr<Session> raw = table_->Join(Open("x", "r", ClientMode::kRaw), &stream_);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(Apply(*table_, *raw, 1).status().code(), absl::StatusCode::kInvalidArgument);
  table_->Leave(*raw);
  // Close checks the last sequence; applied messages are in the run.
  EXPECT_EQ(table_->Close(*s, 3).status().code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(table_->Close(*s, 2).ok());
  EXPECT_TRUE(table_->CurrentProgress(*s).close_durable);  // no checkpoints: at once
  table_->Leave(*s);
}

// --- takeover, reconnect ----------------------------------------------------------

TEST_F(RunTableTest, ANewStreamTakesOverAndTheOldOneIsCancelledAndAborted) {
  FlagIngestStream first_stream;
  absl::StatusOr<Session> first = table_->Join(Open("x", "a"), &first_stream);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(Apply(*table_, *first, 1).ok());
  FlagIngestStream second_stream;
  absl::StatusOr<Session> second = table_->Join(Open("x", "a"), &second_stream);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(first_stream.IsCancelled());
  EXPECT_FALSE(second_stream.IsCancelled());
  EXPECT_EQ(second->acked_sequence, 1u);
  EXPECT_TRUE(table_->Superseded(*first));
  EXPECT_EQ(Apply(*table_, *first, 2).status().code(), absl::StatusCode::kAborted);
  ASSERT_TRUE(Apply(*table_, *second, 2).ok());
  table_->Leave(*first);
  table_->Leave(*second);
  EXPECT_EQ(stats_.resumed.load(), 1u);
}

TEST_F(RunTableTest, ReconnectWithRunIdRejoinsThatRun) {
  const Session first = Feed(Open("x", "a"), 3, /*close=*/false);
  OpenRequest again = Open("x", "a");
  again.run_id = first.run_id;
  absl::StatusOr<Session> s = table_->Join(again, &stream_);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->run_id, first.run_id);
  EXPECT_EQ(s->acked_sequence, 3u);
  EXPECT_FALSE(s->created);
  table_->Leave(*s);
}

TEST_F(RunTableTest, RunIdOfAnotherNameIsRefused) {
  const Session first = Feed(Open("x", "a"), 1, /*close=*/false);
  OpenRequest wrong = Open("y", "a");
  wrong.run_id = first.run_id;
  EXPECT_EQ(table_->Join(wrong, &stream_).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunsNamed("y"), 0);
}

// A client whose run was stopped (and a new run of the same name started by
// another client) must never land in the new run.
TEST_F(RunTableTest, ReconnectToAnEndedRunNeverJoinsANewRunOfItsName) {
  const Session first = Feed(Open("x", "a"), 2, /*close=*/false);
  ASSERT_TRUE(table_->Stop(first.run_id).ok());
  WaitEnded(first.run_id);
  const Session other = Feed(Open("x", "b"), 1, /*close=*/false);
  ASSERT_NE(other.run_id, first.run_id);
  OpenRequest again = Open("x", "a");
  again.run_id = first.run_id;
  again.durable_sequence = 2;
  absl::StatusOr<Session> s = table_->Join(again, &stream_);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
  // ... and is told how it ended.
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("ended (stopped by Control.StopRun) before client 'a' closed"));
  EXPECT_EQ(RunsNamed("x"), 2);
  EXPECT_EQ(stats_.refused(Refusal::kRunEnded), 1u);
}

// The acknowledgement of a close was lost; the run ended and more than
// kEndedBreakdowns runs ended after it, then perld "restarted" (a new table
// knows nothing in memory): the state store answers.
TEST_F(RunTableTest, ClosedClientOfAForgottenRunIsAnsweredFromTheStore) {
  const Session done = Feed(Open("x", "a"), 4, /*close=*/true);
  WaitEnded(done.run_id);
  for (size_t i = 0; i < RunTable::kEndedBreakdowns + 1; ++i) {
    const Session s = Feed(Open(absl::StrCat("other-", i), "c"), 1, true);
    WaitEnded(s.run_id);
  }
  ASSERT_TRUE(history_->store().Flush().ok());
  for (int life = 0; life < 2; ++life) {
    OpenRequest again = Open("x", "a");
    again.run_id = done.run_id;
    again.durable_sequence = 3;
    absl::StatusOr<Session> s = table_->Join(again, &stream_);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(s->closed);
    EXPECT_EQ(s->run_id, done.run_id);
    EXPECT_EQ(s->acked_sequence, 4u);
    EXPECT_TRUE(table_->CloseDurable(*s));
    table_->Leave(*s);
    table_->EndAll();
    table_ = NewTable();  // a restart: nothing in memory
  }
  EXPECT_EQ(RunsNamed("x"), 1);
}

TEST_F(RunTableTest, UnknownRunIdIsNotFoundAndCreatesNothing) {
  OpenRequest open = Open("x", "a");
  open.run_id = 999;
  EXPECT_EQ(table_->Join(open, &stream_).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(RunsNamed("x"), 0);
  EXPECT_EQ(stats_.refused(Refusal::kUnknownRun), 1u);
}

TEST_F(RunTableTest, DurableAboveWhatTheDaemonHoldsIsDataLoss) {
  const Session first = Feed(Open("x", "a"), 3, /*close=*/false);
  OpenRequest again = Open("x", "a");
  again.run_id = first.run_id;
  again.durable_sequence = 5;
  absl::StatusOr<Session> s = table_->Join(again, &stream_);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("messages 4..5 were lost"));
  OpenRequest stranger = Open("x", "z");
  stranger.run_id = first.run_id;
  stranger.durable_sequence = 1;
  EXPECT_EQ(table_->Join(stranger, &stream_).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(stats_.refused(Refusal::kDataLoss), 2u);
  again.durable_sequence = 3;  // what the daemon holds: the client may come back
  absl::StatusOr<Session> ok = table_->Join(again, &stream_);
  ASSERT_TRUE(ok.ok()) << ok.status();
  table_->Leave(*ok);
}

// --- the open's checks and limits ------------------------------------------------

TEST_F(RunTableTest, OpensAreCheckedAgainstTheRunAndTheLimits) {
  const Session first = Feed(Open("x", "a"), 0, /*close=*/false);
  OpenRequest other_unit = Open("x", "b");
  other_unit.time_unit = TimeUnit::kMs;
  EXPECT_EQ(table_->Join(other_unit, &stream_).status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<Session> raw_a = table_->Join(Open("x", "a", ClientMode::kRaw), &stream_);
  EXPECT_EQ(raw_a.status().code(), absl::StatusCode::kFailedPrecondition);
  OpenRequest must = Open("nope", "c");
  must.must_exist = true;
  EXPECT_EQ(table_->Join(must, &stream_).status().code(), absl::StatusCode::kNotFound);
  OpenRequest interval = Open("y", "c");
  interval.reporting_interval_ms = 5;
  EXPECT_EQ(table_->Join(interval, &stream_).status().code(), absl::StatusCode::kInvalidArgument);
  OpenRequest long_name = Open(std::string(300, 'n'), "c");
  EXPECT_EQ(table_->Join(long_name, &stream_).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stats_.refused(Refusal::kInputLimit), 1u);
  (void)first;
  config::DaemonConfig c = TestConfig();
  c.ingest.max_clients_per_run = 1;  // for runs created from now on
  current_.Set(c);
  const Session one = Feed(Open("small", "a"), 0, /*close=*/false);
  EXPECT_EQ(table_->Join(Open("small", "second"), &stream_).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(stats_.refused(Refusal::kClientsPerRun), 1u);
  (void)one;
}

TEST_F(RunTableTest, SizeLimitsAreFinalNotTransient) {
  config::DaemonConfig c = TestConfig();
  c.ingest.max_client_memory_bytes = 100;  // below any window
  current_.Set(c);
  absl::StatusOr<Session> s = table_->Join(Open("x", "a"), &stream_);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<Applied> a = Apply(*table_, *s, 1);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << a.status();
  EXPECT_EQ(stats_.refused(Refusal::kClientMemory), 1u);
  table_->Leave(*s);
}

// --- a client that does not come back; the run's end ------------------------------

TEST_F(RunTableTest, AClientGoneAfterItsTimeoutEndsTheRunFailedNamingIt) {
  config::DaemonConfig c = TestConfig();
  c.ingest.client_timeout_ms = 50;
  current_.Set(c);
  std::vector<RunTable::Departure> departed;
  std::mutex mu;
  table_->SetDepartureHook([&](const RunTable::Departure& d) {
    std::lock_guard<std::mutex> lock(mu);
    departed.push_back(d);
  });
  // Both join before either ends its part (else the run would end with a).
  absl::StatusOr<Session> a = table_->Join(Open("x", "a"), &stream_);
  absl::StatusOr<Session> b = table_->Join(Open("x", "b"), &stream_);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(Apply(*table_, *a, 1).ok());
  ASSERT_TRUE(Apply(*table_, *a, 2).ok());
  ASSERT_TRUE(Apply(*table_, *b, 1).ok());
  ASSERT_TRUE(table_->Close(*a, 2).ok());
  const Session closed = *a;
  table_->Leave(*a);
  table_->Leave(*b);  // b's stream broke: it may come back within 50 ms
  WaitEnded(closed.run_id);
  const runs::RunView v = View(closed.run_id);
  EXPECT_EQ(v.info.state, runs::RunState::kFailed);
  EXPECT_THAT(v.info.failure_reason, HasSubstr("1 client(s) had not closed: 'b' (b)"));
  EXPECT_EQ(v.total.snapshot.records, 30);  // every applied record counts
  EXPECT_EQ(stats_.clients_gone.load(), 1u);
  for (int i = 0; i < 1000; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (departed.size() == 2) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(departed.size(), 2u);
  EXPECT_EQ(departed[0].client_id, "b");
  EXPECT_EQ(departed[1].client_id, "");  // the run ended
}

TEST_F(RunTableTest, EveryClientClosedEndsTheRunFinishedWithEveryRecord) {
  absl::StatusOr<Session> first = table_->Join(Open("x", "a"), &stream_);
  absl::StatusOr<Session> second = table_->Join(Open("x", "b"), &stream_);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_EQ(first->run_id, second->run_id);
  for (uint64_t seq = 1; seq <= 3; ++seq) ASSERT_TRUE(Apply(*table_, *first, seq).ok());
  for (uint64_t seq = 1; seq <= 2; ++seq) ASSERT_TRUE(Apply(*table_, *second, seq).ok());
  ASSERT_TRUE(table_->Close(*first, 3).ok());
  ASSERT_TRUE(table_->Close(*second, 2).ok());
  const Session a = *first;
  table_->Leave(*first);
  table_->Leave(*second);
  WaitEnded(a.run_id);
  const runs::RunView v = View(a.run_id);
  EXPECT_EQ(v.info.state, runs::RunState::kFinished);
  EXPECT_EQ(v.total.snapshot.records, 50);
  absl::StatusOr<std::vector<ClientView>> clients =
      table_->Clients(a.run_id, *PercentileSet::Create({50}));
  ASSERT_TRUE(clients.ok()) << clients.status();
  ASSERT_EQ(clients->size(), 2u);
  EXPECT_STREQ((*clients)[0].state, "closed");
  EXPECT_EQ((*clients)[0].counters.records, 30);
  EXPECT_EQ((*clients)[1].acked_sequence, 2u);
}

// --- progress listeners ------------------------------------------------------------

TEST_F(RunTableTest, ListenersHearEveryProgressAndNothingAfterTheyAreRemoved) {
  absl::StatusOr<Session> s = table_->Join(Open("x", "a"), &stream_);
  ASSERT_TRUE(s.ok());
  std::atomic<int> calls{0};
  const uint64_t token = table_->AddProgressListener(*s, [&] { ++calls; });
  ASSERT_TRUE(Apply(*table_, *s, 1).ok());
  ASSERT_TRUE(Apply(*table_, *s, 2).ok());
  EXPECT_GE(calls.load(), 2);
  EXPECT_EQ(table_->CurrentProgress(*s).applied, 2u);
  EXPECT_EQ(table_->CurrentProgress(*s).durable, 2u);  // no checkpoints
  table_->RemoveProgressListener(*s, token);
  const int before = calls.load();
  ASSERT_TRUE(Apply(*table_, *s, 3).ok());
  EXPECT_EQ(calls.load(), before);
  table_->Leave(*s);
}

// --- backpressure without a thread --------------------------------------------------

// The recorder not running: nothing is merged, so a second window does not
// fit and is parked; the breakdown does not count it, and leaving drops it
// without calling its outcome (the client resends it).
TEST(RunTableBackpressureTest, AParkedWindowIsNotCountedAndIsDroppedWhenItsStreamLeaves) {
  config::CurrentConfig current(TestConfig());
  IngestStats stats;
  runs::RunManager manager({});  // never started: the inbox is not drained
  RunTable table(manager, current, stats);
  FlagIngestStream stream;
  absl::StatusOr<Session> s = table.Join(Open("x", "a"), &stream);
  ASSERT_TRUE(s.ok()) << s.status();
  s->max_memory_bytes = Window(1).bytes();  // room for one window
  ASSERT_TRUE(Apply(table, *s, 1).ok());
  bool called = false;
  absl::StatusOr<Offered> offered = table.OfferWindow(
      *s, 2, [](const LatencyConfig&, int64_t) { return Window(2); },
      [&called](absl::StatusOr<Applied>) { called = true; });
  ASSERT_TRUE(offered.ok()) << offered.status();
  EXPECT_TRUE(offered->parked);
  EXPECT_EQ(table.parked_clients(), 1);
  EXPECT_EQ(stats.memory_waits.load(), 1u);
  absl::StatusOr<std::vector<ClientView>> clients =
      table.Clients(s->run_id, *PercentileSet::Create({50}));
  ASSERT_TRUE(clients.ok());
  EXPECT_EQ((*clients)[0].reports, 1);
  EXPECT_EQ((*clients)[0].acked_sequence, 1u);
  table.Leave(*s);
  EXPECT_FALSE(called);
  EXPECT_EQ(table.parked_clients(), 0);
}

// A stream holds its reactor while a message is parked (it has no read
// pending for gRPC to end): a cancel must resume that message at once with
// CANCELLED, a takeover soon with ABORTED (the notifier's retry), so the
// stream can finish -- the reactor use-after-free and the shutdown hang
// this prevents. Neither message is applied.
TEST(RunTableBackpressureTest, ACancelOrATakeoverResumesAParkedMessage) {
  config::CurrentConfig current(TestConfig());
  IngestStats stats;
  runs::RunManager manager({});  // never started: nothing ever makes room
  RunTable table(manager, current, stats);
  FlagIngestStream stream;
  absl::StatusOr<Session> s = table.Join(Open("x", "a"), &stream);
  ASSERT_TRUE(s.ok()) << s.status();
  s->max_memory_bytes = Window(1).bytes();
  ASSERT_TRUE(Apply(table, *s, 1).ok());
  auto outcome = std::make_shared<std::promise<absl::Status>>();
  const auto park = [&](Session& session, uint64_t seq) {
    absl::StatusOr<Offered> offered = table.OfferWindow(
        session, seq, [seq](const LatencyConfig&, int64_t) { return Window(seq); },
        [outcome](absl::StatusOr<Applied> a) { outcome->set_value(a.status()); });
    ASSERT_TRUE(offered.ok()) << offered.status();
    ASSERT_TRUE(offered->parked);
  };
  park(*s, 2);
  table.CancelParked(*s);  // on this thread, before it returns
  std::future<absl::Status> cancelled = outcome->get_future();
  ASSERT_EQ(cancelled.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(cancelled.get().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(table.parked_clients(), 0);
  table.CancelParked(*s);  // nothing parked: a no-op

  outcome = std::make_shared<std::promise<absl::Status>>();
  park(*s, 2);  // the client resends it
  FlagIngestStream newer;
  absl::StatusOr<Session> taken = table.Join(Open("x", "a"), &newer);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->acked_sequence, 1u);
  std::future<absl::Status> aborted = outcome->get_future();
  ASSERT_EQ(aborted.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(aborted.get().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(table.CurrentProgress(*taken).applied, 1u);  // never applied
  // The notifier lets go of the retry just after its outcome was given.
  for (int i = 0; i < 5'000 && table.parked_clients() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(table.parked_clients(), 0);
  table.Leave(*s);
  table.Leave(*taken);
}

// Clients far over their share stream through a running recorder: each
// message is parked and resumed in order, the totals are exact, and
// GetClients never waits behind a parked client.
TEST_F(RunTableTest, ParkedMessagesResumeInOrderAndTheTotalsAreExact) {
  constexpr int kClients = 4;
  std::vector<std::thread> threads;
  std::atomic<int64_t> parked{0};
  std::atomic<runs::RunId> id{0};  // the one run all clients join
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      FlagIngestStream stream;
      absl::StatusOr<Session> s = table_->Join(Open("x", absl::StrCat("c", c)), &stream);
      ASSERT_TRUE(s.ok()) << s.status();
      s->max_memory_bytes = Window(1).bytes();  // one window queued at a time
      id.store(s->run_id);
      for (uint64_t seq = 1; seq <= kStressMessages; ++seq) {
        auto done = std::make_shared<std::promise<absl::StatusOr<Applied>>>();
        absl::StatusOr<Offered> offered = table_->OfferWindow(
            *s, seq, [seq](const LatencyConfig&, int64_t) { return Window(seq, 1); },
            [done](absl::StatusOr<Applied> a) { done->set_value(std::move(a)); });
        ASSERT_TRUE(offered.ok()) << offered.status();
        if (offered->parked) {
          ++parked;
          absl::StatusOr<Applied> a = done->get_future().get();
          ASSERT_TRUE(a.ok()) << a.status();
          ASSERT_EQ(a->acked_sequence, seq);
        } else {
          ASSERT_EQ(offered->applied.acked_sequence, seq);
        }
      }
      ASSERT_TRUE(table_->Close(*s, kStressMessages).ok());
      table_->Leave(*s);
    });
  }
  // Meanwhile the breakdown answers (never behind a parked client), each row
  // one consistent moment of its client: its records are those of the
  // messages acknowledged then (Window(seq, 1): one record each), its
  // distribution holds every one of them, and nothing goes backwards.
  std::map<std::string, uint64_t> acked_seen;
  for (int i = 0; i < 50; ++i) {
    if (id.load() != 0) {
      absl::StatusOr<std::vector<ClientView>> rows =
          table_->Clients(id.load(), *PercentileSet::Create({50, 100}));
      ASSERT_TRUE(rows.ok()) << rows.status();
      for (const ClientView& row : *rows) {
        EXPECT_EQ(row.counters.records, static_cast<int64_t>(row.acked_sequence)) << row.id;
        EXPECT_TRUE(row.exact) << row.id;
        if (row.acked_sequence > 0) {  // window seq's one record is 100 + seq
          EXPECT_EQ(row.percentiles->values.back(), 100 + static_cast<int64_t>(row.acked_sequence));
        }
        EXPECT_GE(row.acked_sequence, acked_seen[row.id]) << row.id;
        acked_seen[row.id] = row.acked_sequence;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (std::thread& t : threads) t.join();
  absl::StatusOr<std::vector<ClientView>> rows =
      table_->Clients(id.load(), *PercentileSet::Create({50}));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), size_t{kClients});
  for (const ClientView& row : *rows) {
    EXPECT_EQ(row.acked_sequence, uint64_t{kStressMessages}) << row.id;
    EXPECT_EQ(row.counters.records, kStressMessages) << row.id;
  }
  WaitEnded(id.load());
  const runs::RunView v = View(id.load());
  EXPECT_EQ(v.info.state, runs::RunState::kFinished) << v.info.failure_reason;
  EXPECT_EQ(v.total.snapshot.records, int64_t{kClients} * kStressMessages);
  EXPECT_GT(parked.load(), 0);
  EXPECT_EQ(stats_.queued_window_bytes->load(), 0);
}

// Takeovers while messages are parked: a replaced stream's parked message
// is dropped (never applied twice), the new stream resends from its acked
// sequence, and the total counts every message once.
// A busy client's windows may wait beside its breakdown row (merged at
// most every ClientTotals::kRefreshMs): its row is still one moment -- the
// sequence it names is the last one its totals hold -- and once its stream
// leaves, the row holds every window it sent.
TEST_F(RunTableTest, ABusyClientsRowIsOneMomentAndHoldsEverythingOnceItLeaves) {
  absl::StatusOr<Session> s = table_->Join(Open("x", "a"), &stream_);
  ASSERT_TRUE(s.ok()) << s.status();
  for (uint64_t seq = 1; seq <= 5; ++seq) ASSERT_TRUE(Apply(*table_, *s, seq).ok());
  const runs::RunId run_id = s->run_id;
  const PercentileSet set = *PercentileSet::Create({50, 100});
  absl::StatusOr<std::vector<ClientView>> rows = table_->Clients(run_id, set);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  const ClientView busy = rows->front();
  ASSERT_GE(busy.acked_sequence, 1u);  // the first window is merged when it comes
  EXPECT_EQ(busy.reports, static_cast<int64_t>(busy.acked_sequence));
  EXPECT_EQ(busy.counters.records, 10 * static_cast<int64_t>(busy.acked_sequence));
  ASSERT_TRUE(busy.exact);
  EXPECT_EQ(busy.percentiles->values.back(), 100 + static_cast<int64_t>(busy.acked_sequence));

  table_->Leave(*s);  // no close: detached, may come back
  rows = table_->Clients(run_id, set);
  ASSERT_TRUE(rows.ok()) << rows.status();
  const ClientView& left = rows->front();
  EXPECT_STREQ(left.state, "detached");
  EXPECT_EQ(left.acked_sequence, 5u);
  EXPECT_EQ(left.reports, 5);
  EXPECT_EQ(left.counters.records, 50);
  EXPECT_EQ(left.percentiles->values.back(), 105);  // window 5's latency
}

// A client's percentiles are those of the set asked, whichever set was
// asked before of the same distribution (View keeps its last answer).
TEST_F(RunTableTest, EachPercentileSetOfOneDistributionIsAnsweredExactly) {
  absl::StatusOr<Session> s = table_->Join(Open("x", "a"), &stream_);
  ASSERT_TRUE(s.ok()) << s.status();
  for (uint64_t seq = 1; seq <= 5; ++seq) ASSERT_TRUE(Apply(*table_, *s, seq).ok());
  table_->Leave(*s);  // merged: 10 records each of 101 ... 105
  const PercentileIndex merged(
      std::vector<LatencyBucket>{{101, 10}, {102, 10}, {103, 10}, {104, 10}, {105, 10}});
  const std::vector<PercentileSet> sets = {
      *PercentileSet::Create({50, 100}), *PercentileSet::Create({0, 20, 40}),
      *PercentileSet::Create({0, 20, 40}, PercentileMethod::kNearestRank)};
  std::vector<LatencySnapshot> want(sets.size());
  for (size_t i = 0; i < sets.size(); ++i) merged.Fill(sets[i], &want[i]);
  ASSERT_NE(want[1].values, want[2].values);  // the two rules differ here
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < sets.size(); ++i) {
      absl::StatusOr<std::vector<ClientView>> rows = table_->Clients(s->run_id, sets[i]);
      ASSERT_TRUE(rows.ok()) << rows.status();
      ASSERT_EQ(rows->size(), 1u);
      const LatencySnapshot& got = *rows->front().percentiles;
      EXPECT_EQ(got.percents, sets[i].percents()) << i;
      EXPECT_EQ(got.values, want[i].values) << i;
      EXPECT_EQ(got.counts, want[i].counts) << i;
      EXPECT_EQ(got.median, want[i].median) << i;
    }
  }
}

// A client that sends a burst of windows and then stays attached and
// silent: the windows its row left out (merged at most every
// ClientTotals::kRefreshMs) reach the row without another message -- the
// reaper merges them -- instead of waiting for its next window or its close.
TEST_F(RunTableTest, AQuietClientsRowCatchesUpWithoutAnotherMessage) {
  absl::StatusOr<Session> s = table_->Join(Open("x", "a"), &stream_);
  ASSERT_TRUE(s.ok()) << s.status();
  for (uint64_t seq = 1; seq <= 5; ++seq) ASSERT_TRUE(Apply(*table_, *s, seq).ok());
  const PercentileSet set = *PercentileSet::Create({50, 100});
  ClientView row;
  // Bounded: the reaper looks every 100 ms; 10 s is far beyond it.
  for (int i = 0; i < 1000; ++i) {
    absl::StatusOr<std::vector<ClientView>> rows = table_->Clients(s->run_id, set);
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(rows->size(), 1u);
    row = rows->front();
    if (row.acked_sequence == 5) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_STREQ(row.state, "streaming");
  EXPECT_EQ(row.acked_sequence, 5u);
  EXPECT_EQ(row.reports, 5);
  EXPECT_EQ(row.counters.records, 50);
  ASSERT_TRUE(row.exact);
  EXPECT_EQ(row.percentiles->values.back(), 105);  // window 5's latency
  table_->Leave(*s);
}

TEST_F(RunTableTest, TakeoversWhileParkedApplyEveryMessageOnce) {
  std::mt19937 random(7);
  absl::StatusOr<Session> s;
  auto stream = std::make_unique<FlagIngestStream>();
  s = table_->Join(Open("x", "a"), stream.get());
  ASSERT_TRUE(s.ok());
  const runs::RunId id = s->run_id;
  uint64_t next = 1;
  int takeovers = 0;
  while (next <= static_cast<uint64_t>(kStressMessages)) {
    s->max_memory_bytes = Window(1).bytes();
    auto done = std::make_shared<std::promise<absl::StatusOr<Applied>>>();
    const uint64_t seq = next;
    absl::StatusOr<Offered> offered = table_->OfferWindow(
        *s, seq, [seq](const LatencyConfig&, int64_t) { return Window(seq, 1); },
        [done](absl::StatusOr<Applied> a) { done->set_value(std::move(a)); });
    ASSERT_TRUE(offered.ok()) << offered.status();
    if (offered->parked && random() % 4 == 0) {
      // Reconnect now: the parked message goes, the client resends it.
      auto fresh = std::make_unique<FlagIngestStream>();
      absl::StatusOr<Session> again = table_->Join(Open("x", "a"), fresh.get());
      ASSERT_TRUE(again.ok()) << again.status();
      table_->Leave(*s);
      s = std::move(again);
      stream = std::move(fresh);
      next = s->acked_sequence + 1;
      ++takeovers;
      continue;
    }
    if (offered->parked) {
      ASSERT_TRUE(done->get_future().get().ok());
    }
    ++next;
  }
  ASSERT_TRUE(table_->Close(*s, kStressMessages).ok());
  table_->Leave(*s);
  WaitEnded(id);
  EXPECT_EQ(View(id).total.snapshot.records, kStressMessages);
  EXPECT_GT(takeovers, 0);
}

// --- a run resumed from before its first checkpoint ----------------------------------

// A checkpointed run stored running with no checkpoint: the daemon stopped
// before its first one, so no client was told anything is durable. The
// restored run resumes empty, waits for its clients (by run_id or by name),
// takes them from sequence 1 and ends with exactly what they sent; with no
// client back within ingest.clientTimeoutMs it ends failed, saying why.
TEST(RunTableResumeTest, ARunStoppedBeforeItsFirstCheckpointResumesEmptyAndWaitsForItsClients) {
  for (const bool comes_back : {true, false}) {
    SCOPED_TRACE(comes_back);
    state::testing::ScratchDir dir;
    runs::RunInfo stored;
    stored.id = 5;
    stored.spec.name = "early";
    stored.spec.source = runs::RunSource::kIngest;
    stored.spec.latency = LatencyConfig::ForUnit(TimeUnit::kNs);
    stored.spec.reporting_interval_ms = 60'000;
    stored.spec.periodic_recorder = RecorderKind::kHybridPaged;  // a windows client made it
    stored.spec.total_recorder = RecorderKind::kHybridPaged;
    stored.spec.checkpointed = true;
    stored.start_unix_ms = absl::ToUnixMillis(absl::Now());
    runs::WindowRecord unacked =
        state::testing::MakeWindow(5, runs::WindowRecord::Kind::kPeriodic, 1);
    {
      absl::StatusOr<std::unique_ptr<state::StateStore>> store =
          state::StateStore::Open(dir.path(), {});
      ASSERT_TRUE(store.ok()) << store.status();
      (*store)->SaveRun(stored);
      (*store)->SaveWindow(unacked);  // closed, never checkpointed
      ASSERT_TRUE((*store)->Flush().ok());
    }
    absl::StatusOr<std::unique_ptr<state::StateStore>> store =
        state::StateStore::Open(dir.path(), {});
    ASSERT_TRUE(store.ok()) << store.status();
    state::RunHistory history(*std::move(store));
    runs::RunManager::Options options;
    options.first_id = history.NextRunId();
    options.max_running_runs = 4;
    runs::RunManager manager(options);
    manager.AddObserver(&history);
    manager.Start();
    absl::StatusOr<std::vector<state::StoredRun>> resumable = history.Restore(manager.registry());
    ASSERT_TRUE(resumable.ok()) << resumable.status();
    ASSERT_EQ(resumable->size(), 1u);
    state::StoredRun& run = resumable->front();
    ASSERT_TRUE(run.checkpoint.has_value());
    EXPECT_EQ(run.checkpoint->periodic_seq, 0);
    EXPECT_EQ(run.checkpoint->total.snapshot.records, 0);
    EXPECT_TRUE(run.checkpoint->clients.empty());
    EXPECT_TRUE(run.windows.empty()) << "the unacknowledged window is trimmed";

    config::DaemonConfig c = TestConfig();
    c.ingest.checkpoints = true;
    // It ends no earlier than the timeout: its clients are unknown.
    c.ingest.client_timeout_ms = comes_back ? 1'000 : 100;
    config::CurrentConfig current(c);
    IngestStats stats;
    FlagIngestStream stream;
    auto table = std::make_unique<RunTable>(manager, current, stats, &history.store());
    ASSERT_TRUE(table->Resume(run.info, run.windows, *run.checkpoint).ok());
    if (comes_back) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      EXPECT_FALSE(manager.WaitEnded(5, absl::ZeroDuration())) << "it waits for its clients";
      OpenRequest by_id = Open("early", "a");
      by_id.run_id = 5;
      absl::StatusOr<Session> a = table->Join(by_id, &stream);
      absl::StatusOr<Session> b = table->Join(Open("early", "b"), &stream);
      ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
      EXPECT_EQ(a->run_id, 5u);
      EXPECT_EQ(b->run_id, 5u);
      EXPECT_FALSE(b->created);
      EXPECT_EQ(a->acked_sequence, 0u);
      ASSERT_TRUE(Apply(*table, *a, 1).ok());
      ASSERT_TRUE(Apply(*table, *a, 2).ok());
      ASSERT_TRUE(Apply(*table, *b, 1, 7).ok());
      ASSERT_TRUE(table->Close(*a, 2).ok());
      ASSERT_TRUE(table->Close(*b, 1).ok());
      table->Leave(*a);
      table->Leave(*b);
      EXPECT_FALSE(manager.WaitEnded(5, absl::ZeroDuration()))
          << "every client it knows closed, but others may still come back";
    }
    ASSERT_TRUE(manager.WaitEnded(5, absl::Seconds(30)));
    absl::StatusOr<runs::RunView> v = manager.registry().Get(5);
    ASSERT_TRUE(v.ok()) << v.status();
    if (comes_back) {
      EXPECT_EQ(v->info.state, runs::RunState::kFinished) << v->info.failure_reason;
      EXPECT_EQ(v->total.snapshot.records, 27);
    } else {
      EXPECT_EQ(v->info.state, runs::RunState::kFailed);
      EXPECT_THAT(v->info.failure_reason, HasSubstr("none of its clients came back"));
      EXPECT_EQ(v->total.snapshot.records, 0);
    }
    table->StopAccepting();
    table->EndAll();
    table.reset();
    manager.Stop();
    EXPECT_TRUE(history.store().Flush().ok());
  }
}

}  // namespace
}  // namespace perld::ingest
