#include "daemon/bench/bench_clock.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace perld::bench {

absl::StatusOr<std::unique_ptr<BenchClock>> ChooseBenchClock(ClockSource source) {
  switch (source) {
    case ClockSource::kMonotonic:
      return std::make_unique<BenchClock>(std::nullopt, "clock: monotonic");
    case ClockSource::kTsc: {
      absl::StatusOr<TscClock> tsc = TscClock::CreateForced();
      if (!tsc.ok()) {
        return absl::FailedPreconditionError(absl::StrCat("clock tsc: ", tsc.status().message()));
      }
      return std::make_unique<BenchClock>(*std::move(tsc));
    }
    case ClockSource::kAuto:
      break;
  }
  absl::StatusOr<TscClock> tsc = TscClock::Create();
  if (!tsc.ok()) {
    return std::make_unique<BenchClock>(std::nullopt,
                                        absl::StrCat("TSC not used: ", tsc.status().message()));
  }
  return std::make_unique<BenchClock>(*std::move(tsc));
}

absl::StatusOr<const BenchClock*> BenchClocks::Get(ClockSource source) {
  MutexLock lock(mu_);
  auto it = made_.find(source);
  if (it == made_.end()) it = made_.emplace(source, ChooseBenchClock(source)).first;
  if (!it->second.ok()) return it->second.status();
  return it->second->get();
}

}  // namespace perld::bench
