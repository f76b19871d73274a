#include "daemon/bench/bench_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/host_port.h"

namespace perld::bench {
namespace {

absl::Status Bad(const std::string& option, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("option -", option, ": ", why));
}

absl::StatusOr<int64_t> ParseInt(const std::string& option, const std::string& text, int64_t lo,
                                 int64_t hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    return Bad(option, absl::StrCat("'", text, "' is not an integer"));
  }
  if (v < lo || v > hi) {
    return Bad(option, absl::StrCat(v, " is out of range [", lo, ", ", hi, "]"));
  }
  return static_cast<int64_t>(v);
}

absl::StatusOr<double> ParseDouble(const std::string& option, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) {
    return Bad(option, absl::StrCat("'", text, "' is not a number"));
  }
  return v;
}

absl::StatusOr<bool> ParseBool(const std::string& option, const std::string& text) {
  if (text == "true") return true;
  if (text == "false") return false;
  return Bad(option, absl::StrCat("'", text, "' must be true or false"));
}

// -context: "no", or [HOST:]PORT/PATH (SBK's PORT/PATH; HOST binds another
// interface, e.g. 0.0.0.0 or [::1]).
absl::Status ParseContext(const std::string& option, const std::string& text, BenchOptions* o) {
  if (text == "no") {
    o->metrics = false;
    return absl::OkStatus();
  }
  const std::string usage = absl::StrCat("'", text, "' must be no or [HOST:]PORT/PATH");
  const size_t slash = text.find('/');
  if (slash == std::string::npos || slash + 1 >= text.size()) return Bad(option, usage);
  absl::StatusOr<common::HostPort> address = common::SplitHostPort(text.substr(0, slash));
  // No port after a bracketed host, or an IPv6 host without its brackets.
  if (!address.ok() || (!address->has_port &&
                        (address->bracketed || address->host.find(':') != std::string::npos))) {
    return Bad(option, usage);
  }
  std::string host = o->metrics_host;
  std::string port_text = address->host;  // PORT alone
  if (address->has_port) {
    host = address->host;
    port_text = address->port;
    if (host.empty()) return Bad(option, usage);
  }
  absl::StatusOr<int64_t> port = ParseInt(option, port_text, 0, 65535);
  if (!port.ok()) return port.status();
  o->metrics = true;
  o->metrics_host = host;
  o->metrics_port = static_cast<int>(*port);
  o->metrics_path = text.substr(slash);  // keeps the leading '/'
  return absl::OkStatus();
}

// What SBK's options that PerlBench does not take become in perld: a user
// with SBK habits gets the way, not just "unknown option". Null: not SBK's.
const char* SbkOptionHint(const std::string& name) {
  static const std::map<std::string, const char*> kHints = {
      {"out",
       "perld prints SBK's window lines itself; -csvfile PATH writes CSV, -context PORT/PATH "
       "serves Prometheus metrics, and the daemon keeps every run (perlctl show, history)"},
      {"ram",
       "perld is the aggregator (SBM, once SBK-RAM): run SBK clients with -out GrpcLogger -sbm "
       "HOST -sbmport 9717, or stream this host's load with perlctl load --target HOST:9717"},
      {"ramport",
       "perld's gRPC port is --grpc-listen (default 9717): SBK clients name it with -sbmport"},
      {"sync",
       "PerlBench's writes complete at once: there is nothing to flush; -size sets the bytes "
       "per record"},
      {"wstep",
       "no stepped ramp-up: start perlctl load clients into one run (--run NAME) when "
       "you want more writers"},
      {"wsec",
       "no stepped ramp-up: start perlctl load clients into one run (--run NAME) when "
       "you want more writers"},
      {"rstep",
       "no stepped ramp-up: start perlctl load clients into one run (--run NAME) when "
       "you want more readers"},
      {"rsec",
       "no stepped ramp-up: start perlctl load clients into one run (--run NAME) when "
       "you want more readers"},
      {"ro",
       "PerlBench's readers and writers are independent: -readers N alone benchmarks "
       "reads"},
      {"millisecsleep", "the recorder's idle wait is --idleNS N (nanoseconds, default 10000)"},
      {"thread", "PerlBench's workers are native threads: there is no thread type to choose"},
  };
  const auto it = kHints.find(name);
  return it == kHints.end() ? nullptr : it->second;
}

}  // namespace

