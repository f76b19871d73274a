#include "daemon/core/tsc_clock.h"

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "absl/status/status.h"
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

}  // namespace

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
      absl::StrFormat("calibrated TSC (%.4f ticks/ns), resolution %.2f ns (%d ticks)",
                      ticks_per_ns(), info.resolution_ns, step);
  return info;
}

absl::StatusOr<TscClock> TscClock::Create(int64_t window_ns) {
#if !defined(__x86_64__)
  return absl::UnimplementedError("TSC clock needs x86-64");
#else
  if (!CpuHasInvariantTsc()) {
    return absl::FailedPreconditionError("CPU lacks constant_tsc/nonstop_tsc (invariant TSC)");
  }
  if (std::string why; !KernelListsTsc(&why)) return absl::FailedPreconditionError(why);
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

}  // namespace perld
