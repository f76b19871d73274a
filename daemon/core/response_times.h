// RecordBothViews: the two views of a rate-controlled run's paced timestamps
// (issue 30), kept in step. Each timestamp is recorded as service time
// (end - start) into the run's windows and again, timed from its intended
// start (its slot: end - intended), into the response view's windows, and
// its start lag (start - intended) is tallied for the schedule. The
// daemon's recorder (RunRecorder) and the client library's local sink share
// it, so both views of an operation are the same records.
//
// Aligned windows: the views record in lockstep chunks of
// PeriodicAndTotalWindows::kFullCheckInterval timestamps and apply the
// IsFull policy together (FullClose::kCaller): when either periodic window
// is full after a chunk, both close early at the same instant. So the
// views' periodic windows always close at the same instants, with the same
// operations in each pair (a response window is usually the wider one:
// every start lag adds a distinct latency).
//
// Pure functions of their arguments; the caller's thread owns the windows
// and `tally` (the recorder thread, or the client's).
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

// Records batch[0, n) into `service` and end - intended[i] into `response`
// at `now` (in lockstep chunks of a fixed stack buffer; no allocation),
// closing both periodic windows when either is full (CloseBothIfFull); if
// `tally` is not null, adds each start lag to it, late when above
// `late_threshold`. `intended` null: the operations have no slot (closed
// loop), so their response time is their service time (the same timestamps
// go to `response`, no copy) and their lag 0.
void RecordBothViews(PeriodicAndTotalWindows& service, PeriodicAndTotalWindows& response,
                     const TimeStamp* batch, const int64_t* intended, size_t n, int64_t now,
                     int64_t late_threshold, LagTally* tally);

// Closes both periodic windows early at `now` (CloseFull) when either is
// full. For views fed with FullClose::kCaller (merged remote windows),
// after every merge.
void CloseBothIfFull(PeriodicAndTotalWindows& a, PeriodicAndTotalWindows& b, int64_t now);

}  // namespace perld
