#include "daemon/ingest/ingest_checkpointer.h"

#include <utility>

#include "daemon/common/failpoint.h"
#include "daemon/common/log.h"
#include "daemon/common/mutex.h"
#include "daemon/core/contract.h"

namespace perld::ingest {

void IngestCheckpointer::Seed(const runs::RunInfo& info, const state::Checkpoint& checkpoint) {
  MutexLock lock(mu_);
  RunState& s = runs_state_[info.id];
  s.periodic_seq = checkpoint.periodic_seq;
  s.segment_seq = checkpoint.segment_seq;
  s.saved = checkpoint.clients;
}

void IngestCheckpointer::OnWindow(const runs::RunInfo& info, const runs::WindowRecord& window) {
  if (window.kind == runs::WindowRecord::Kind::kTotal) return;
  if (info.service_run != 0) {
    // A response view: its numbering, for its run's next checkpoint (its
    // windows of an instant are published before the run's).
    if (!runs_.Checkpointed(info.service_run)) return;
    MutexLock lock(mu_);
    RunState& v = runs_state_[info.id];
    (window.kind == runs::WindowRecord::Kind::kTotalSegment ? v.segment_seq : v.periodic_seq) =
        window.seq;
    return;
  }
  if (!runs_.Checkpointed(info.id)) return;
  MutexLock lock(mu_);
  RunState& s = runs_state_[info.id];
  if (window.kind == runs::WindowRecord::Kind::kTotalSegment) {
    s.segment_seq = window.seq;
    return;
  }
  if (!window.cut) return;
  std::vector<state::CheckpointClient> clients = runs_.CutClients(info.id, window.applied);
  if (clients.empty() || clients == s.saved) return;
  // Queued once the window is in the registry (OnWindowPublished, which the
  // dispatcher calls right after every OnWindow): the checkpoint stores the
  // registry's live total, and a client acknowledged durable then finds its
  // data in it for every query.
  PERLD_CONTRACT(!s.pending, "OnWindow twice without OnWindowPublished");
  s.pending = PendingCut{window.seq, s.segment_seq, clients};
  s.saved = std::move(clients);
}

void IngestCheckpointer::OnWindowPublished(const runs::RunInfo& info) {
  MutexLock lock(mu_);
  auto it = runs_state_.find(info.id);
  if (it != runs_state_.end() && it->second.pending) Submit(info, it->second);
}

void IngestCheckpointer::Submit(const runs::RunInfo& info, RunState& s) {
  PendingCut cut = *std::move(s.pending);
  s.pending.reset();
  absl::StatusOr<runs::WindowRecord> total = registry_.LiveTotal(info.id);
  if (!total.ok()) {
    // The run ended meanwhile: its final total replaces any checkpoint.
    return;
  }
  if (!total->exact_total && !s.inexact_logged) {
    s.inexact_logged = true;
    log::Warning("ingest: run ", info.id, " '", info.spec.name,
                 "': its total outgrew the total window's memory budget; checkpoints keep exact "
                 "counters but cannot resume the run after a crash");
  }
  state::Checkpoint c;
  c.total = *std::move(total);
  c.total.seq = 1;
  c.periodic_seq = cut.periodic_seq;
  c.segment_seq = cut.segment_seq;
  c.clients = std::move(cut.clients);
  if (info.response_run != 0) {
    // The view's windows up to this instant are in the registry already:
    // the same cut of the same messages.
    absl::StatusOr<runs::WindowRecord> view_total = registry_.LiveTotal(info.response_run);
    if (!view_total.ok()) return;  // ended meanwhile, with its run
    const RunState& v = runs_state_[info.response_run];
    state::Checkpoint& view = c.response_view.emplace_back();
    view.total = *std::move(view_total);
    view.total.seq = 1;
    view.periodic_seq = v.periodic_seq;
    view.segment_seq = v.segment_seq;
  }
  const runs::RunId id = info.id;
  if (journal_ != nullptr) journal_->TakeForCheckpoint(id, &c);
  const auto pairs = static_cast<uint64_t>(c.total.distribution.size());
  const uint64_t upstream_next = c.upstream_next_sequence;
  std::vector<state::CheckpointClient> clients = c.clients;
  store_.SaveCheckpoint(std::move(c),
                        [this, id, pairs, upstream_next, clients = std::move(clients)] {
                          // Committed and synced; no client has been told yet.
                          PERLD_FAILPOINT_HIT("checkpoint-after-commit-before-ack");
                          stats_.checkpoints.fetch_add(1, std::memory_order_relaxed);
                          stats_.checkpoint_pairs.fetch_add(pairs, std::memory_order_relaxed);
                          runs_.MarkDurable(id, clients);
                          if (upstream_next > 0) journal_->Committed(id, upstream_next);
                        });
}

void IngestCheckpointer::OnClientClosed(runs::RunId id, int client_index, uint64_t last_sequence) {
  MutexLock lock(mu_);
  auto it = runs_state_.find(id);
  const auto index = static_cast<size_t>(client_index);
  // Else the next interval window's cut holds the close (CutClients).
  if (it == runs_state_.end() || index >= it->second.saved.size() ||
      it->second.saved[index].applied < last_sequence) {
    return;
  }
  state::CheckpointClient& client = it->second.saved[index];
  client.closed = true;
  if (it->second.pending) {
    // Not queued yet: the checkpoint carries the close (and acks it).
    it->second.pending->clients[index].closed = true;
    return;
  }
  store_.SaveCheckpointClients(id, {client}, [this, id, client] {
    PERLD_FAILPOINT_HIT("checkpoint-after-commit-before-ack");
    runs_.MarkDurable(id, {client});
  });
}

void IngestCheckpointer::OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord&) {
  MutexLock lock(mu_);
  runs_state_.erase(info.id);
  if (info.response_run != 0) runs_state_.erase(info.response_run);
}

}  // namespace perld::ingest
