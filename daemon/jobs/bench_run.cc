#include "daemon/jobs/bench_run.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "daemon/bench/sbk_report.h"
#include "daemon/common/mutex.h"
#include "daemon/core/clock.h"
#include "daemon/http/http_server.h"
#include "daemon/http/metrics_exposition.h"
#include "daemon/jobs/bench_job.h"
#include "daemon/runs/run_manager.h"
#include "perld/version.h"

namespace perld::jobs {
namespace {

int64_t PeakRssKb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

// Prints every closed window of the run as SBK does: a console line, a CSV
// row, and the -context exposition. Runs on the run manager's dispatcher
// thread; the progress line (main thread) shares its lock so the two never
// interleave on a terminal.
// Rate mode (`paced`; issue 30): each window has two lines, response time
// first ("PerlBench Response Writing ...") then service time ("PerlBench
// Service Writing ..."); the CSV gets a last column Kind (response|service)
// and -context shows response time, the rate mode's default view.
class BenchConsole final : public runs::RunObserver {
 public:
  BenchConsole(bench::ReportContext ctx, bool paced, std::ostream& out, std::ostream& err,
               std::ofstream* csv, http::LatestMetrics* latest)
      : ctx_(std::move(ctx)), paced_(paced), out_(out), err_(err), csv_(csv), latest_(latest) {}

  void OnWindow(const runs::RunInfo& info, const runs::WindowRecord& w) override {
    Print(info, w, w.kind != runs::WindowRecord::Kind::kPeriodic);
  }
  void OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord& total) override {
    Print(info, total, true);
  }

  void Progress(const std::string& line) {
    MutexLock lock(mu_);
    err_ << "\r\033[K" << line << std::flush;
    progress_shown_ = true;
  }
  int64_t windows_reported() const {
    MutexLock lock(mu_);
    return windows_reported_;
  }

 private:
  void Print(const runs::RunInfo& info, const runs::WindowRecord& w, bool total) {
    MutexLock lock(mu_);
    if (progress_shown_) {
      err_ << "\r\033[K" << std::flush;
      progress_shown_ = false;
    }
    const std::string kind = runs::LatencyKindOf(info);
    const bool response = kind == "response";
    const bench::ReportRow row = bench::MakeReportRow(w.snapshot, w.seconds, w.RateSeconds());
    bench::ReportContext console = ctx_;
    if (paced_) console.storage = absl::StrCat(ctx_.storage, response ? " Response" : " Service");
    out_ << bench::FormatConsoleLine(console, row, total) << "\n" << std::flush;
    if (csv_ != nullptr) {
      *csv_ << bench::CsvRow(ctx_, row, ++csv_id_, total,
                             static_cast<std::time_t>(w.end_unix_ms / 1000));
      if (paced_) *csv_ << "," << kind;
      *csv_ << "\n";
    }
    if (latest_ != nullptr && response == paced_) latest_->Publish(w.snapshot, w.seconds, total);
    if (!total && !response) ++windows_reported_;
  }

