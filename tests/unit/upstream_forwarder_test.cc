// UpstreamForwarder's lanes without gRPC (issue 25): a fake parent whose
// streams the test holds without room, refuses, or lets close. One stream
// without room never delays another; a stuck stream cannot take the
// others' share of upstream.maxQueuedWindows; Stop is bounded by
// upstream.closeTimeoutMs whatever the parent does; a stream resumed from
// the state database crosses no gap when the parent holds its messages,
// and a read-back never takes a message Committed has yet to tell of; a
// stream that cannot go on in order is never closed (the parent's run
// fails rather than ends short) and a gated run's messages stay stored.
#include "daemon/tiers/upstream_forwarder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/state/state_store.h"
#include "tests/unit/state_test_records.h"

namespace perld::tiers {
namespace {

using std::chrono::milliseconds;
constexpr auto kPatience = std::chrono::seconds(20);  // a generous bound, never a timing claim

// The parent: streams by run name. A "blocked" run's stream has no room
// (and does not close) until Unblock; a "refused" run's stream failed for
// good. Everything else is taken and acknowledged (durably) at once.
class FakeParent {
 public:
  void Block(const std::string& run) {
    std::lock_guard<std::mutex> lock(mu_);
    blocked_.insert(run);
  }
  void Refuse(const std::string& run) {
    std::lock_guard<std::mutex> lock(mu_);
    refused_.insert(run);
  }
  // The parent holds `run`'s messages up to `through` already (durably):
  // sent by the edge's process before a crash.
  void Holds(const std::string& run, uint64_t through) {
    std::lock_guard<std::mutex> lock(mu_);
    held_[run] = through;
  }
  // `run`'s streams expect their first message `by` later (negative:
  // earlier) than the forwarder says: a fault of the edge's own, as a
  // message lost on its side would be.
  void Skew(const std::string& run, int64_t by) {
    std::lock_guard<std::mutex> lock(mu_);
    skew_[run] = by;
  }
  // Room again: the stream's `wake`, as an ack making room would.
  void Unblock(const std::string& run) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocked_.erase(run);
    }
    Nudge(run);
  }
  // The stream's `wake` with nothing changed: the forwarder serves the lane
  // again (after it finished what its previous turn deferred).
  void Nudge(const std::string& run) {
    std::vector<std::function<void()>> wakes;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (Stream* s : streams_) {
        if (s->run == run) wakes.push_back(s->wake);
      }
    }
    for (auto& wake : wakes) wake();  // no lock of ours held, as the contract says
  }
  // How often the forwarder asked `run`'s stream for room.
  int RoomAsked(const std::string& run) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = room_asked_.find(run);
    return it == room_asked_.end() ? 0 : it->second;
  }
  std::vector<uint64_t> Received(const std::string& run) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = received_.find(run);
    return it == received_.end() ? std::vector<uint64_t>{} : it->second;
  }
  int64_t Records(const std::string& run) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(run);
    return it == records_.end() ? 0 : it->second;
  }
  // Every WindowReport received for `run`, in order, and its stream's open.
  std::vector<v1::WindowReport> Reports(const std::string& run) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = reports_.find(run);
    return it == reports_.end() ? std::vector<v1::WindowReport>{} : it->second;
  }
  std::optional<v1::IngestOpen> Open(const std::string& run) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = opens_.find(run);
    return it == opens_.end() ? std::nullopt : std::optional<v1::IngestOpen>(it->second);
  }
  bool Closed(const std::string& run) const {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_.contains(run);
  }
  // Waits (bounded) until `done` holds; false when it never did. `done`
  // may read the forwarder's counters, which change without notifying us:
  // looked at again at least every 10 ms (a test's wait, not the daemon's).
  bool WaitFor(const std::function<bool()>& done) const {
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    while (!done()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return false;
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_until(lock, std::min(deadline, now + milliseconds(10)));
    }
    return true;
  }

  ParentStreamFactory Factory() {
    return [this](const v1::IngestOpen& open, uint64_t first, uint64_t /*held_through*/,
                  std::function<void()> wake) {
      int64_t skew = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        opens_[open.run_name()] = open;
        skew = skew_[open.run_name()];
      }
      return std::make_unique<Stream>(this, open.run_name(), first + static_cast<uint64_t>(skew),
                                      std::move(wake));
    };
  }

 private:
  struct Stream final : ParentStream {
    Stream(FakeParent* p, std::string r, uint64_t first, std::function<void()> w)
        : parent(p), run(std::move(r)), next(first), wake(std::move(w)) {
      std::lock_guard<std::mutex> lock(parent->mu_);
      parent->streams_.insert(this);
    }
    ~Stream() override {
      std::lock_guard<std::mutex> lock(parent->mu_);
      parent->streams_.erase(this);
    }
    uint64_t next_sequence() const override {
      std::lock_guard<std::mutex> lock(parent->mu_);
      return next;
    }
    bool HasRoom() const override {
      std::lock_guard<std::mutex> lock(parent->mu_);
      ++parent->room_asked_[run];
      parent->cv_.notify_all();
      return !parent->blocked_.contains(run);
    }
    Offer TryEnqueue(v1::IngestRequest* message) override {
      std::lock_guard<std::mutex> lock(parent->mu_);
      if (parent->refused_.contains(run)) return Offer::kFailed;
      if (parent->blocked_.contains(run)) return Offer::kFull;
      EXPECT_EQ(message->window().sequence(), next);
      parent->received_[run].push_back(next++);
      parent->records_[run] += message->window().records();
      parent->reports_[run].push_back(message->window());
      parent->cv_.notify_all();
      return Offer::kQueued;
    }
    void RequestClose() override {
      std::lock_guard<std::mutex> lock(parent->mu_);
      close_asked = true;
    }
    Progress progress() const override {
      std::lock_guard<std::mutex> lock(parent->mu_);
      Progress p;
      auto held = parent->held_.find(run);
      p.acked = p.durable = std::max(next - 1, held == parent->held_.end() ? 0 : held->second);
      if (parent->refused_.contains(run)) p.error = "FAILED_PRECONDITION: refused";
      p.closed = close_asked && !parent->blocked_.contains(run) && p.error.empty();
      if (p.closed) {
        parent->closed_.insert(run);
        parent->cv_.notify_all();
      }
      return p;
    }

    FakeParent* const parent;
    const std::string run;
    uint64_t next;
    const std::function<void()> wake;
    bool close_asked = false;
  };

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::set<std::string> blocked_;
  std::set<std::string> refused_;
  std::set<Stream*> streams_;
  std::map<std::string, std::vector<uint64_t>> received_;
  std::map<std::string, int64_t> records_;
  std::map<std::string, std::vector<v1::WindowReport>> reports_;
  std::map<std::string, v1::IngestOpen> opens_;
  mutable std::set<std::string> closed_;
  std::map<std::string, uint64_t> held_;
  std::map<std::string, int64_t> skew_;
  mutable std::map<std::string, int> room_asked_;
};