std::string BenchUsage() {
  return R"(usage: perld bench [options]   (SBK spellings: -name value; also --name value, --name=value)
  -writers N          writer workers (write completes immediately)
  -readers N          reader workers (return a preallocated payload)
  -size BYTES         bytes per record (default 0)
  -records N          exact mode: record exactly N in total; with -seconds: per-run cap
  -seconds S          timed mode: stop at a hard deadline after S seconds
  -throughput MBPS    -1 (default): saturation; > 0: rate-controlled MB/s (1 MB = 2^20 B):
                      the run keeps response time (from each operation's slot) and
                      service time (from its actual start), both exact
  -catchup burst|skip rate mode after a stall: run the missed slots late as fast as
                      possible (burst, default) or drop and count them (skip)
  -lateUs N           rate mode: an operation starting more than N us after its slot
                      counts as late (default 1000)
  -time ms|mcs|ns     latency time unit (default ms)
  -minlatency N       lowest recorded latency in the time unit (default 0)
  -maxlatency N       highest recorded latency in the time unit (default 180000 ms)
  -mpscqueue B        true (default): intrusive MPSC queue; false: library queue baseline
  --mpscVariant V     batch (default): batch nodes; record: the per-record intrusive queue
  -csvfile PATH       also write SBK-layout CSV rows to PATH ('no' disables; default no)
  -interval S         reporting interval in seconds, fractions down to 0.01 (default 5)
  -warmup S           timed runs: leave the first S seconds out of the run's total (a window
                      is cut there; the warm-up's windows stay in the history)
  -class perlbench    accepted for SBK compatibility (perlbench is the only class)
  -context PORT/PATH  serve Prometheus metrics at http://127.0.0.1:PORT/PATH during the run
                      ('no' disables; default no); HOST:PORT/PATH binds another interface
  --maxQs N           0 (default): per-worker queues; N > 0: N queues shared by all workers
  --qPerWorker N      queues per worker when maxQs is 0 (default 10)
  --maxPendingPerWorker N  pending-timestamp bound per worker (default 65536)
  --overflow block|drop    policy at the bound (default block); drops are counted
  --idleNS N          recorder's first idle park in ns (default 10000)
  --clock auto|tsc|monotonic  timestamp clock (auto: calibrated TSC when invariant)
  --progress B        live progress line on stderr (default: when stderr is a terminal)
  -help               this text
Exit status: 0 on success; in exact mode only if every requested record was recorded
with zero invalid latencies and zero drops; 2 on a usage error; 1 otherwise.
)";
}

