#include "client/perlctl/load_command.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/lib/client_internal.h"
#include "client/perlctl/cli_args.h"
#include "client/perlctl/local_total_json.h"
#include "daemon/bench/bench_options.h"
#include "daemon/bench/perlbench_worker.h"
#include "daemon/common/json_writer.h"
#include "daemon/common/slo.h"
#include "perld/client.h"

namespace perld::perlctl {

using json::JsonWriter;
namespace {

// How long an interrupted load waits for perld's last acknowledgements: the
// command ends within about this after SIGINT/SIGTERM, perld away or not.
constexpr std::chrono::milliseconds kInterruptGrace(1000);

constexpr char kLoadUsage[] =
    R"(usage: perlctl [--target HOST:PORT] [--json] [--timeout SECONDS] [security] load
         [perld bench options] [--run NAME] [--join | --new] [--mode raw|windows]
         [--name CLIENT] [--label KEY=VALUE]... [--distribution-out FILE]
         [--spool DIR [--spool-mode batched|synced]] [--connect-timeout SECONDS]
Generates PerlBench load on this host and streams it into the perld at --target, as one
client of the ingest run NAME (several hosts may join one run). Exits 0 only when perld
acknowledged every record.
  --run NAME              the run to join or create (default perlctl-load)
  --join                  only join a running ingest run NAME (NOT_FOUND otherwise)
  --new                   only create a new run NAME (ALREADY_EXISTS if one is running)
  --mode raw|windows      raw: every operation's timestamps (default); windows: this
                          host's exact closed windows (latency/count pairs)
  --name CLIENT           this client's name in the run (default: the host name)
  --label KEY=VALUE       a label of the run, if this client creates it
  --distribution-out F    this client's exact total as JSON (counters and latencies)
  --spool DIR             keep every message in DIR until perld holds it durably: the
                          load starts without perld and a later load on DIR sends it
  --spool-mode M          batched (default: group commits) or synced (fdatasync each)
  --connect-timeout S     without --spool: how long to wait for perld to open the run
                          before giving up with exit 1 (default 5)
  --timeout S             (before load) how long to wait for the last acknowledgements
With -throughput MBPS the load is rate-controlled (open model): each operation has a slot
on the workers' schedule and the run keeps response time (end - slot) beside service time
(end - actual start), both exact (-catchup burst|skip, -lateUs N as for perld bench); the
run keeps it when this load creates it (a closed-loop run keeps service time only).
SIGINT or SIGTERM stops the load and ends the command within about 1 s, perld away or
not (exit 1); it says how many records perld acknowledged and where the others are.
)";

LatencyUnit ToClientUnit(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kMs:
      return LatencyUnit::kMs;
    case TimeUnit::kUs:
      return LatencyUnit::kUs;
    case TimeUnit::kNs:
      break;
  }
  return LatencyUnit::kNs;
}

}  // namespace

