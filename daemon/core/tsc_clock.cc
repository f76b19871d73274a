#include "daemon/core/tsc_clock.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/core/clock.h"

namespace perld {
namespace {

// Reads the TSC and the monotonic clock as close together as possible: the
// TSC sample taken mid-way between two clock readings.
void Sample(uint64_t* tsc, int64_t* ns) {
  const int64_t a = MonotonicNanos();
  *tsc = __builtin_ia32_rdtsc();
  const int64_t b = MonotonicNanos();
  *ns = a + (b - a) / 2;
}

bool CpuHasInvariantTsc() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      return line.find(" constant_tsc") != std::string::npos &&
             line.find(" nonstop_tsc") != std::string::npos;
    }
  }
  return false;
}

bool KernelListsTsc(std::string* why) {
  static const char kPath[] = "/sys/devices/system/clocksource/clocksource0/available_clocksource";
  std::ifstream in(kPath);
  std::string word;
  if (!in) {
    *why = std::string("cannot read ") + kPath;
    return false;
  }
  std::string all;
  while (in >> word) {
    if (word == "tsc") return true;
    all += (all.empty() ? "" : " ") + word;
  }
  *why = "tsc not in the kernel's available clocksources (" + all + ")";
  return false;
}

// OK on x86-64 with an invariant TSC (constant_tsc, nonstop_tsc), else why not.
absl::Status InvariantTscStatus() {
#if !defined(__x86_64__)
  return absl::UnimplementedError("TSC clock needs x86-64");
#else
  if (!CpuHasInvariantTsc()) {
    return absl::FailedPreconditionError("CPU lacks constant_tsc/nonstop_tsc (invariant TSC)");
  }
  return absl::OkStatus();
#endif
}

}  // namespace

const char* ClockSourceName(ClockSource source) {
  switch (source) {
    case ClockSource::kAuto:
      return "auto";
    case ClockSource::kTsc:
      return "tsc";
    case ClockSource::kMonotonic:
      return "monotonic";
  }
  return "auto";
}

ClockInfo MonotonicClockInfo(const std::string& why) {
  ClockInfo info;
  info.name = "monotonic";
  info.resolution_ns = static_cast<double>(SmallestStep([] { return MonotonicNanos(); }));
  info.description = absl::StrFormat("CLOCK_MONOTONIC%s, resolution %.2f ns",
                                     why.empty() ? "" : " (" + why + ")", info.resolution_ns);
  return info;
}

ClockInfo TscClock::Info() const {
  ClockInfo info;
  info.name = "tsc";
  const int64_t step = SmallestStep([] { return Ticks(); });
  info.resolution_ns = static_cast<double>(step) / ticks_per_ns();
  info.description =
      absl::StrFormat("calibrated TSC (%.4f ticks/ns), resolution %.2f ns (%d ticks)%s",
                      ticks_per_ns(), info.resolution_ns, step, forced_);
  return info;
}