absl::StatusOr<BenchOptions> ParseBenchArgs(const std::vector<std::string>& args) {
  BenchOptions o;
  std::set<std::string> seen;
  using Setter = std::function<absl::Status(const std::string& name, const std::string& value)>;
  auto set_int = [](auto* field, int64_t lo, int64_t hi) -> Setter {
    return [=](const std::string& name, const std::string& v) {
      absl::StatusOr<int64_t> n = ParseInt(name, v, lo, hi);
      if (!n.ok()) return n.status();
      *field = static_cast<std::remove_pointer_t<decltype(field)>>(*n);
      return absl::OkStatus();
    };
  };
  std::optional<int64_t> min_latency, max_latency;
  auto set_optional = [](std::optional<int64_t>* field) -> Setter {
    return [=](const std::string& name, const std::string& v) {
      absl::StatusOr<int64_t> n = ParseInt(name, v, 0, INT64_MAX / 4);
      if (!n.ok()) return n.status();
      *field = *n;
      return absl::OkStatus();
    };
  };
  const std::map<std::string, Setter> options = {
      {"writers", set_int(&o.writers, 0, 1024)},
      {"readers", set_int(&o.readers, 0, 1024)},
      {"size", set_int(&o.size, 0, INT32_MAX)},
      {"records", set_int(&o.records, 1, INT64_MAX / 2)},
      {"seconds",
       [&](const std::string& name, const std::string& v) {
         absl::StatusOr<double> s = ParseDouble(name, v);
         if (!s.ok()) return s.status();
         if (*s <= 0 || *s > 365.0 * 86400) return Bad(name, "must be > 0 and at most a year");
         o.seconds = *s;
         return absl::OkStatus();
       }},
      {"throughput",
       [&](const std::string& name, const std::string& v) {
         absl::StatusOr<double> t = ParseDouble(name, v);
         if (!t.ok()) return t.status();
         if (*t != -1 && *t <= 0) return Bad(name, "must be -1 (saturation) or > 0 MB/s");
         o.throughput_mbps = *t;
         return absl::OkStatus();
       }},
      {"time",
       [&](const std::string& name, const std::string& v) {
         if (v == "ms") {
           o.time_unit = TimeUnit::kMs;
         } else if (v == "mcs" || v == "us") {
           o.time_unit = TimeUnit::kUs;
         } else if (v == "ns") {
           o.time_unit = TimeUnit::kNs;
         } else {
           return Bad(name, absl::StrCat("'", v, "' must be ms, mcs or ns"));
         }
         return absl::OkStatus();
       }},
      {"minlatency", set_optional(&min_latency)},
      {"maxlatency", set_optional(&max_latency)},
      {"mpscqueue",
       [&](const std::string& name, const std::string& v) {
         absl::StatusOr<bool> b = ParseBool(name, v);
         if (!b.ok()) return b.status();
         o.channels.queue = *b ? QueueKind::kMpsc : QueueKind::kLibrary;
         return absl::OkStatus();
       }},
      {"mpscVariant",
       [&](const std::string& name, const std::string& v) {
         if (v == "batch") {
           o.channels.mpsc_batched = true;
         } else if (v == "record") {
           o.channels.mpsc_batched = false;
         } else {
           return Bad(name, absl::StrCat("'", v, "' must be batch or record"));
         }
         return absl::OkStatus();
       }},
      {"csvfile",
       [&](const std::string& name, const std::string& v) {
         if (v.empty()) return Bad(name, "needs a path or 'no'");
         o.csv_file = (v == "no") ? "" : v;
         return absl::OkStatus();
       }},
      {"interval",
       [&](const std::string& name, const std::string& v) {
         absl::StatusOr<double> s = ParseDouble(name, v);
         if (!s.ok()) return s.status();
         // Whole milliseconds from 10 ms (the daemon's reportingIntervalMs
         // floor) to a day.
         const double ms = std::round(*s * 1000);
         if (!(ms >= 10 && ms <= 86'400'000)) {
           return Bad(name, "must be seconds in [0.01, 86400] (e.g. 0.5)");
         }
         o.interval_ms = static_cast<int64_t>(ms);
         return absl::OkStatus();
       }},
      {"warmup",
       [&](const std::string& name, const std::string& v) {
         absl::StatusOr<double> s = ParseDouble(name, v);
         if (!s.ok()) return s.status();
         const double ms = std::round(*s * 1000);
         if (!(ms >= 0 && ms <= 365.0 * 86'400'000)) {
           return Bad(name, "must be seconds >= 0 (e.g. 30)");
         }
         o.warmup_ms = static_cast<int64_t>(ms);
         return absl::OkStatus();
       }},
      {"class",
       [&](const std::string& name, const std::string& v) {
         // SBK spells it PerlBench: any case.
         if (!absl::EqualsIgnoreCase(v, "perlbench"))
           return Bad(name, absl::StrCat("'", v, "': only perlbench is built in"));
         return absl::OkStatus();
       }},
      {"context",
       [&](const std::string& name, const std::string& v) { return ParseContext(name, v, &o); }},
      {"maxQs", set_int(&o.channels.max_qs, 0, 4096)},
      {"qPerWorker", set_int(&o.channels.q_per_worker, 1, 4096)},
      {"maxPendingPerWorker", set_int(&o.channels.max_pending_per_worker, 2, int64_t{1} << 32)},
      {"overflow",
       [&](const std::string& name, const std::string& v) {
         if (v == "block") {
           o.channels.overflow = OverflowPolicy::kBlock;
         } else if (v == "drop") {
           o.channels.overflow = OverflowPolicy::kDrop;
         } else {
           return Bad(name, absl::StrCat("'", v, "' must be block or drop"));
         }
         return absl::OkStatus();
       }},
      {"idleNS", set_int(&o.idle_ns, 1, 1'000'000'000)},
      {"clock",
       [&](const std::string& name, const std::string& v) {
         if (v == "auto") {
           o.clock = ClockSource::kAuto;
         } else if (v == "tsc") {
           o.clock = ClockSource::kTsc;
         } else if (v == "monotonic") {
           o.clock = ClockSource::kMonotonic;
         } else {
           return Bad(name, absl::StrCat("'", v, "' must be auto, tsc or monotonic"));
         }
         return absl::OkStatus();
       }},
      {"catchup",
       [&](const std::string& name, const std::string& v) {
         if (v == "burst") {
           o.catchup = Catchup::kBurst;
         } else if (v == "skip") {
           o.catchup = Catchup::kSkip;
         } else {
           return Bad(name, absl::StrCat("'", v, "' must be burst or skip"));
         }
         return absl::OkStatus();
       }},
      {"lateUs", set_int(&o.late_us, 0, int64_t{86'400} * 1'000'000)},
      {"progress",
       [&](const std::string& name, const std::string& v) {
         absl::StatusOr<bool> b = ParseBool(name, v);
         if (!b.ok()) return b.status();
         o.progress = *b;
         return absl::OkStatus();
       }},
  };

  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    std::string name, value;
    bool has_value = false;
    if (arg.rfind("--", 0) == 0) {
      name = arg.substr(2);
      if (size_t eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
    } else if (arg.size() > 1 && arg[0] == '-') {
      name = arg.substr(1);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    if (name == "help" || name == "h") {
      o.help = true;
      continue;
    }
    auto it = options.find(name);
    if (it == options.end()) {
      if (const char* hint = SbkOptionHint(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", arg, "' is an SBK option perld does not take: ", hint));
      }
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option '", arg, "' (perld bench -help lists every option)"));
    }
    if (!seen.insert(name).second) return Bad(name, "given more than once");
    if (!has_value) {
      if (i + 1 >= args.size()) return Bad(name, "needs a value");
      value = args[++i];
    }
    if (absl::Status s = it->second(name, value); !s.ok()) return s;
  }
  if (o.help) return o;

  if (o.workers() < 1)
    return absl::InvalidArgumentError("give -writers N and/or -readers N (N >= 1)");
  if (o.records == 0 && o.seconds == 0) {
    return absl::InvalidArgumentError("give -records N (exact mode) or -seconds S (timed mode)");
  }
  if (o.records > 0 && o.seconds == 0 && o.records < o.workers()) {
    // Allowed: some workers get zero records. Nothing to reject.
  }
  if (o.warmup_ms > 0 && o.seconds == 0) {
    return Bad("warmup", "needs -seconds (a timed run): an exact run's total counts every record");
  }
  if (o.warmup_ms > 0 && static_cast<double>(o.warmup_ms) >= o.seconds * 1000) {
    return Bad("warmup", absl::StrCat("must be shorter than -seconds (", o.seconds, ")"));
  }
  if (o.throughput_mbps > 0 && o.size <= 0) {
    return Bad("throughput", "rate control needs -size > 0 (records/s = MB/s * 2^20 / size)");
  }
  LatencyConfig defaults = LatencyConfig::ForUnit(o.time_unit);
  o.min_latency = min_latency.value_or(defaults.min_latency);
  o.max_latency = max_latency.value_or(defaults.max_latency);
  if (*o.min_latency >= *o.max_latency) {
    return absl::InvalidArgumentError(absl::StrCat(
        "-minlatency (", *o.min_latency, ") must be below -maxlatency (", *o.max_latency, ")"));
  }
  return o;
}

}  // namespace perld::bench
