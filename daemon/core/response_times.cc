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
    // Without slots (closed loop) the response view records the same
    // timestamps, every lag 0. Plain accumulators, folded into the tally once.
    const TimeStamp* timed = batch + done;
    int64_t lo = 0;
    int64_t hi = 0;
    int64_t sum = 0;
    int64_t late = 0 > late_threshold ? static_cast<int64_t>(m) : 0;
    if (intended != nullptr) {
      lo = INT64_MAX;
      hi = INT64_MIN;
      late = 0;
      for (size_t i = 0; i < m; ++i) {
        const TimeStamp& t = batch[done + i];
        const int64_t slot = intended[done + i];
        const int64_t lag = t.start - slot;
        lo = std::min(lo, lag);
        hi = std::max(hi, lag);
        sum += lag;
        late += lag > late_threshold ? 1 : 0;
        timed_from_slot[i] = TimeStamp{slot, t.end, t.records, t.bytes};
      }
      timed = timed_from_slot;
    }
    if (tally != nullptr) {
      tally->min_lag = tally->operations == 0 ? lo : std::min(tally->min_lag, lo);
      tally->max_lag = tally->operations == 0 ? hi : std::max(tally->max_lag, hi);
      tally->total_lag += sum;
      tally->late += late;
      tally->operations += static_cast<int64_t>(m);
    }
    response.RecordBatch(timed, m, now, FullClose::kCaller);
    CloseBothIfFull(service, response, now);
    done += m;
  }
}

void CloseBothIfFull(PeriodicAndTotalWindows& a, PeriodicAndTotalWindows& b, int64_t now) {
  if (!a.PeriodicFull() && !b.PeriodicFull()) return;
  a.CloseFull(now);
  b.CloseFull(now);
}

}  // namespace perld
