// BenchClock: the clock a run times its operations with -- the calibrated TSC
// (owned) or CLOCK_MONOTONIC, with its ClockInfo (name, effective resolution
// measured once at construction, and a description that says why a fallback
// was taken or that the TSC was forced). ChooseBenchClock makes the one a
// ClockSource (daemon/core/clock.h) asks for.
//
// BenchClocks: the daemon's clocks by ClockSource, each made on first use and
// kept (a TSC calibration takes ~20 ms, a forced TSC's cross-CPU check ~40 ms
// more), refusals included: the hardware does not change while perld runs.
//
// Threads: a BenchClock is immutable (NowNanos from any thread; it must not
// move while a worker uses it: BenchClocks hands out stable pointers).
// BenchClocks is thread-safe (creation under its mutex).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "daemon/common/mutex.h"
#include "daemon/core/clock.h"
#include "daemon/core/tsc_clock.h"

namespace perld::bench {

class BenchClock {
 public:
  // `tsc` empty: CLOCK_MONOTONIC, `why_not_tsc` saying why.
  explicit BenchClock(std::optional<TscClock> tsc, const std::string& why_not_tsc = "")
      : tsc_(std::move(tsc)), info_(tsc_ ? tsc_->Info() : MonotonicClockInfo(why_not_tsc)) {}
  int64_t NowNanos() const { return tsc_ ? tsc_->NowNanos() : MonotonicNanos(); }
  const TscClock* tsc() const { return tsc_ ? &*tsc_ : nullptr; }
  const ClockInfo& info() const { return info_; }
  // A TSC forced by `clock: tsc` (said loudly: a warning in the daemon's log).
  bool forced() const { return tsc_ && tsc_->forced(); }

 private:
  std::optional<TscClock> tsc_;
  ClockInfo info_;
};

// auto: TscClock::Create, else CLOCK_MONOTONIC with the reason; tsc:
// TscClock::CreateForced or its refusal (FailedPrecondition "clock tsc: ...");
// monotonic: CLOCK_MONOTONIC ("clock monotonic" as the reason).
absl::StatusOr<std::unique_ptr<BenchClock>> ChooseBenchClock(ClockSource source);

class BenchClocks {
 public:
  // The clock for `source`, made on first use; the same refusal every time.
  absl::StatusOr<const BenchClock*> Get(ClockSource source);

 private:
  Mutex mu_;
  std::map<ClockSource, absl::StatusOr<std::unique_ptr<BenchClock>>> made_ ABSL_GUARDED_BY(mu_);
};

}  // namespace perld::bench
