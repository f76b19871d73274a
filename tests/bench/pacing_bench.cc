// pacing_bench: what a rate-controlled worker's wait between slots costs and
// how close to its slot it starts (issue 30's goal: no burnt core at low
// rates; the schedule error within the clock's resolution plus a few µs at
// p99). A command, not a Google Benchmark: tests/bench/PACING.md.
//
// It runs the same absolute schedule (slot i at t0 + (i + 1) * period) on one
// thread with two waiters, alternating in rounds: `before`, the wait the
// workers used until 2026-12-06 (sleep until 100 µs before the slot when more
// than 200 µs ahead, sched_yield down to 20 µs, then spin), kept here as the
// baseline; and `pacer`, bench::Pacer (daemon/bench/pacer.h). Per waiter:
// the thread's CPU time over the rounds as % of one core, and the schedule
// error (clock reading when the wait returned minus the slot) percentiles.
//
//   pacing_bench [--rate 1000] [--seconds 5] [--rounds 3] [--clock tsc|monotonic]
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
#include "daemon/bench/pacer.h"
#include "daemon/core/cpu_relax.h"

namespace {

using perld::bench::BenchClock;

// The clock a worker reads: NowNanos() on the run's time base.
struct Clock {
  const BenchClock* clock;
  int64_t NowNanos() const { return clock->NowNanos(); }
};

// The workers' wait before the Pacer (perlbench_worker.cc until 2026-12-06).
void WaitBefore(const Clock& clock, int64_t due_ns) {
  for (;;) {
    const int64_t ahead = due_ns - clock.NowNanos();
    if (ahead <= 0) return;
    if (ahead > 200'000) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(ahead - 100'000));
    } else if (ahead > 20'000) {
      std::this_thread::yield();
    } else {
      perld::CpuRelax();
    }
  }
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

double Percentile(std::vector<int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1));
  return static_cast<double>(v[i]);
}

void Print(const char* name, const Result& r) {
  std::printf("| %-6s | %5.2f%% | %8.0f | %8.0f | %8.0f | %9.0f |\n", name,
              100.0 * static_cast<double>(r.cpu_ns) / static_cast<double>(r.wall_ns),
              Percentile(r.errors, 50), Percentile(r.errors, 99), Percentile(r.errors, 99.9),
              Percentile(r.errors, 100));
}

}  // namespace

int main(int argc, char** argv) {
  double rate = 1000;
  double seconds = 5;
  int rounds = 3;
  std::string clock_name = "auto";
  for (int i = 1; i + 1 < argc; i += 2) {
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
  if (rate <= 0 || seconds <= 0 || rounds < 1) {
    std::fprintf(stderr, "pacing_bench: --rate, --seconds and --rounds must be positive\n");
    return 2;
  }
  const perld::ClockSource source = clock_name == "tsc"         ? perld::ClockSource::kTsc
                                    : clock_name == "monotonic" ? perld::ClockSource::kMonotonic
                                                                : perld::ClockSource::kAuto;
  auto chosen = perld::bench::ChooseBenchClock(source);
  if (!chosen.ok()) {
    std::fprintf(stderr, "pacing_bench: %s\n", std::string(chosen.status().message()).c_str());
    return 1;
  }
  const Clock clock{chosen->get()};
  Result before;
  Result pacer;
  for (int r = 0; r < rounds; ++r) {
    Round(
        clock, rate, seconds, [&](int64_t due) { WaitBefore(clock, due); }, &before);
    perld::bench::Pacer<Clock> p(clock);
    Round(
        clock, rate, seconds, [&](int64_t due) { p.WaitUntil(due); }, &pacer);
  }
  std::printf("clock: %s\nrate %.0f slots/s, %d rounds of %.1f s each, alternating\n\n",
              (*chosen)->info().description.c_str(), rate, rounds, seconds);
  std::printf("| waiter | CPU (%% of a core) | error p50 ns | p99 ns | p99.9 ns | max ns |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  Print("before", before);
  Print("pacer", pacer);
  return 0;
}