config::UpstreamConfig Config(int64_t max_queued, int64_t close_timeout_ms) {
  config::UpstreamConfig c;
  c.target = "fake:1";
  c.node_id = "edge";
  c.max_pairs_per_report = 1;  // a window of two latencies goes in two parts
  c.max_queued_windows = max_queued;
  c.close_timeout_ms = close_timeout_ms;
  return c;
}

runs::RunInfo RunNamed(runs::RunId id, const std::string& name) {
  runs::RunInfo info;
  info.id = id;
  info.spec.name = name;
  info.spec.reporting_interval_ms = 1000;
  return info;
}

// Window `seq` of a run: two records, latencies seq and seq + 1.
runs::WindowRecord Window(runs::RunId id, int64_t seq) {
  runs::WindowRecord w;
  w.run_id = id;
  w.kind = runs::WindowRecord::Kind::kPeriodic;
  w.seq = seq;
  w.snapshot.records = w.snapshot.valid = 2;
  w.snapshot.min_latency = seq;
  w.snapshot.max_latency = seq + 1;
  w.snapshot.total_latency = 2 * seq + 1;
  w.distribution = {{seq, 1}, {seq + 1, 1}};
  return w;
}

// A run's checkpoint as the ingest checkpointer takes it: its total and
// window messages 1..`messages` to the parent (one record each).
state::Checkpoint CheckpointOf(runs::RunId id, uint64_t messages = 0) {
  state::Checkpoint c;
  c.total.run_id = id;
  c.total.kind = runs::WindowRecord::Kind::kTotal;
  c.total.seq = 1;
  for (uint64_t seq = 1; seq <= messages; ++seq) {
    v1::IngestRequest m;
    m.mutable_window()->set_sequence(seq);
    m.mutable_window()->set_records(1);
    c.upstream.push_back({seq, m.SerializeAsString()});
  }
  if (messages > 0) c.upstream_next_sequence = messages + 1;
  return c;
}