absl::Status CheckCpuAgreement(const std::vector<CpuOffset>& offsets, double tolerance_ns) {
  for (size_t i = 0; i < offsets.size(); ++i) {
    for (size_t j = i + 1; j < offsets.size(); ++j) {
      const CpuOffset& a = offsets[i];
      const CpuOffset& b = offsets[j];
      const double skew = std::abs(a.offset_ns - b.offset_ns);
      if (skew - a.uncertainty_ns - b.uncertainty_ns > tolerance_ns) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "the TSC of CPU %d and CPU %d disagree by %.1f ns against CLOCK_MONOTONIC "
            "(+-%.1f ns measurement), more than the clock's resolution (%.2f ns)",
            a.cpu, b.cpu, skew, a.uncertainty_ns + b.uncertainty_ns, tolerance_ns));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TscClock> TscClock::Create(int64_t window_ns) {
  if (absl::Status s = InvariantTscStatus(); !s.ok()) return s;
  if (std::string why; !KernelListsTsc(&why)) return absl::FailedPreconditionError(why);
  return Calibrate(window_ns);
}

absl::StatusOr<TscClock> TscClock::Calibrate(int64_t window_ns) {
#if !defined(__x86_64__)
  (void)window_ns;
  return absl::UnimplementedError("TSC clock needs x86-64");
#else
  uint64_t tsc0, tsc1;
  int64_t ns0, ns1;
  Sample(&tsc0, &ns0);
  std::this_thread::sleep_for(std::chrono::nanoseconds(window_ns));
  Sample(&tsc1, &ns1);
  if (tsc1 <= tsc0 || ns1 <= ns0) return absl::InternalError("TSC did not advance");
  const unsigned __int128 mult = (static_cast<unsigned __int128>(ns1 - ns0) << 32) / (tsc1 - tsc0);
  if (mult == 0 || mult > (static_cast<unsigned __int128>(1) << 40)) {
    return absl::InternalError("implausible TSC frequency");
  }
  return TscClock(tsc1, ns1, static_cast<uint64_t>(mult));
#endif
}

namespace {

// This thread's reading on `cpu` (pinned there): the tightest of `tries`
// CLOCK_MONOTONIC intervals around an RDTSC. False when it cannot be pinned.
bool OffsetOn(const TscClock& clock, int cpu, int tries, CpuOffset* out) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) != 0) return false;
  double best_width = -1;
  for (int i = 0; i < tries; ++i) {
    const int64_t a = MonotonicNanos();
    __builtin_ia32_lfence();  // the read stays between the two (RDTSC is not ordered)
    const int64_t ticks = TscClock::Ticks();
    __builtin_ia32_lfence();
    const int64_t b = MonotonicNanos();
    const auto width = static_cast<double>(b - a);
    if (best_width < 0 || width < best_width) {
      best_width = width;
      out->cpu = cpu;
      out->offset_ns = static_cast<double>(clock.ToNanos(ticks) - a) - width / 2;
      out->uncertainty_ns = width / 2;
      out->at_ns = static_cast<double>(a) + width / 2;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<TscClock> TscClock::CreateForced(int64_t window_ns) {
  if (absl::Status s = InvariantTscStatus(); !s.ok()) return s;
#if defined(__x86_64__)
  std::string kernel = "the kernel lists it too";
  if (std::string why; !KernelListsTsc(&why)) kernel = "the kernel does not trust it: " + why;
  absl::StatusOr<TscClock> clock = Calibrate(window_ns);
  if (!clock.ok()) return clock.status();

  // Every CPU this thread may run on, right away and a window later (a TSC
  // that runs at another rate on one CPU drifts apart in between).
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (pthread_getaffinity_np(pthread_self(), sizeof(allowed), &allowed) != 0) {
    return absl::InternalError("cannot read this thread's CPU affinity");
  }
  const double tolerance = std::max(clock->Info().resolution_ns, 1.0);
  int cpus = 0;
  double skew = 0;     // the largest offset difference seen in a pass
  double reading = 0;  // the largest uncertainty of a reading
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) std::this_thread::sleep_for(std::chrono::nanoseconds(window_ns));
    // A pass takes well under a millisecond: within it the calibration's own
    // rate error (ppm) adds nothing measurable, so CPUs are compared within
    // a pass, not across passes.
    // Each CPU between two readings on the first (the reference), against
    // the reference interpolated to its time: the calibration's own rate
    // error (a few ppm) then cancels, however long the moves between CPUs
    // take on a busy host.
    std::vector<CpuOffset> offsets;
    int reference = -1;
    CpuOffset before;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &allowed)) continue;
      if (reference < 0) {
        if (!OffsetOn(*clock, cpu, 2'000, &before)) continue;
        reference = cpu;
        offsets.push_back({cpu, 0, before.uncertainty_ns, before.at_ns});
        continue;
      }
      CpuOffset o;
      CpuOffset after;
      if (!OffsetOn(*clock, cpu, 2'000, &o) || !OffsetOn(*clock, reference, 2'000, &after)) {
        continue;
      }
      const double span = after.at_ns - before.at_ns;
      const double share = span > 0 ? (o.at_ns - before.at_ns) / span : 0;
      const double expected = before.offset_ns + share * (after.offset_ns - before.offset_ns);
      o.offset_ns -= expected;  // relative to the reference at the same instant
      o.uncertainty_ns += std::max(before.uncertainty_ns, after.uncertainty_ns);
      offsets.push_back(o);
      before = after;
    }
    // NOLINTNEXTLINE(concurrency-mt-unsafe): nothing sets the environment
    if (const char* skewed = std::getenv("PERLD_TEST_TSC_SKEW_NS");
        skewed != nullptr && offsets.size() >= 2) {
      offsets.back().offset_ns += std::atof(skewed);  // the refusal, tested end to end
    }
    cpus = static_cast<int>(offsets.size());
    absl::Status agree = CheckCpuAgreement(offsets, tolerance);
    if (!agree.ok()) {
      pthread_setaffinity_np(pthread_self(), sizeof(allowed), &allowed);
      return absl::FailedPreconditionError(
          absl::StrCat("refused: ", agree.message(), pass == 1 ? " (drifted apart)" : ""));
    }
    for (const CpuOffset& a : offsets) {
      reading = std::max(reading, a.uncertainty_ns);
      for (const CpuOffset& b : offsets) skew = std::max(skew, a.offset_ns - b.offset_ns);
    }
  }
  pthread_setaffinity_np(pthread_self(), sizeof(allowed), &allowed);
  clock->forced_ = absl::StrFormat(
      "; FORCED by clock: tsc (%s; %d CPUs agree with CLOCK_MONOTONIC: offsets %.1f ns apart, "
      "each read to +-%.1f ns)",
      kernel, cpus, skew, reading);
  return clock;
#else
  (void)window_ns;
  return absl::UnimplementedError("TSC clock needs x86-64");
#endif
}

}  // namespace perld
