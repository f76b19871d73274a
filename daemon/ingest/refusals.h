// How the ingest domain refuses: every refusal is counted under its reason
// (IngestStats, perld_ingest_refused_total{reason}) and returned as the
// status the client sees (the table in README "Status codes clients can act
// on").
//
// Free functions; any thread.
#pragma once

#include "absl/status/status.h"
#include "daemon/ingest/ingest_stats.h"

namespace perld::ingest {

using Refusal = IngestStats::Refusal;

// Counts `r` and returns `status`.
inline absl::Status Refuse(IngestStats& stats, Refusal r, absl::Status status) {
  stats.Refused(r);
  return status;
}

// The refusal counted for a decode error: a size limit (the codecs return
// RESOURCE_EXHAUSTED for one) or malformed data.
inline Refusal RefusalOf(const absl::Status& s, Refusal limit) {
  return s.code() == absl::StatusCode::kResourceExhausted ? limit : Refusal::kMalformed;
}

// A decode error as the client sees it: a message over a size limit is as
// final as a malformed one (resending it cannot help), so both are
// INVALID_ARGUMENT; RESOURCE_EXHAUSTED is kept for transient limits.
inline absl::Status Final(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kResourceExhausted) return s;
  return absl::InvalidArgumentError(s.message());
}

}  // namespace perld::ingest
