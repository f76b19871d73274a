// The ingest wire format (perld.v1 TimestampBatch, WindowReport) decoded and
// checked for a run: every error is InvalidArgument naming the field, except
// a batch or report over its configured length (ResourceExhausted). A message
// is either decoded whole or refused whole: nothing half-applied.
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/time_stamp.h"
#include "daemon/ingest/ingest_types.h"
#include "daemon/runs/remote_window_inbox.h"
#include "perld/v1/ingest.pb.h"

namespace perld::service {

// An IngestOpen as the ingest domain takes it. InvalidArgument for a mode
// that is neither MODE_RAW nor MODE_WINDOWS, or an unknown time unit
// (TIME_UNIT_UNSPECIFIED is the daemon's own: nullopt).
absl::StatusOr<ingest::OpenRequest> DecodeOpen(const v1::IngestOpen& open);

// Columns -> out->timestamps (start 0, end = latency; cleared first) and,
// out->schedule.skipped and, when the batch has start lags, out->intended
// (-lag). Checks: count == latency column length;
// records/bytes columns empty or of `count` entries; records in [1,
// 2^31-1], bytes in [0, 2^31-1]; start_lag_delta empty or of `count`
// entries, each lag >= 0 and latency + lag within int64; the delta sums
// stay within int64; count <= max_batch_length. A negative latency is not
// an error: the recorder counts it invalid, as a local writer's. Returns
// the batch's records (the sum of its timestamps' record counts).
absl::StatusOr<int64_t> DecodeBatch(const v1::TimestampBatch& batch, int64_t max_batch_length,
                                    runs::RemoteWindow* out);

// Report -> counters and ascending buckets for a run with bounds
// [min_bound, max_bound]. Checks: pairs columns of equal length <=
// max_pairs; latencies strictly ascending (deltas >= 1 after the first) and
// in bounds; counts >= 1 and summing to valid_latency_records; counters
// non-negative and adding up (LatencyRecorder::CheckBuckets).
absl::StatusOr<runs::RemoteWindow> DecodeWindow(const v1::WindowReport& report, int64_t max_pairs,
                                                int64_t min_bound, int64_t max_bound);

// The checks every remote window passes whatever its wire format (DecodeWindow,
// SBP records): `pairs` <= max_pairs (before decoding anything), then on the
// built window: bytes >= 0, min <= max when a latency was seen, and
// LatencyRecorder::CheckBuckets. `sequence` names the window in errors.
// A window that passes is marked checked for [min_bound, max_bound]
// (RemoteWindow::checked): the run's recorder does not check it again.
absl::Status CheckPairs(uint64_t sequence, int64_t pairs, int64_t max_pairs);
absl::Status CheckWindow(uint64_t sequence, runs::RemoteWindow& w, int64_t min_bound,
                         int64_t max_bound);

}  // namespace perld::service
