// UpstreamJournal: how a checkpoint carries a forwarded run's messages to
// the parent perld (UpstreamForwarder, the implementation) so that a tier
// stays exact across a crash of the forwarding daemon.
//
// A forwarded run's window becomes messages to the parent when it closes;
// those messages wait for the checkpoint that covers the window, are stored
// in its transaction and go to the parent only after it committed. After a
// crash the run resumes from its last checkpoint: the parent holds at most
// the windows up to that cut (never one the resumed run regenerates), and
// the ones it lacks are in the state database to be resent.
//
// A run's windows after its last checkpoint are stored the same way with
// its final total (RunHistory::OnRunEnded), in one transaction.
//
// Threads: TakeForCheckpoint on the dispatcher thread (the checkpointer's
// OnWindowPublished, the history's OnRunEnded); Committed on the state
// store's writer thread.
#pragma once

#include <cstdint>

#include "daemon/runs/run_info.h"
#include "daemon/state/checkpoint.h"

namespace perld::state {

class UpstreamJournal {
 public:
  virtual ~UpstreamJournal() = default;
  // Moves the run's messages that no checkpoint holds yet into
  // checkpoint->upstream and sets checkpoint->upstream_next_sequence;
  // leaves both untouched for a run that is not forwarded.
  virtual void TakeForCheckpoint(runs::RunId id, Checkpoint* checkpoint) = 0;
  // The checkpoint (or final total) holding the run's messages below
  // `next_sequence` committed: they may go to the parent.
  virtual void Committed(runs::RunId id, uint64_t next_sequence) = 0;
};

}  // namespace perld::state
