#include "daemon/server/ingest_checkpointer.h"

#include <utility>

#include "daemon/core/contract.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/latency_recorder_builder.h"
#include "daemon/log/log.h"

namespace perld::server {

IngestCheckpointer::RunState& IngestCheckpointer::StateOf(const runs::RunInfo& info) {
  auto it = runs_state_.find(info.id);
  if (it == runs_state_.end()) {
    // The budget of the run's own total window, as the registry's live total.
    const auto budget =
        static_cast<size_t>(TotalBudgetMB(info.spec.latency, info.spec.total_recorder)) << 20;
    it = runs_state_.emplace(info.id, RunState(budget)).first;
  }
  return it->second;
}

void IngestCheckpointer::Seed(const runs::RunInfo& info, const state::Checkpoint& checkpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  RunState& s = StateOf(info);
  s.total.Add(CountersOf(checkpoint.total.snapshot), checkpoint.total.distribution);
  s.start_time = checkpoint.total.snapshot.start_time;
  s.seconds = checkpoint.total.seconds;
  s.segment_seq = checkpoint.segment_seq;
  s.saved = checkpoint.clients;
}

void IngestCheckpointer::OnWindow(const runs::RunInfo& info, const runs::WindowRecord& window) {
  if (window.kind == runs::WindowRecord::Kind::kTotal) return;
  if (!runs_.Checkpointed(info.id)) return;
  std::lock_guard<std::mutex> lock(mu_);
  RunState& s = StateOf(info);
  if (window.kind == runs::WindowRecord::Kind::kTotalSegment) {
    s.segment_seq = window.seq;
    return;
  }
  if (s.total.windows() == 0) s.start_time = window.snapshot.start_time;
  s.total.Add(CountersOf(window.snapshot), window.distribution);
  s.seconds += window.seconds;
  if (!window.cut) return;
  std::vector<state::CheckpointClient> clients = runs_.CutClients(info.id, window.applied);
  if (clients.empty() || clients == s.saved) return;
  if (!s.total.exact() && !s.inexact_logged) {
    s.inexact_logged = true;
    log::Warning("ingest: run ", info.id, " '", info.spec.name,
                 "': its total outgrew the total window's memory budget; checkpoints keep exact "
                 "counters but cannot resume the run after a crash");
  }
  state::Checkpoint c;
  runs::WindowRecord& t = c.total;
  t.run_id = info.id;
  t.kind = runs::WindowRecord::Kind::kTotal;
  t.seq = 1;
  t.start_unix_ms = info.start_unix_ms;
  t.end_unix_ms = window.end_unix_ms;
  t.seconds = s.seconds;
  t.segments = s.total.windows();
  t.exact_total = s.total.exact();
  s.total.Snapshot(runs::PercentilesOf(info.spec), s.start_time, window.snapshot.end_time,
                   &t.snapshot);
  t.distribution = s.total.distribution();
  c.periodic_seq = window.seq;
  c.segment_seq = s.segment_seq;
  c.clients = clients;
  s.saved = std::move(clients);
  // Queued once the window is in the registry (OnWindowPublished, which the
  // dispatcher calls right after every OnWindow): a client acknowledged
  // durable then finds its data in the run's live total.
  PERLD_CONTRACT(!s.pending, "OnWindow twice without OnWindowPublished");
  s.pending = std::move(c);
}

void IngestCheckpointer::OnWindowPublished(const runs::RunInfo& info) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = runs_state_.find(info.id);
  if (it != runs_state_.end() && it->second.pending) Submit(info.id, it->second);
}

void IngestCheckpointer::Submit(runs::RunId id, RunState& s) {
  state::Checkpoint c = std::move(*s.pending);
  s.pending.reset();
  if (journal_ != nullptr) journal_->TakeForCheckpoint(id, &c);
  const auto pairs = static_cast<uint64_t>(c.total.distribution.size());
  const uint64_t upstream_next = c.upstream_next_sequence;
  std::vector<state::CheckpointClient> cut = c.clients;
  store_.SaveCheckpoint(std::move(c), [this, id, pairs, upstream_next, cut = std::move(cut)] {
    stats_.checkpoints.fetch_add(1, std::memory_order_relaxed);
    stats_.checkpoint_pairs.fetch_add(pairs, std::memory_order_relaxed);
    runs_.MarkDurable(id, cut);
    if (upstream_next > 0) journal_->Committed(id, upstream_next);
  });
}

void IngestCheckpointer::OnClientClosed(runs::RunId id, int client_index, uint64_t last_sequence) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = runs_state_.find(id);
    const auto index = static_cast<size_t>(client_index);
    if (it != runs_state_.end() && index < it->second.saved.size() &&
        it->second.saved[index].applied >= last_sequence) {
      state::CheckpointClient& client = it->second.saved[index];
      client.closed = true;
      if (it->second.pending) {
        // Not queued yet: the checkpoint carries the close (and acks it).
        it->second.pending->clients[index].closed = true;
        return;
      }
      store_.SaveCheckpointClients(id, {client},
                                   [this, id, client] { runs_.MarkDurable(id, {client}); });
      return;
    }
  }
  cut_(id);
}

void IngestCheckpointer::OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord&) {
  std::lock_guard<std::mutex> lock(mu_);
  runs_state_.erase(info.id);
}

}  // namespace perld::server
