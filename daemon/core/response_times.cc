#include "daemon/core/response_times.h"

#include <algorithm>
#include <iterator>

namespace perld {

void RecordBothViews(PeriodicAndTotalWindows& service, PeriodicAndTotalWindows& response,
                     const TimeStamp* batch, const int64_t* intended, size_t n, int64_t now,
                     int64_t late_threshold, LagTally* tally) {
  using FullClose = PeriodicAndTotalWindows::FullClose;
  TimeStamp timed_from_slot[PeriodicAndTotalWindows::kFullCheckInterval];
  for (size_t done = 0; done < n;) {
    const size_t m = std::min(n - done, std::size(timed_from_slot));
    service.RecordBatch(batch + done, m, now, FullClose::kCaller);
    // Plain accumulators over the chunk, folded into the tally once.
    int64_t lo = INT64_MAX;
    int64_t hi = INT64_MIN;
    int64_t sum = 0;
    int64_t late = 0;
    for (size_t i = 0; i < m; ++i) {
      const TimeStamp& t = batch[done + i];
      const int64_t slot = intended != nullptr ? intended[done + i] : t.start;
      const int64_t lag = t.start - slot;
      lo = std::min(lo, lag);
      hi = std::max(hi, lag);
      sum += lag;
      late += lag > late_threshold ? 1 : 0;
      timed_from_slot[i] = TimeStamp{slot, t.end, t.records, t.bytes};
    }
    if (tally != nullptr) {
      tally->min_lag = tally->operations == 0 ? lo : std::min(tally->min_lag, lo);
      tally->max_lag = tally->operations == 0 ? hi : std::max(tally->max_lag, hi);
      tally->total_lag += sum;
      tally->late += late;
      tally->operations += static_cast<int64_t>(m);
    }
    response.RecordBatch(timed_from_slot, m, now, FullClose::kCaller);
    CloseBothIfFull(service, response, now);
    done += m;
  }
}

bool CloseBothIfFull(PeriodicAndTotalWindows& a, PeriodicAndTotalWindows& b, int64_t now) {
  if (!a.PeriodicFull() && !b.PeriodicFull()) return false;
  a.CloseFull(now);
  b.CloseFull(now);
  return true;
}

}  // namespace perld
