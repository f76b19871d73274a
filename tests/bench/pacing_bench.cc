// pacing_bench: how close to its slot a rate-controlled worker starts, what
// its wait costs, and the floor of this host (issue 30's goal: the schedule
// error within the clock's resolution plus a few µs at p99, no burnt core).
// A command, not a Google Benchmark; results in tests/bench/DAEMON.md.
//
// One thread runs the same absolute schedule (slot i at t0 + (i + 1) *
// period) with three waits, alternating in rounds:
//   worker  bench::PaceUntil, the wait every paced PerlBench worker uses
//           (daemon/bench/pace_until.h: sleep, yield, spin);
//   nyield  the same without the yield phase (sleep to 100 µs before the
//           slot, then spin): what giving the CPU away costs;
//   spin    a pure busy wait on the clock from slot to slot: a whole core,
//           and the best schedule error any wait can reach on this host
//           (what remains is preemption and the hypervisor).
// Per wait: the thread's CPU time as % of one core, and the schedule error
// (clock reading when the wait returned minus the slot) percentiles.
//
//   pacing_bench [--rate 1000] [--seconds 5] [--rounds 3] [--clock auto|tsc|monotonic]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "daemon/bench/bench_clock.h"
#include "daemon/bench/pace_until.h"
#include "daemon/core/cpu_relax.h"

namespace {

using perld::bench::BenchClock;

// The clock a worker reads: NowNanos() on the run's time base.
struct Clock {
  const BenchClock* clock;
  int64_t NowNanos() const { return clock->NowNanos(); }
};

void WaitNoYield(const Clock& clock, int64_t due_ns) {
  for (;;) {
    const int64_t ahead = due_ns - clock.NowNanos();
    if (ahead <= 0) return;
    if (ahead > 200'000) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(ahead - 100'000));
    } else {
      perld::CpuRelax();
    }
  }
}

void Spin(const Clock& clock, int64_t due_ns) {
  while (clock.NowNanos() < due_ns) perld::CpuRelax();
}

int64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct Result {
  int64_t cpu_ns = 0;
  int64_t wall_ns = 0;
  std::vector<int64_t> errors;  // per slot: return time - slot, ns
};

template <class Wait>
void Round(const Clock& clock, double rate, double seconds, Wait&& wait, Result* out) {
  const double period = 1e9 / rate;
  const auto slots = static_cast<int64_t>(rate * seconds);
  const int64_t cpu0 = ThreadCpuNs();
  const int64_t t0 = clock.NowNanos();
  for (int64_t i = 0; i < slots; ++i) {
    const int64_t due = t0 + static_cast<int64_t>(static_cast<double>(i + 1) * period);
    wait(due);
    out->errors.push_back(clock.NowNanos() - due);
  }
  out->wall_ns += clock.NowNanos() - t0;
  out->cpu_ns += ThreadCpuNs() - cpu0;
}

// Nearest rank on the sorted errors.
int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto i = static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size() - 1));
  return sorted[i];
}

void Print(const char* name, Result r) {
  std::sort(r.errors.begin(), r.errors.end());
  std::printf("| %-6s | %5.2f%% | %8lld | %8lld | %8lld | %9lld |\n", name,
              100.0 * static_cast<double>(r.cpu_ns) / static_cast<double>(r.wall_ns),
              static_cast<long long>(Percentile(r.errors, 50)),
              static_cast<long long>(Percentile(r.errors, 99)),
              static_cast<long long>(Percentile(r.errors, 99.9)),
              static_cast<long long>(Percentile(r.errors, 100)));
}

}  // namespace

int main(int argc, char** argv) {
  double rate = 1000;
  double seconds = 5;
  int rounds = 3;
  std::string clock_name = "auto";
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "pacing_bench: %s needs a value\n", argv[i]);
      return 2;
    }
    if (std::strcmp(argv[i], "--rate") == 0) {
      rate = std::atof(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--seconds") == 0) {
      seconds = std::atof(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--rounds") == 0) {
      rounds = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--clock") == 0) {
      clock_name = argv[i + 1];
    } else {
      std::fprintf(stderr,
                   "usage: pacing_bench [--rate N] [--seconds S] [--rounds R] "
                   "[--clock auto|tsc|monotonic]\n");
      return 2;
    }
  }
  if (!(rate > 0) || !(seconds > 0) || rounds < 1) {
    std::fprintf(stderr, "pacing_bench: --rate, --seconds and --rounds must be positive\n");
    return 2;
  }
  perld::ClockSource source = perld::ClockSource::kAuto;
  if (clock_name == "tsc") {
    source = perld::ClockSource::kTsc;
  } else if (clock_name == "monotonic") {
    source = perld::ClockSource::kMonotonic;
  } else if (clock_name != "auto") {
    std::fprintf(stderr, "pacing_bench: --clock auto|tsc|monotonic, not '%s'\n",
                 clock_name.c_str());
    return 2;
  }
  auto chosen = perld::bench::ChooseBenchClock(source);
  if (!chosen.ok()) {
    std::fprintf(stderr, "pacing_bench: %s\n", std::string(chosen.status().message()).c_str());
    return 1;
  }
  const Clock clock{chosen->get()};
  Result worker;
  Result no_yield;
  Result spin;
  for (int r = 0; r < rounds; ++r) {
    Round(
        clock, rate, seconds, [&](int64_t due) { perld::bench::PaceUntil(clock, due, 0); },
        &worker);
    Round(
        clock, rate, seconds, [&](int64_t due) { WaitNoYield(clock, due); }, &no_yield);
    Round(
        clock, rate, seconds, [&](int64_t due) { Spin(clock, due); }, &spin);
  }
  std::printf("clock: %s\nrate %.0f slots/s, %d rounds of %.1f s each, alternating\n\n",
              (*chosen)->info().description.c_str(), rate, rounds, seconds);
  std::printf("| wait | CPU (%% of a core) | error p50 ns | p99 ns | p99.9 ns | max ns |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  Print("worker", std::move(worker));
  Print("nyield", std::move(no_yield));
  Print("spin", std::move(spin));
  return 0;
}
