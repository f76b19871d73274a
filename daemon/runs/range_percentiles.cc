#include "daemon/runs/range_percentiles.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/distribution_merge.h"
#include "daemon/core/run_total.h"

namespace perld::runs {

absl::StatusOr<RangeAnswer> RangePercentiles(RunId run, std::span<const WindowRecord> windows,
                                             int64_t first_asked, const PercentileSet& set,
                                             std::vector<LatencyBucket>* merged_out) {
  if (windows.empty()) {
    return absl::OutOfRangeError(
        absl::StrCat("run ", run, " has no closed periodic window in the range"));
  }
  if (first_asked > 0 && windows.front().seq > first_asked) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run, ": windows ", first_asked, "-", windows.front().seq - 1,
                     " are no longer stored (retention.maxWindowsPerRun); the oldest is window ",
                     windows.front().seq));
  }
  RangeAnswer answer;
  std::vector<std::span<const LatencyBucket>> distributions;
  distributions.reserve(windows.size());
  for (size_t i = 0; i < windows.size(); ++i) {
    const WindowRecord& w = windows[i];
    if (i > 0 && w.seq != windows[i - 1].seq + 1) {
      return absl::FailedPreconditionError(absl::StrCat("run ", run, ": windows ",
                                                        windows[i - 1].seq + 1, "-", w.seq - 1,
                                                        " of the range are not stored"));
    }
    if (w.snapshot.valid > 0 && w.distribution.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "run ", run, ": window ", w.seq,
          " was stored without its distribution (the run reached "
          "retention.maxWindowDistributionBytesPerRun, or the window predates stored window "
          "distributions), so no exact answer covers it; choose a range without it"));
    }
    if (i == 0) {
      answer.snapshot = w.snapshot;
    } else {
      answer.snapshot.AddCountersOf(w.snapshot);
    }
    answer.seconds += w.seconds;
    distributions.emplace_back(w.distribution);
  }
  std::vector<LatencyBucket> merged = MergeDistributions(distributions);
  int64_t valid = 0;
  for (const LatencyBucket& b : merged) valid += b.count;
  if (valid != answer.snapshot.valid) {
    return absl::DataLossError(absl::StrCat(
        "run ", run, ": the stored distributions of windows ", windows.front().seq, "-",
        windows.back().seq, " hold ", valid, " latencies, their counters ", answer.snapshot.valid));
  }
  answer.snapshot.closed_full = false;
  FillPercentiles(set, merged, &answer.snapshot);
  answer.first_window = windows.front().seq;
  answer.last_window = windows.back().seq;
  answer.windows = static_cast<int64_t>(windows.size());
  answer.start_unix_ms = windows.front().start_unix_ms;
  answer.end_unix_ms = windows.back().end_unix_ms;
  if (merged_out != nullptr) *merged_out = std::move(merged);
  return answer;
}

}  // namespace perld::runs