  const bench::ReportContext ctx_;
  const bool paced_;
  std::ostream& out_;
  std::ostream& err_;
  std::ofstream* csv_;
  http::LatestMetrics* latest_;
  mutable Mutex mu_;
  bool progress_shown_ ABSL_GUARDED_BY(mu_) = false;
  int64_t csv_id_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t windows_reported_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

absl::StatusOr<BenchResult> RunBench(const bench::BenchOptions& options, std::ostream& out,
                                     std::ostream& err, const std::atomic<bool>* stop) {
  LatencyConfig config = LatencyConfig::ForUnit(options.time_unit);
  config.min_latency = options.min_latency.value_or(config.min_latency);
  config.max_latency = options.max_latency.value_or(config.max_latency);
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  // Validate the topology before printing anything (the run builds its own).
  absl::StatusOr<std::unique_ptr<TimeStampChannels>> topology =
      TimeStampChannels::Create(options.channels, options.workers());
  if (!topology.ok()) return topology.status();

  absl::StatusOr<std::unique_ptr<bench::BenchClock>> chosen =
      bench::ChooseBenchClock(options.clock);
  if (!chosen.ok())
    return absl::FailedPreconditionError(absl::StrCat("--", chosen.status().message()));
  const bench::BenchClock& clock = **chosen;

  bench::ReportContext ctx;
  ctx.action = options.writers > 0 && options.readers > 0 ? "Write_Reading"
               : options.writers > 0                      ? "Writing"
                                                          : "Reading";
  ctx.unit = options.time_unit;
  ctx.writers = options.writers;
  ctx.readers = options.readers;
  ctx.percentiles = config.percentiles;
  std::unique_ptr<std::ofstream> csv;
  if (!options.csv_file.empty()) {
    csv = std::make_unique<std::ofstream>(options.csv_file, std::ios::trunc);
    if (!*csv) return absl::InvalidArgumentError("-csvfile: cannot open " + options.csv_file);
    *csv << bench::CsvHeader(ctx) << (options.throughput_mbps > 0 ? ",Kind" : "") << "\n";
  }

  // -context: the metrics server binds before any worker starts.
  http::RunMetrics described;
  described.identity.Add("run", "perlbench").Add("source", "bench");
  described.unit = ctx.unit;
  described.action = ctx.action;
  described.sbk_class = ctx.storage;
  described.writers = described.max_writers = ctx.writers;
  described.readers = described.max_readers = ctx.readers;
  described.start_unix_seconds = static_cast<double>(absl::ToUnixMillis(absl::Now())) / 1e3;
  http::LatestMetrics latest(std::move(described));
  std::unique_ptr<http::HttpServer> metrics;
  if (options.metrics) {
    absl::StatusOr<std::unique_ptr<http::HttpServer>> server =
        http::HttpServer::Start(options.metrics_host, options.metrics_port, options.metrics_path,
                                [&latest] { return latest.Render(); });
    if (!server.ok()) {
      return absl::Status(server.status().code(),
                          absl::StrCat("-context: ", server.status().message()));
    }
    metrics = std::move(*server);
  }

  // Startup lines, as SBK prints them.
  out << "perld " << PERLD_VERSION << " PerlBench: " << options.writers << " writers, "
      << options.readers << " readers, size " << options.size << " bytes, time unit "
      << TimeUnitSymbol(options.time_unit) << ", latency range [" << config.min_latency << ", "
      << config.max_latency << "]\n";
  for (const std::string& line : (*topology)->Describe()) out << line << "\n";
  topology->reset();
  out << "PerL Clock: " << clock.info().description << "\n";
  if (metrics) out << "PerL Prometheus metrics: " << metrics->Url() << "\n";
  std::string mode;
  switch (options.mode()) {
    case bench::BenchMode::kExact:
      mode = absl::StrCat("exact, ", options.records, " records");
      break;
    case bench::BenchMode::kTimed:
      mode = absl::StrCat("timed, ", options.seconds, " seconds, saturation");
      break;
    case bench::BenchMode::kRate:
      mode = absl::StrCat("rate-controlled, ", options.seconds, " seconds, ",
                          options.throughput_mbps, " MB/s");
      break;
  }
  out << "PerlBench Mode: " << mode << "\n";
  out.flush();

  // One run under the single recorder, exactly as the daemon hosts it.
  runs::RunManager::Options manager_options;
  manager_options.recorder.idle_ns = options.idle_ns;
  manager_options.max_running_runs = 1;
  runs::RunManager manager(manager_options);
  BenchConsole console(ctx, options.throughput_mbps > 0, out, err, csv.get(), &latest);
  manager.AddObserver(&console);
  manager.Start();

  BenchJobSetup setup;
  setup.options = options;
  setup.latency_defaults = config;
  setup.reporting_interval_ms = options.interval_ms;
  setup.clock = &clock;
  const int64_t start_ns = MonotonicNanos();
  absl::StatusOr<std::unique_ptr<BenchJob>> job = BenchJob::Start(manager, std::move(setup));
  if (!job.ok()) return job.status();

  const bool progress = options.progress.value_or(isatty(STDERR_FILENO) == 1);
  int64_t last_progress_ns = start_ns;
  while (!(*job)->Done()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) (*job)->Stop();
    const int64_t now = MonotonicNanos();
    if (progress && now - start_ns > 2'000'000'000 && now - last_progress_ns > 500'000'000) {
      const double secs = static_cast<double>(now - start_ns) / 1e9;
      const uint64_t consumed = manager.consumed();
      console.Progress(absl::StrCat(
          "[perld bench] ", absl::StrFormat("%.1f s, %d records, %.2f M records/s", secs, consumed,
                                            static_cast<double>(consumed) / secs / 1e6)));
      last_progress_ns = now;
    }
  }
  const BenchOutcome& outcome = (*job)->Wait();
  const int64_t end_ns = MonotonicNanos();
  manager.Stop();
  if (metrics) metrics->Stop();

  BenchResult result;
  result.total = outcome.total.snapshot;
  result.warmup_records = outcome.total.warmup_left_out.records;
  result.requested = outcome.requested;
  result.attempted = outcome.attempted;
  result.dropped = outcome.dropped;
  result.blocked = outcome.blocked;
  result.windows_reported = console.windows_reported();
  result.seconds = static_cast<double>(end_ns - start_ns) / 1e9;
  result.peak_rss_kb = PeakRssKb();
  if (csv) {
    csv->flush();
    if (!*csv) err << "perld bench: error writing " << options.csv_file << "\n";
  }

  const std::string warmup =
      result.warmup_records > 0
          ? absl::StrFormat(" (%d more in the warm-up, not in the total)", result.warmup_records)
          : "";
  out << absl::StrFormat(
             "PerlBench Summary: %d records recorded%s of %d operations, %d dropped, %d blocked "
             "sends, %d invalid latencies, %.3f s, peak RSS %d KiB",
             result.total.records, warmup, result.attempted, result.dropped, result.blocked,
             result.total.invalid, result.seconds, result.peak_rss_kb)
      << "\n";
  if (outcome.state != runs::RunState::kFinished) {
    err << "perld bench: " << outcome.reason << "\n";
  }
  result.exit_code = outcome.state == runs::RunState::kFinished ? 0 : 1;
  return result;
}

}  // namespace perld::jobs
