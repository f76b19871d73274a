// Checkpoint: a running ingest run's state at a consistent cut, as the
// daemon stores it in its state database (table `checkpoints` and
// `checkpoint_clients`, state_schema.h) so that a restarted perld resumes
// the run exactly.
//
// The cut is a closed periodic window (periodic_seq): `total` holds every
// record of the run's windows up to and including it, and each client's
// `applied` is the last message sequence those windows hold (a message is
// merged whole or not at all: RemoteWindow::sequence). After a crash the
// daemon resumes from here and each client replays from applied + 1 (its
// spool or memory keeps every message the daemon has not declared durable),
// so nothing is lost or counted twice.
//
// A rate-controlled run's response view (RunInfo::response_run) is
// checkpointed with it, at the same cut and in the same transaction: the
// view's total holds the response times of the same messages, and both
// resume together.
//
// Plain data; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/runs/window_record.h"

namespace perld::state {

struct CheckpointClient {
  int32_t index = 0;  // join order in the run (RemoteWindow::client)
  std::string id;     // the client's stable client_id
  std::string name;
  bool raw = true;       // MODE_RAW (else MODE_WINDOWS)
  uint64_t applied = 0;  // last message sequence in `total`
  bool closed = false;   // sent IngestClose with last_sequence == applied
  bool operator==(const CheckpointClient&) const = default;
};

// One message of a run's stream to the parent perld (a tier edge's
// UpstreamForwarder): a serialized perld.v1.IngestRequest holding a window
// report, under its sequence number in that stream.
struct UpstreamMessage {
  uint64_t sequence = 0;
  std::string bytes;
  bool operator==(const UpstreamMessage&) const = default;
};

// A run's stream to the parent as stored: the messages the parent has not
// yet reported durable are those from first_sequence up to (excluding)
// next_sequence, the sequence the next one takes (equal: none).
struct UpstreamBacklog {
  runs::RunId run = 0;
  uint64_t first_sequence = 1;
  uint64_t next_sequence = 1;
};

struct Checkpoint {
  // kTotal, run_id set, with its exact distribution (when exact_total).
  runs::WindowRecord total;
  int64_t periodic_seq = 0;               // the cut: the last periodic window in `total`
  int64_t segment_seq = 0;                // total segments published up to the cut
  std::vector<CheckpointClient> clients;  // by index
  // A forwarded run (upstream_next_sequence > 0): the messages to the
  // parent encoding its windows up to the cut that no earlier checkpoint
  // stored. Stored in the same transaction, so after a crash the parent
  // holds exactly the windows up to the cut the run resumes from.
  std::vector<UpstreamMessage> upstream;
  uint64_t upstream_next_sequence = 0;
  // A rate-controlled run's response view at the same cut: 0 or 1 entry,
  // its total (run_id: the view's) and its own window numbering; no
  // clients or upstream (the run's carry them).
  std::vector<Checkpoint> response_view;
};

}  // namespace perld::state
