// Closes never add a window (issue 32). A checkpointed run's clients close
// one after another, as benchmark nodes finish: each close is acknowledged
// durable by the checkpoint of the run's next interval window, the last one
// by the run's stored end -- and the run's history holds its interval
// windows and the final one, nothing more. Before issue 32 every close cut
// the shared window (one near-empty window per close). The whole ingest
// half without a transport: RunTable, IngestCheckpointer, the state store.
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/ingest/ingest_checkpointer.h"
#include "daemon/ingest/run_table.h"
#include "daemon/runs/run_manager.h"
#include "daemon/state/run_history.h"
#include "gtest/gtest.h"
#include "tests/unit/remote_window_records.h"
#include "tests/unit/state_test_records.h"

namespace perld::ingest {
namespace {

using Session = RunTable::Session;

constexpr int64_t kIntervalMs = 100;

runs::RemoteWindow Window(uint64_t sequence, int64_t n) {
  return testing::RemoteWindowAt(static_cast<int64_t>(1000 + sequence), n);
}

// A daemon's ingest half with checkpoints on, wired as daemon_server does.
class IngestCloseTest : public ::testing::Test {
 protected:
  static config::DaemonConfig Config() {
    config::DaemonConfig c;
    c.latency = LatencyConfig::ForUnit(TimeUnit::kNs);
    c.reporting_interval_ms = kIntervalMs;
    c.ingest.checkpoints = true;
    c.ingest.client_timeout_ms = 60'000;
    c.ingest.max_clients_per_run = 1000;
    c.limits.max_running_runs = 4;
    return c;
  }

  IngestCloseTest() : current_(Config()) {
    absl::StatusOr<std::unique_ptr<state::StateStore>> store =
        state::StateStore::Open(dir_.path(), {});
    EXPECT_TRUE(store.ok()) << store.status();
    history_ = std::make_unique<state::RunHistory>(*std::move(store));
    runs::RunManager::Options options;
    options.first_id = history_->NextRunId();
    options.max_running_runs = 4;
    manager_ = std::make_unique<runs::RunManager>(options);
    table_ = std::make_unique<RunTable>(*manager_, current_, stats_, &history_->store());
    checkpointer_ = std::make_unique<IngestCheckpointer>(*table_, manager_->registry(),
                                                         history_->store(), stats_);
    table_->SetCloseHook([this](runs::RunId id, int index, uint64_t last) {
      checkpointer_->OnClientClosed(id, index, last);
    });
    manager_->AddObserver(history_.get());
    manager_->AddObserver(checkpointer_.get());
    manager_->Start();
  }
  ~IngestCloseTest() override {
    table_->StopAccepting();
    table_->EndAll();
    manager_->Stop();
    EXPECT_TRUE(history_->store().Flush().ok());
  }

  Session Join(int client) {
    OpenRequest open;
    open.run_name = "closing";
    open.client_id = absl::StrCat("c", client);
    open.client_name = open.client_id;
    open.mode = ClientMode::kWindows;
    open.time_unit = TimeUnit::kNs;
    absl::StatusOr<Session> s = table_->Join(open, &stream_);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : Session{};
  }

  void Apply(const Session& s, uint64_t sequence, int64_t n) {
    absl::StatusOr<Offered> offered = table_->OfferWindow(
        s, sequence, [&](const LatencyConfig&, int64_t) { return Window(sequence, n); },
        [](const absl::StatusOr<Applied>&) {});
    ASSERT_TRUE(offered.ok()) << offered.status();
    ASSERT_FALSE(offered->parked);
  }

  // Bounded: true once every session's close is durable.
  bool WaitCloseDurable(const std::vector<Session>& sessions) {
    for (int i = 0; i < 3000; ++i) {
      bool all = true;
      for (const Session& s : sessions) all = all && table_->CloseDurable(s);
      if (all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  state::testing::ScratchDir dir_;
  config::CurrentConfig current_;
  IngestStats stats_;
  FlagIngestStream stream_;
  std::unique_ptr<state::RunHistory> history_;
  std::unique_ptr<runs::RunManager> manager_;
  std::unique_ptr<RunTable> table_;
  std::unique_ptr<IngestCheckpointer> checkpointer_;
};

TEST_F(IngestCloseTest, ClientsClosingOneAfterAnotherLeaveOnlyTheIntervalWindows) {
  constexpr int kClients = 40;
  std::vector<Session> sessions;
  for (int c = 0; c < kClients; ++c) sessions.push_back(Join(c));
  const runs::RunId id = sessions.front().run_id;
  for (int c = 0; c < kClients; ++c) Apply(sessions[c], 1, 10 + c);

  // Every client but the last closes, spread over a second (ten intervals),
  // each after one more message; their streams stay attached.
  std::vector<Session> closed;
  for (int c = 0; c + 1 < kClients; ++c) {
    Apply(sessions[c], 2, 5);
    ASSERT_TRUE(table_->Close(sessions[c], 2).ok());
    EXPECT_FALSE(table_->CloseDurable(sessions[c])) << "durable only once a checkpoint holds it";
    closed.push_back(sessions[c]);
    std::this_thread::sleep_for(std::chrono::milliseconds(1000 / kClients));
  }
  ASSERT_TRUE(WaitCloseDurable(closed)) << "the interval windows' checkpoints acknowledge them";
  EXPECT_FALSE(manager_->WaitEnded(id, absl::ZeroDuration())) << "one client is still open";
  EXPECT_GT(stats_.checkpoints.load(), 0u);

  // A closed client applies nothing new.
  absl::StatusOr<Offered> late = table_->OfferWindow(
      sessions[0], 3, [&](const LatencyConfig&, int64_t) { return Window(3, 1); },
      [](const absl::StatusOr<Applied>&) {});
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition) << late.status();

  // The last close ends the run while its stream still waits for the
  // acknowledgement; the stored end acknowledges it.
  Session& last = sessions.back();
  Apply(last, 2, 5);
  ASSERT_TRUE(table_->Close(last, 2).ok());
  ASSERT_TRUE(WaitCloseDurable({last}));
  ASSERT_TRUE(manager_->WaitEnded(id, absl::Seconds(30)));
  for (Session& s : sessions) table_->Leave(s);

  absl::StatusOr<runs::RunView> view = manager_->registry().Get(id);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->info.state, runs::RunState::kFinished) << view->info.failure_reason;
  int64_t want = 0;
  for (int c = 0; c < kClients; ++c) want += 10 + c + 5;
  EXPECT_EQ(view->total.snapshot.records, want);

  // Windows close on the interval's schedule (a late tick makes one longer,
  // never adds one) and at the run's end: at most one per interval the run
  // lasted, plus the final one.
  absl::StatusOr<std::vector<runs::WindowRecord>> history = manager_->registry().History(id);
  ASSERT_TRUE(history.ok()) << history.status();
  std::vector<runs::WindowRecord> periodic;
  for (const runs::WindowRecord& w : *history) {
    if (w.kind == runs::WindowRecord::Kind::kPeriodic) periodic.push_back(w);
  }
  const double seconds = view->total.seconds;
  const auto most =
      static_cast<size_t>(std::floor(seconds * 1000.0 / static_cast<double>(kIntervalMs))) + 1;
  EXPECT_LE(periodic.size(), most) << "a run of " << seconds << " s with a " << kIntervalMs
                                   << " ms interval; " << kClients << " closes";
  int64_t summed = 0;
  for (const runs::WindowRecord& w : periodic) summed += w.snapshot.records;
  EXPECT_EQ(summed, want);
}

}  // namespace
}  // namespace perld::ingest
