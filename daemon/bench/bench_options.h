// BenchOptions: the `perld bench` command line, parsed with SBK's spellings
// (`-writers 4`) and GNU long forms (`--writers 4`, `--writers=4`), so an SBK
// user's PerlBench command line works unchanged.
//
// Modes (SBK semantics):
//   * exact:  -records N without -seconds. N is split across workers, the first
//             N % workers workers take one extra record; the run waits until
//             every timestamp has been consumed.
//   * timed:  -seconds S (with -throughput -1, the default): saturation with a
//             hard deadline; -records, if also given, caps each worker.
//   * rate:   -throughput MBPS > 0: each worker is paced at
//             MBPS * 2^20 / size / workers records per second (1 MB = 2^20 B),
//             its slots phase-offset so the workers together are evenly
//             spaced; the run keeps service and response time (issue 30).
// ParseBenchArgs never exits or prints: it returns InvalidArgument naming the
// bad option, and the caller prints it with the usage text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/clock.h"
#include "daemon/core/latency_config.h"
#include "daemon/core/timestamp_channels.h"

namespace perld::bench {

using ClockSource = ::perld::ClockSource;  // daemon/core/clock.h
enum class BenchMode { kExact, kTimed, kRate };
// Rate mode after a stall: run the missed slots late, as fast as possible
// (burst), or drop them and count them (skip: never sent late).
enum class Catchup { kBurst, kSkip };

struct BenchOptions {
  int writers = 0;
  int readers = 0;
  int32_t size = 0;     // bytes per record
  int64_t records = 0;  // 0: not given
  double seconds = 0;   // 0: not given
  double throughput_mbps = -1;
  TimeUnit time_unit = TimeUnit::kMs;  // SBK default
  std::optional<int64_t> min_latency;  // in time_unit; default from LatencyConfig
  std::optional<int64_t> max_latency;
  std::string csv_file;         // empty: no CSV
  int64_t interval_ms = 5'000;  // -interval S: fractions down to 0.01 s (the daemon's 10 ms)
  // -warmup S (timed runs): the run's total leaves out its first S seconds
  // (a window is cut there; the warm-up's windows stay in the history).
  int64_t warmup_ms = 0;
  ChannelOptions channels;   // -mpscqueue, --maxQs, --qPerWorker, --maxPendingPerWorker, --overflow
  int64_t idle_ns = 10'000;  // --idleNS: recorder's first park
  ClockSource clock = ClockSource::kAuto;
  Catchup catchup = Catchup::kBurst;  // -catchup burst|skip (rate mode)
  int64_t late_us = 1'000;            // -lateUs: later than this after its slot is late
  std::optional<bool> progress;       // --progress true|false; default: when stderr is a TTY
  // -context [HOST:]PORT/PATH: Prometheus metrics during the run; "no" (default) disables.
  bool metrics = false;
  std::string metrics_host = "127.0.0.1";  // loopback unless HOST is given
  int metrics_port = 0;                    // 0: an ephemeral port
  std::string metrics_path = "/metrics";   // always starts with '/'
  bool help = false;

  BenchMode mode() const {
    if (throughput_mbps > 0) return BenchMode::kRate;
    return seconds > 0 ? BenchMode::kTimed : BenchMode::kExact;
  }
  int workers() const { return writers + readers; }
};

// Parses argv (without the program name and the "bench" word).
absl::StatusOr<BenchOptions> ParseBenchArgs(const std::vector<std::string>& args);

// The usage text printed for --help and after a usage error.
std::string BenchUsage();

}  // namespace perld::bench
