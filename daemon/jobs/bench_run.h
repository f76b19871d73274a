// RunBench: one in-process PerlBench run, end to end: workers -> clock ->
// timestamp channels -> the single recorder thread -> periodic and total exact
// windows -> SBK-style console lines and CSV rows.
//
// Threads: the caller's thread orchestrates and does all printing; workers and
// the recorder thread run inside. Reports cross from the recorder thread to
// the caller through a mutex-guarded list, once per interval (never per record).
#pragma once

#include <atomic>
#include <cstdint>
#include <ostream>

#include "absl/status/statusor.h"
#include "daemon/bench/bench_options.h"
#include "daemon/core/latency_snapshot.h"

namespace perld::jobs {

struct BenchResult {
  LatencySnapshot total;         // the whole-run window (after the warm-up, if any)
  int64_t warmup_records = 0;    // records of the warm-up, left out of `total`
  int64_t requested = 0;         // exact mode: records asked for; else 0
  int64_t attempted = 0;         // operations the workers ran
  int64_t dropped = 0;           // timestamps discarded by --overflow drop
  int64_t blocked = 0;           // sends that waited at the pending bound
  int64_t windows_reported = 0;  // interval lines printed (not counting Total)
  double seconds = 0;            // run wall time
  int64_t peak_rss_kb = 0;
  int exit_code = 1;  // 0 only when the run is complete and exact
};

// Runs the benchmark. Prints startup lines, interval lines and the total to
// `out`, progress and errors to `err`. `stop` (may be null) ends the run early
// when set from another thread (e.g. SIGINT). Returns an error only if the run
// could not start (bad topology, CSV file not writable, ...).
absl::StatusOr<BenchResult> RunBench(const bench::BenchOptions& options, std::ostream& out,
                                     std::ostream& err, const std::atomic<bool>* stop = nullptr);

}  // namespace perld::jobs