// A run and a state store in a scratch directory that knows it (null
// when the store did not open).
struct StoredRun {
  StoredRun(runs::RunId id, const std::string& name) : info(RunNamed(id, name)) {
    absl::StatusOr<std::unique_ptr<state::StateStore>> opened =
        state::StateStore::Open(dir.path(), {});
    EXPECT_TRUE(opened.ok()) << opened.status();
    if (!opened.ok()) return;
    store = *std::move(opened);
    store->SaveRun(info);
  }
  state::testing::ScratchDir dir;
  runs::RunInfo info;
  std::unique_ptr<state::StateStore> store;
};

std::vector<uint64_t> OneTo(uint64_t n) {
  std::vector<uint64_t> v;
  for (uint64_t i = 1; i <= n; ++i) v.push_back(i);
  return v;
}

TEST(UpstreamForwarderTest, AStreamWithoutRoomOrRefusedDelaysNoOther) {
  FakeParent parent;
  parent.Block("stuck");
  parent.Refuse("refused");
  UpstreamForwarder f(Config(100'000, 10'000), parent.Factory());
  const runs::RunInfo stuck = RunNamed(1, "stuck"), refused = RunNamed(2, "refused"),
                      healthy = RunNamed(3, "healthy");
  for (const runs::RunInfo* r : {&stuck, &refused, &healthy}) f.OnRunStarted(*r);
  // 600 messages each: more than a stream's room (kMaxUnackedPerStream).
  constexpr int kWindows = 300;
  for (int w = 1; w <= kWindows; ++w) {
    for (const runs::RunInfo* r : {&stuck, &refused, &healthy}) f.OnWindow(*r, Window(r->id, w));
  }
  ASSERT_TRUE(parent.WaitFor([&] { return parent.Received("healthy").size() == 2 * kWindows; }))
      << "the healthy run's windows waited for the stuck one's: "
      << parent.Received("healthy").size();
  EXPECT_EQ(parent.Received("healthy"), OneTo(2 * kWindows)) << "in order, each once";
  EXPECT_EQ(parent.Records("healthy"), 2 * kWindows);
  EXPECT_TRUE(parent.Received("stuck").empty());
  f.OnRunEnded(healthy, {});
  ASSERT_TRUE(parent.WaitFor([&] { return parent.Closed("healthy"); }));
  ASSERT_TRUE(parent.WaitFor([&] { return f.counters().windows_dropped == 2 * kWindows; }))
      << "the refused run's messages are counted: " << f.counters().windows_dropped;

  // Room again (an ack): the stuck run's messages follow, in order.
  parent.Unblock("stuck");
  ASSERT_TRUE(parent.WaitFor([&] { return parent.Received("stuck").size() == 2 * kWindows; }));
  EXPECT_EQ(parent.Received("stuck"), OneTo(2 * kWindows));
  f.OnRunEnded(stuck, {});
  f.OnRunEnded(refused, {});
  ASSERT_TRUE(parent.WaitFor([&] { return f.counters().open_streams == 0; }));
  f.Stop();
  const UpstreamForwarder::Counters c = f.counters();
  EXPECT_EQ(c.runs, 3u);
  EXPECT_EQ(c.windows_sent, 4u * kWindows);
  EXPECT_EQ(c.messages_acked, 4u * kWindows);
  EXPECT_EQ(c.windows_dropped, 2u * kWindows);
  EXPECT_EQ(c.queued, 0u);
}

