// RecordResponseTimes: the response-time side of paced timestamps (a
// rate-controlled run, issue 30). Each timestamp is recorded again, timed
// from its intended start (its slot: end - intended) instead of its actual
// start, and its start lag (start - intended) is tallied for the schedule.
// The daemon's recorder (RunRecorder::AcceptPaced) and the client library's
// local sink share it, so both views of an operation are the same records.
//
// Pure function of its arguments; the caller's thread owns `windows` and
// `tally` (the recorder thread, or the client's).
#pragma once

#include <cstddef>
#include <cstdint>

#include "daemon/core/periodic_and_total_windows.h"
#include "daemon/core/time_stamp.h"

namespace perld {

// Start lags of the operations recorded so far (since the caller last
// reset it). min_lag/max_lag are meaningful once operations > 0.
struct LagTally {
  int64_t operations = 0;
  int64_t late = 0;  // lag > the late threshold
  int64_t min_lag = 0;
  int64_t max_lag = 0;
  int64_t total_lag = 0;
};

// Records end - intended[i] of batch[0, n) into `windows` at `now` (in
// chunks of a fixed stack buffer; no allocation) and, if `tally` is not
// null, adds each start lag to it, late when above `late_threshold`.
// `intended` null: the operations have no slot (closed loop), so their
// response time is their service time and their lag 0.
void RecordResponseTimes(PeriodicAndTotalWindows& windows, const TimeStamp* batch,
                         const int64_t* intended, size_t n, int64_t now, int64_t late_threshold,
                         LagTally* tally);

}  // namespace perld