int LoadCommand(const std::string& target, const client::ChannelSecurity& security,
                bool json_output, double timeout_s, std::vector<std::string> args) {
  const std::string run = TakeOne(&args, "run").value_or("perlctl-load");
  const std::string mode_name = TakeOne(&args, "mode").value_or("raw");
  const std::optional<std::string> distribution_out = TakeOne(&args, "distribution-out");
  const std::optional<std::string> client_name = TakeOne(&args, "name");
  const std::optional<std::string> spool_dir = TakeOne(&args, "spool");
  const bool join_only = TakeFlag(&args, "join");
  const bool new_only = TakeFlag(&args, "new");
  const std::optional<std::string> slo = TakeOne(&args, "slo");
  const bool abort_on_fail = TakeFlag(&args, "abort-on-fail");
  if (slo) {
    if (absl::StatusOr<std::vector<SloTerm>> terms = ParseSlo(*slo); !terms.ok()) {
      throw UsageError{"load: --slo: " + std::string(terms.status().message())};
    }
  }
  if (abort_on_fail && !slo) throw UsageError{"load: --abort-on-fail needs --slo EXPR"};
  if (join_only && new_only) throw UsageError{"load: --join and --new exclude each other"};
  const std::string spool_mode = TakeOne(&args, "spool-mode").value_or("batched");
  double connect_timeout_s = 5;
  if (const std::optional<std::string> v = TakeOne(&args, "connect-timeout")) {
    if (!absl::SimpleAtod(*v, &connect_timeout_s) || !(connect_timeout_s > 0) ||
        connect_timeout_s > 86'400) {
      throw UsageError{"load: --connect-timeout must be seconds in (0, 86400]"};
    }
  }
  if (spool_mode != "batched" && spool_mode != "synced") {
    throw UsageError{"load: --spool-mode must be batched or synced"};
  }
  if (mode_name != "raw" && mode_name != "windows") {
    throw UsageError{"load: --mode must be raw or windows"};
  }
  std::map<std::string, std::string> labels;
  while (std::optional<std::string> kv = TakeOne(&args, "label")) {
    const size_t eq = kv->find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError{"--label needs KEY=VALUE"};
    labels[kv->substr(0, eq)] = kv->substr(eq + 1);
  }
  // -warmup shapes a daemon run's total: a remote run has many clients, so
  // leave the warm-up out when reading it (--warmup on percentiles, show,
  // check, compare, export).
  static const std::set<std::string> kNotHere = {"csvfile", "context", "warmup"};
  for (const std::string& a : args) {
    if (a.size() > 1 && a[0] == '-') {
      std::string name = a.substr(a[1] == '-' ? 2 : 1);
      name = name.substr(0, name.find('='));
      if (kNotHere.count(name) > 0) {
        throw UsageError{"load: -" + name + " is not available here; query the daemon's run"};
      }
    }
  }
  absl::StatusOr<bench::BenchOptions> parsed = bench::ParseBenchArgs(args);
  if (!parsed.ok()) throw UsageError{"load: " + std::string(parsed.status().message())};
  if (parsed->help) {
    std::cout << kLoadUsage << "\nThe load itself: every perld bench option.\n"
              << bench::BenchUsage();
    return 0;
  }
  const bench::BenchOptions& o = *parsed;

  absl::StatusOr<std::unique_ptr<bench::BenchClock>> chosen = bench::ChooseBenchClock(o.clock);
  if (!chosen.ok()) {
    std::cerr << "perlctl: load: --" << chosen.status().message() << "\n";
    return 1;
  }
  const bench::BenchClock& clock = **chosen;

  // SIGINT/SIGTERM end the load early but cleanly: taken by a watcher
  // thread (blocked here, before any thread starts, so every thread inherits
  // the mask), which stops the workers and abandons waiting for the daemon;
  // the totals and what was acknowledged are still printed.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ClientOptions options;
  options.target = target;
  options.tls = security.tls;
  options.ca_file = security.ca_file;
  options.cert_file = security.cert_file;
  options.key_file = security.key_file;
  options.token_file = security.token_file;
  options.run = run;
  options.must_exist = join_only;
  options.must_create = new_only;
  options.slo = slo.value_or("");
  options.slo_abort_on_fail = abort_on_fail;
  options.labels = labels;
  options.mode = mode_name == "raw" ? IngestMode::kRaw : IngestMode::kWindows;
  options.time_unit = ToClientUnit(o.time_unit);
  options.min_latency = o.min_latency;
  options.max_latency = o.max_latency;
  options.reporting_interval_ms = o.interval_ms;
  if (client_name) options.client_name = *client_name;
  options.clock = clock.info().description;
  options.clock_resolution_ns = static_cast<int64_t>(std::ceil(clock.info().resolution_ns));
  if (spool_dir) {
    options.spool_dir = *spool_dir;
    options.spool_synced = spool_mode == "synced";
  }
  // -throughput: an open-model load on a schedule. The run keeps response
  // time (from each operation's slot) beside service time.
  const double target_rate =
      o.throughput_mbps > 0 ? o.throughput_mbps * 1024.0 * 1024.0 / o.size : 0;
  options.target_rate = target_rate;
  options.late_threshold_ns = o.late_us * 1'000;
  options.max_recorders = std::max(1, o.workers());
  options.max_pending_per_recorder = static_cast<int64_t>(o.channels.max_pending_per_worker);
  std::string error;
  std::unique_ptr<Client> client = Client::Create(options, &error);
  if (client == nullptr) {  // a refused spool, an unreadable token or key file, ...
    std::cerr << "perlctl: load: " << error << "\n";
    return 1;
  }

  // Fail fast: without a spool nothing recorded survives while perld is
  // away, so the connection and the run's open are checked before any load
  // is generated -- an unreachable target or a refused open ends the command.
  if (!spool_dir) {
    const auto give_up = std::chrono::steady_clock::now() +
                         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(connect_timeout_s));
    for (;;) {
      const Counters c = client->counters();
      if (c.opened) break;
      const std::string refused = client->FinalError();
      const bool late = std::chrono::steady_clock::now() >= give_up;
      const timespec tick{0, 20'000'000};
      const int sig = refused.empty() && !late ? sigtimedwait(&signals, nullptr, &tick) : 0;
      if (refused.empty() && !late && sig <= 0) continue;
      if (!refused.empty()) {
        std::cerr << "perlctl: load: perld at " << target << " refused run '" << run
                  << "': " << refused << "\n";
      } else if (late) {
        std::cerr << "perlctl: load: perld at " << target << " did not open run '" << run
                  << "' within " << connect_timeout_s << " s (--connect-timeout)"
                  << (c.last_stream_error.empty() ? "" : ": " + c.last_stream_error)
                  << "; no load was generated. Start perld or check --target, or give --spool "
                     "DIR to record now and send when perld is back\n";
      } else {
        std::cerr << "perlctl: load: interrupted by signal " << sig
                  << " before perld opened the run; no load was generated\n";
      }
      client->Abandon();
      return 1;
    }
  }
  const auto announce = [&](const Counters& c) {
    std::cerr << "perlctl: load: " << (c.run_created ? "created" : "joined") << " run " << c.run_id
              << " '" << run << "' at " << target << "\n";
    if (target_rate > 0 && c.response_run == 0) {
      std::cerr << "perlctl: load: run " << c.run_id
                << " is closed-loop (created without -throughput): it keeps this load's service "
                   "time only, not its response time\n";
    }
  };
  bool announced = false;
  if (const Counters c = client->counters(); c.opened) {
    announce(c);
    announced = true;
  }

  // The PerlBench workers, each through its own recorder handle.
  const int workers = o.workers();
  std::vector<bench::WorkerPlan> plans(static_cast<size_t>(workers));
  const int64_t deadline_ns =
      o.seconds > 0 ? clock.NowNanos() + static_cast<int64_t>(o.seconds * 1e9) : 0;
  const double per_worker_rps = target_rate / workers;
  // The workers' schedules phase-offset: together evenly spaced slots.
  const int64_t first_slot_ns = clock.NowNanos();
  std::atomic<int64_t>& skipped = client::SkippedSlots(client.get());
  for (int w = 0; w < workers; ++w) {
    bench::WorkerPlan& plan = plans[static_cast<size_t>(w)];
    plan.size = o.size;
    plan.records = o.records > 0 ? o.records / workers + (w < o.records % workers ? 1 : 0) : 0;
    plan.deadline_ns = deadline_ns;
    plan.records_per_second = per_worker_rps;
    if (per_worker_rps > 0) {
      plan.first_slot_ns = first_slot_ns + static_cast<int64_t>(1e9 / per_worker_rps * w / workers);
      plan.catchup = o.catchup;
      plan.skipped = &skipped;
    }
  }
  std::atomic<bool> stop{false};
  std::atomic<bool> done{false};
  std::atomic<int> interrupted{0};
  std::atomic<bool> overran{false};
  std::atomic<bool> workers_done{false};
  std::atomic<bool> failed{false};
  std::thread watcher([&] {
    const timespec tick{0, 100'000'000};
    const auto started = std::chrono::steady_clock::now();
    bool said_spooling = false;
    while (!done.load(std::memory_order_relaxed)) {
      // With a spool, recording goes on while perld is away: said once.
      const Counters c = client->counters();
      if (c.opened && !announced) {
        announce(c);
        announced = true;
      } else if (!c.opened && !said_spooling &&
                 std::chrono::steady_clock::now() - started > std::chrono::seconds(2)) {
        said_spooling = true;
        std::cerr << "perlctl: load: perld at " << target << " has not opened run '" << run
                  << "' yet"
                  << (c.last_stream_error.empty() ? "" : " (" + c.last_stream_error + ")")
                  << ": recording into the spool " << *spool_dir
                  << "; its messages are sent when perld answers\n";
      }
      const int sig = sigtimedwait(&signals, nullptr, &tick);
      if (sig > 0) {
        interrupted.store(sig, std::memory_order_relaxed);
        stop.store(true, std::memory_order_relaxed);
        // A live perld acknowledges what is in flight within the grace; one
        // that is away costs no more than it (the spool keeps the rest).
        client->Abandon(kInterruptGrace);
      }
      // Past -seconds and --timeout with a worker still blocked in Record
      // (perld away, nothing left to hold its records): give up on them,
      // as on SIGINT, instead of outliving the run's time.
      if (deadline_ns > 0 && !workers_done.load(std::memory_order_relaxed) &&
          !stop.load(std::memory_order_relaxed) &&
          clock.NowNanos() > deadline_ns + static_cast<int64_t>(timeout_s * 1e9)) {
        stop.store(true, std::memory_order_relaxed);
        overran.store(true, std::memory_order_relaxed);
        client->Abandon();
      }
      // A final error (the daemon refused the run for good): nothing more
      // can be acknowledged, so stop generating load now.
      if (!failed.load(std::memory_order_relaxed) && !client->FinalError().empty()) {
        failed.store(true, std::memory_order_relaxed);
        stop.store(true, std::memory_order_relaxed);
      }
    }
  });
  std::vector<bench::WorkerResult> results(static_cast<size_t>(workers));
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int w = 0; w < workers; ++w) {
    const bench::WorkerPlan& plan = plans[static_cast<size_t>(w)];
    if (o.records > 0 && plan.records == 0) continue;
    TimeStampProducer* producer = &client::ProducerOf(client->NewRecorder());
    threads.emplace_back([&, w, producer] {
      results[static_cast<size_t>(w)] =
          bench::RunWorker(plans[static_cast<size_t>(w)], o.time_unit, clock, *producer, stop);
    });
  }
  for (std::thread& t : threads) t.join();
  workers_done.store(true, std::memory_order_relaxed);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const FlushResult closed =
      client->Close(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  done.store(true, std::memory_order_relaxed);
  watcher.join();
  const LocalTotal total = client->Total();
  const LocalTotal response = client->ResponseTotal();
  const Counters counters = client->counters();
  int64_t attempted = 0;
  for (const bench::WorkerResult& r : results) attempted += r.attempted;

  if (distribution_out) {
    JsonWriter d;
    const auto latencies = [&d](const LocalTotal& t) {
      d.Key("latencies").BeginArray();
      for (const auto& [latency, count] : t.latency_counts) {
        d.BeginArray().Int(latency).Int(count).EndArray();
      }
      d.EndArray();
    };
    d.BeginObject();
    WriteLocalTotal(total, &d);
    latencies(total);
    if (target_rate > 0) {  // the same operations' response times
      d.Key("response").BeginObject();
      WriteLocalTotal(response, &d);
      latencies(response);
      d.EndObject();
    }
    d.EndObject();
    std::ofstream out(*distribution_out);
    out << d.str() << "\n";
    if (!out.good()) {
      std::cerr << "perlctl: load: cannot write " << *distribution_out << "\n";
      return 1;
    }
  }
  if (json_output) {
    JsonWriter j;
    j.BeginObject();
    j.Key("run").String(run);
    j.Key("runId").Uint(counters.run_id);
    j.Key("runCreated").Bool(counters.run_created);
    j.Key("mode").String(mode_name);
    j.Key("operations").Int(attempted);
    j.Key("seconds").Double(seconds);
    WriteLocalTotal(total, &j);
    if (target_rate > 0) {
      j.Key("targetRate").Double(target_rate);
      j.Key("skipped").Int(skipped.load());
      j.Key("response").BeginObject();
      WriteLocalTotal(response, &j);
      j.EndObject();
    }
    j.Key("acked").Bool(closed.acked);
    j.Key("ackedRecords").Int(counters.acked_records);
    j.Key("unsentRecords").Int(counters.unsent_records);
    j.Key("interrupted").Bool(interrupted.load() != 0);
    j.Key("lastStreamError").String(counters.last_stream_error);
    j.Key("messages").Uint(counters.messages);
    j.Key("ackedSequence").Uint(counters.acked_sequence);
    j.Key("duplicates").Uint(counters.duplicates);
    j.Key("reconnects").Uint(counters.reconnects);
    j.Key("outboxFullWaits").Uint(counters.outbox_full_waits);
    j.Key("spoolReplayed").Uint(counters.spool_replayed);
    j.Key("spoolFullWaits").Uint(counters.spool_full_waits);
    j.Key("error").String(closed.error);
    j.EndObject();
    std::cout << j.str() << "\n";
  } else {
    std::cout << "perlctl load: run '" << run << "' (id " << counters.run_id << "), " << mode_name
              << ": " << total.records << " records (" << total.valid << " valid, " << total.invalid
              << " invalid) from " << attempted << " operations in " << seconds << " s, "
              << static_cast<double>(total.records) / seconds / 1e6 << " M records/s; "
              << counters.messages << " messages, acknowledged up to " << counters.acked_sequence
              << ", " << counters.duplicates << " duplicates, " << counters.reconnects
              << " reconnects\n";
  }
  // What became of the records when the load did not end cleanly: the
  // same message counts as the summary line above.
  const auto unacknowledged = [&]() {
    const int64_t left = total.records - counters.acked_records;
    std::string s = absl::StrCat(counters.acked_records, " of ", total.records,
                                 " records acknowledged (messages up to ", counters.acked_sequence,
                                 " of ", counters.messages, ")");
    if (left <= 0) return s;
    if (spool_dir) {
      absl::StrAppend(&s, "; the other ", left, " records are kept in the spool ", *spool_dir,
                      ": `perlctl load --spool ", *spool_dir,
                      "` with the same run sends them first when perld is back");
    } else {
      absl::StrAppend(&s, "; the other ", left, " records did not reach perld (",
                      counters.unsent_records, " of them were never sent)");
    }
    return s;
  };
  const std::string why = closed.error.empty() ? "" : " (" + closed.error + ")";
  if (overran.load()) {
    std::cerr << "perlctl: load: still blocked on perld " << timeout_s
              << " s (--timeout) after -seconds ended" << why << "; " << unacknowledged() << "\n";
    return 1;
  }
  if (interrupted.load() != 0) {
    // Its own deadline ran out: "timed out" says nothing more.
    std::cerr << "perlctl: load: interrupted by signal " << interrupted.load()
              << (closed.error == "timed out" ? "" : why) << "; " << unacknowledged() << "\n";
    return 1;
  }
  if (!closed.acked) {
    std::cerr << "perlctl: load: not everything was acknowledged (" << closed.unacked_messages
              << " of " << counters.messages << " messages): " << closed.error;
    if (spool_dir) {
      std::cerr << "; they are kept in the spool " << *spool_dir << ": `perlctl load --spool "
                << *spool_dir << "` sends them first when perld is back";
    }
    std::cerr << "\n";
    return 1;
  }
  return 0;
}

}  // namespace perld::perlctl