// A rate-controlled run (issue 30) is one stream that opens with its target
// rate and late threshold: its response view's windows go on it as response
// windows, the schedule on each window's last part, never as a run of
// their own.
TEST(UpstreamForwarderTest, ARateControlledRunCarriesItsResponseViewOnItsOwnStream) {
  FakeParent parent;
  UpstreamForwarder f(Config(100'000, 10'000), parent.Factory());
  runs::RunInfo run = RunNamed(1, "paced");
  run.spec.target_rate = 1000;
  run.spec.late_threshold_ns = 250'000;
  run.response_run = 2;
  runs::RunInfo view = RunNamed(2, "paced:response");
  view.service_run = 1;
  f.OnRunStarted(run);
  f.OnRunStarted(view);
  for (int w = 1; w <= 3; ++w) {
    runs::WindowRecord response = Window(view.id, w + 10);
    response.seq = w;
    response.schedule = {.operations = 2,
                         .late = w,
                         .skipped = 1,
                         .max_lag = 7 * w,
                         .min_lag = w,
                         .total_lag = 8 * w,
                         .not_sustained = w == 3};
    f.OnWindow(view, response);  // an instant's view window comes first
    f.OnWindow(run, Window(run.id, w));
  }
  f.OnRunEnded(view, {});
  f.OnRunEnded(run, {});
  ASSERT_TRUE(parent.WaitFor([&] { return parent.Closed("paced"); }));
  f.Stop();
  EXPECT_TRUE(parent.Reports("paced:response").empty()) << "no run of the view's own";
  EXPECT_EQ(f.counters().runs, 1u);
  const std::optional<v1::IngestOpen> open = parent.Open("paced");
  ASSERT_TRUE(open.has_value());
  EXPECT_EQ(open->target_rate(), 1000);
  EXPECT_EQ(open->late_threshold_ns(), 250'000);
  const std::vector<v1::WindowReport> reports = parent.Reports("paced");
  ASSERT_EQ(reports.size(), 12u) << "3 windows of each view, 2 parts each";
  for (int w = 1; w <= 3; ++w) {
    const v1::WindowReport* parts = &reports[static_cast<size_t>(4 * (w - 1))];
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(parts[i].sequence(), static_cast<uint64_t>(4 * w - 3 + i));
    EXPECT_TRUE(parts[0].response() && parts[1].response());
    EXPECT_FALSE(parts[2].response() || parts[3].response());
    // One pair a part (maxPairsPerReport 1): its latency_delta is the latency.
    EXPECT_EQ(parts[0].latency_delta(0), static_cast<uint64_t>(w + 10)) << "the view's, " << w;
    EXPECT_EQ(parts[1].latency_delta(0), static_cast<uint64_t>(w + 11));
    EXPECT_EQ(parts[2].latency_delta(0), static_cast<uint64_t>(w)) << "the run's, " << w;
    EXPECT_EQ(parts[3].latency_delta(0), static_cast<uint64_t>(w + 1));
    EXPECT_FALSE(parts[0].has_schedule()) << "the schedule once, on the last part";
    ASSERT_TRUE(parts[1].has_schedule());
    const v1::Schedule& s = parts[1].schedule();
    EXPECT_EQ(s.operations(), 2);
    EXPECT_EQ(s.late(), w);
    EXPECT_EQ(s.skipped(), 1);
    EXPECT_EQ(s.max_lag(), 7 * w);
    EXPECT_EQ(s.min_lag(), w);
    EXPECT_EQ(s.total_lag(), 8 * w);
    EXPECT_EQ(s.not_sustained(), w == 3);
    EXPECT_FALSE(parts[2].has_schedule() || parts[3].has_schedule());
  }
}

TEST(UpstreamForwarderTest, AStuckStreamCannotTakeTheOthersShare) {
  FakeParent parent;
  parent.Block("stuck");
  UpstreamForwarder f(Config(/*max_queued=*/20, /*close_timeout_ms=*/200), parent.Factory());
  const runs::RunInfo stuck = RunNamed(1, "stuck"), healthy = RunNamed(2, "healthy");
  f.OnRunStarted(stuck);
  f.OnRunStarted(healthy);
  // The stuck run fills the budget (20 messages: 10 windows), the rest of
  // its windows are dropped.
  for (int w = 1; w <= 30; ++w) f.OnWindow(stuck, Window(stuck.id, w));
  EXPECT_EQ(f.counters().windows_dropped, 20u);
  EXPECT_EQ(f.counters().queued, 20u);
  // The other run still has its share (10): none of its windows is dropped.
  for (int w = 1; w <= 30; ++w) {
    f.OnWindow(healthy, Window(healthy.id, w));
    ASSERT_TRUE(parent.WaitFor([&] { return parent.Received("healthy").size() == 2u * w; }))
        << "window " << w << " of the healthy run";
  }
  EXPECT_EQ(parent.Received("healthy"), OneTo(60));
  EXPECT_EQ(f.counters().windows_dropped, 20u);
}

TEST(UpstreamForwarderTest, StopIsBoundedByCloseTimeoutWhateverTheParentDoes) {
  FakeParent parent;
  for (const char* run : {"a", "b", "c"}) parent.Block(run);
  constexpr int64_t kCloseMs = 300;
  UpstreamForwarder f(Config(100'000, kCloseMs), parent.Factory());
  // Three runs whose parent never makes room: 400 messages each wait, and
  // their streams never close.
  for (runs::RunId id = 1; id <= 3; ++id) {
    const runs::RunInfo run = RunNamed(id, std::string(1, static_cast<char>('a' + id - 1)));
    f.OnRunStarted(run);
    for (int w = 1; w <= 200; ++w) f.OnWindow(run, Window(id, w));
    f.OnRunEnded(run, {});
  }
  const auto start = std::chrono::steady_clock::now();
  f.Stop();
  const auto took = std::chrono::steady_clock::now() - start;
  // Not closeTimeoutMs per stream: all three together, plus a generous margin.
  EXPECT_LT(took, milliseconds(kCloseMs) + std::chrono::seconds(3))
      << std::chrono::duration_cast<milliseconds>(took).count() << " ms";
  const UpstreamForwarder::Counters c = f.counters();
  EXPECT_EQ(c.windows_dropped, 1200u) << "never handed over: counted (no checkpoints)";
  EXPECT_EQ(c.open_streams, 0u);
  EXPECT_EQ(c.queued, 0u);
}

// The crash of tier_crash_test's scenario C, without its timing: the edge
// died after its parent had made messages durable that the edge's state
// database still holds (it had not deleted them yet). The restarted edge
// reads them back and resends them in order; the parent's durable sequence,
// far ahead of what the stream handed over, must not delete the ones not
// read back yet -- the stream cannot skip a sequence, so that left a gap
// ("message 6767 ... the stream expects message 3686") and the run short.
TEST(UpstreamForwarderTest, AResumedStreamDeletesOnlyWhatItHandedOver) {
  constexpr runs::RunId kRun = 7;
  constexpr uint64_t kStored = 300;  // several read-back batches
  StoredRun run(kRun, "resumed");
  ASSERT_NE(run.store, nullptr);
  state::StateStore& store = *run.store;
  const runs::RunInfo& info = run.info;
  store.SaveCheckpoint(CheckpointOf(kRun, kStored), [] {});
  ASSERT_TRUE(store.Flush().ok());
  absl::StatusOr<std::vector<state::UpstreamBacklog>> backlog = store.LoadUpstream();
  ASSERT_TRUE(backlog.ok()) << backlog.status();

  FakeParent parent;
  parent.Holds("resumed", kStored);  // every one, durably
  parent.Block("resumed");           // until the store did what the first turn asked
  UpstreamForwarder f(Config(3, 10'000), parent.Factory(), &store);
  f.Restore(*backlog);
  f.DeliverRestored(
      [&](runs::RunId id) { return id == kRun ? std::optional(info) : std::nullopt; });
  // The first turn opened the stream and asked for room to read back; a
  // second turn begins only after the first one's store calls were made.
  ASSERT_TRUE(parent.WaitFor([&] { return parent.RoomAsked("resumed") >= 1; }));
  parent.Nudge("resumed");
  ASSERT_TRUE(parent.WaitFor([&] { return parent.RoomAsked("resumed") >= 2; }));
  ASSERT_TRUE(store.Flush().ok());
  parent.Unblock("resumed");

  ASSERT_TRUE(parent.WaitFor([&] { return parent.Closed("resumed"); }));
  EXPECT_EQ(parent.Received("resumed"), OneTo(kStored)) << "every stored message, in order";
  f.Stop();
  EXPECT_EQ(f.counters().windows_dropped, 0u);
  ASSERT_TRUE(store.Flush().ok());
  EXPECT_TRUE(store.LoadUpstream()->empty()) << "delivered: the stream ended";
}

// The store's writer commits a checkpoint's messages to the database before
// it calls Committed. A lane reading its stored messages back in that
// moment finds the new ones already there; taken from the read-back too,
// they went to the stream twice ("message 3 ... the stream expects message
// 5"), the rest of the run was dropped and the parent's run ended short.
TEST(UpstreamForwarderTest, AReadBackTakesOnlyWhatCommittedToldOf) {
  constexpr runs::RunId kRun = 9;
  StoredRun run(kRun, "racing");
  ASSERT_NE(run.store, nullptr);
  state::StateStore& store = *run.store;
  const runs::RunInfo& info = run.info;
  FakeParent parent;
  parent.Block("racing");  // no room: the committed messages wait in the database
  UpstreamForwarder f(Config(1, 10'000), parent.Factory(), &store,
                      [](runs::RunId) { return true; });
  f.OnRunStarted(info);
  // A window's two parts, checkpointed, stored and committed.
  auto checkpoint = [&](int64_t window) {
    f.OnWindow(info, Window(kRun, window));
    state::Checkpoint c = CheckpointOf(kRun);
    f.TakeForCheckpoint(kRun, &c);
    store.SaveCheckpoint(std::move(c), [] {});
    ASSERT_TRUE(store.Flush().ok());
  };
  checkpoint(1);
  f.Committed(kRun, 3);  // messages 1 and 2: no room, they wait in the database
  ASSERT_TRUE(parent.WaitFor([&] { return parent.RoomAsked("racing") >= 1; }));
  checkpoint(2);  // messages 3 and 4 in the database; Committed not called yet
  parent.Unblock("racing");
  ASSERT_TRUE(parent.WaitFor([&] { return parent.Received("racing").size() >= 2; }));
  f.Committed(kRun, 5);
  f.OnRunEnded(info, runs::WindowRecord{});
  ASSERT_TRUE(parent.WaitFor([&] { return parent.Closed("racing"); }));
  EXPECT_EQ(parent.Received("racing"), OneTo(4)) << "every message once, in order";
  f.Stop();
  EXPECT_EQ(f.counters().windows_dropped, 0u);
}

// A message that cannot follow its stream in order is the edge's own fault.
// Closing the stream then would end the parent's run finished and short
// (as the read-back race above did); the stream is left unclosed
// (cancelled once the run ended: the parent sees its client vanish and
// ends its run failed), and a gated run's messages stay stored for the
// next start, which resends them in order.
TEST(UpstreamForwarderTest, AStreamThatCannotGoOnInOrderIsNeverClosed) {
  constexpr runs::RunId kRun = 11;
  StoredRun run(kRun, "skewed");
  ASSERT_NE(run.store, nullptr);
  state::StateStore& store = *run.store;
  const runs::RunInfo& info = run.info;
  // An ended run's stream, messages 3 and 4 still stored (1 and 2 gone).
  store.SaveCheckpoint(CheckpointOf(kRun, 4), [] {});
  store.ReleaseUpstream(kRun, 2);
  ASSERT_TRUE(store.Flush().ok());
  absl::StatusOr<std::vector<state::UpstreamBacklog>> backlog = store.LoadUpstream();
  ASSERT_TRUE(backlog.ok()) << backlog.status();

  FakeParent parent;
  parent.Skew("skewed", -2);  // the parent's stream expects message 1: 3 cannot follow
  UpstreamForwarder f(Config(3, 10'000), parent.Factory(), &store);
  f.Restore(*backlog);
  f.DeliverRestored(
      [&](runs::RunId id) { return id == kRun ? std::optional(info) : std::nullopt; });
  // The lane is done once its stream is gone: cancelled, not closed.
  ASSERT_TRUE(
      parent.WaitFor([&] { return f.counters().runs == 1 && f.counters().open_streams == 0; }));
  EXPECT_FALSE(parent.Closed("skewed")) << "a closed stream ends the parent's run short";
  EXPECT_TRUE(parent.Received("skewed").empty());
  f.Stop();
  EXPECT_EQ(f.counters().windows_dropped, 0u) << "kept, not dropped";
  ASSERT_TRUE(store.Flush().ok());
  backlog = store.LoadUpstream();
  ASSERT_TRUE(backlog.ok()) << backlog.status();
  ASSERT_EQ(backlog->size(), 1u) << "resent at the next start";
  EXPECT_EQ((*backlog)[0].first_sequence, 3u);
  EXPECT_EQ((*backlog)[0].next_sequence, 5u);
}
}  // namespace
}  // namespace perld::tiers
