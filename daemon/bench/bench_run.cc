#include "daemon/bench/bench_run.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/bench/perlbench_worker.h"
#include "daemon/bench/sbk_report.h"
#include "daemon/core/clock.h"
#include "daemon/core/periodic_and_total_windows.h"
#include "daemon/core/recorder_thread.h"
#include "daemon/core/timestamp_sink.h"
#include "daemon/core/tsc_clock.h"
#include "daemon/http/metrics_exposition.h"
#include "daemon/http/metrics_server.h"
#include "perld/version.h"

namespace perld::bench {
namespace {

// A closed window on its way from the recorder thread to the printer.
struct PrintedWindow {
  LatencySnapshot snapshot;
  double seconds = 0;
  bool total = false;
  std::time_t wall = 0;
};

// The recorder thread's sink: feeds the exact windows, closes the periodic
// window every interval and queues the snapshot for the printing thread.
// Windows closed early by the IsFull policy are queued too, in order.
class BenchSink final : public TimeStampSink {
 public:
  BenchSink(PeriodicAndTotalWindows windows, int64_t ns_per_unit, int64_t interval_ns,
            int64_t start_ns)
      : windows_(std::move(windows)),
        ns_per_unit_(ns_per_unit),
        interval_ns_(interval_ns),
        run_start_ns_(start_ns),
        window_start_ns_(start_ns),
        last_tick_ns_(start_ns),
        next_report_ns_(start_ns + interval_ns) {}

  void Accept(const TimeStamp* batch, size_t n) override {
    windows_.RecordBatch(batch, n, last_tick_ns_ / ns_per_unit_);
    if (windows_.HasPendingReports()) PushPending(last_tick_ns_);
  }

  void Tick(int64_t now_ns) override {
    last_tick_ns_ = now_ns;
    if (now_ns < next_report_ns_) return;
    CloseWindow(now_ns);
    next_report_ns_ = now_ns + interval_ns_;
  }

  // After the recorder thread has stopped: the last partial window (if it saw
  // records) and the whole-run total.
  void Finish(int64_t now_ns) {
    if (windows_.periodic().counters().records > 0) CloseWindow(now_ns);
    PrintedWindow r;
    windows_.CloseTotal(now_ns / ns_per_unit_, &r.snapshot);
    r.seconds = static_cast<double>(now_ns - run_start_ns_) / 1e9;
    r.total = true;
    r.wall = std::time(nullptr);
    Push(std::move(r));
  }

  std::deque<PrintedWindow> TakeReady() {
    std::lock_guard<std::mutex> lock(mu_);
    std::deque<PrintedWindow> out;
    out.swap(ready_);
    return out;
  }

 private:
  void CloseWindow(int64_t now_ns) {
    PrintedWindow r;
    windows_.CloseWindow(now_ns / ns_per_unit_, &r.snapshot);
    r.seconds = static_cast<double>(now_ns - window_start_ns_) / 1e9;
    r.wall = std::time(nullptr);
    window_start_ns_ = now_ns;
    Push(std::move(r));
    if (windows_.HasPendingReports()) PushPending(now_ns);
  }
  // Early (IsFull) reports: printed like any other window, never skipped.
  void PushPending(int64_t now_ns) {
    for (WindowReport& report : windows_.TakePendingReports()) {
      PrintedWindow r;
      r.snapshot = std::move(report.snapshot);
      r.total = report.scope == WindowReport::Scope::kTotal;
      r.seconds = static_cast<double>(r.snapshot.Elapsed() * ns_per_unit_) / 1e9;
      r.wall = std::time(nullptr);
      if (!r.total) window_start_ns_ = now_ns;
      Push(std::move(r));
    }
  }
  void Push(PrintedWindow r) {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.push_back(std::move(r));
  }

  PeriodicAndTotalWindows windows_;
  const int64_t ns_per_unit_;
  const int64_t interval_ns_;
  const int64_t run_start_ns_;
  int64_t window_start_ns_;
  int64_t last_tick_ns_;
  int64_t next_report_ns_;
  std::mutex mu_;
  std::deque<PrintedWindow> ready_;
};

// Splits `total` across `workers`: the first total % workers take one more.
std::vector<int64_t> SplitRecords(int64_t total, int workers) {
  std::vector<int64_t> share(workers, total / workers);
  for (int i = 0; i < total % workers; ++i) ++share[i];
  return share;
}

int64_t PeakRssKb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

}  // namespace

absl::StatusOr<BenchResult> RunBench(const BenchOptions& options, std::ostream& out,
                                     std::ostream& err, const std::atomic<bool>* stop) {
  const int workers = options.workers();
  LatencyConfig config = LatencyConfig::ForUnit(options.time_unit);
  config.min_latency = options.min_latency.value_or(config.min_latency);
  config.max_latency = options.max_latency.value_or(config.max_latency);
  if (absl::Status s = config.Validate(); !s.ok()) return s;

  absl::StatusOr<std::unique_ptr<TimeStampChannels>> channels =
      TimeStampChannels::Create(options.channels, workers);
  if (!channels.ok()) return channels.status();

  std::optional<TscClock> tsc;
  if (options.clock != ClockSource::kMonotonic) {
    absl::StatusOr<TscClock> t = TscClock::Create();
    if (t.ok()) {
      tsc = *t;
    } else if (options.clock == ClockSource::kTsc) {
      return absl::FailedPreconditionError(absl::StrCat("--clock tsc: ", t.status().message()));
    }
  }
  const BenchClock clock(tsc ? &*tsc : nullptr);

  std::unique_ptr<std::ofstream> csv;
  ReportContext ctx;
  ctx.action = options.writers > 0 && options.readers > 0 ? "Write_Reading"
               : options.writers > 0                      ? "Writing"
                                                          : "Reading";
  ctx.unit = options.time_unit;
  ctx.writers = options.writers;
  ctx.readers = options.readers;
  ctx.percentiles = config.percentiles;
  if (!options.csv_file.empty()) {
    csv = std::make_unique<std::ofstream>(options.csv_file, std::ios::trunc);
    if (!*csv) return absl::InvalidArgumentError("-csvfile: cannot open " + options.csv_file);
    *csv << CsvHeader(ctx) << "\n";
  }

  const int64_t ns_per_unit = NanosPerUnit(options.time_unit);
  const int64_t start_ns = MonotonicNanos();
  absl::StatusOr<PeriodicAndTotalWindows> windows =
      PeriodicAndTotalWindows::Create(config, start_ns / ns_per_unit);
  if (!windows.ok()) return windows.status();
  BenchSink sink(std::move(*windows), ns_per_unit,
                 static_cast<int64_t>(options.interval_seconds) * 1'000'000'000, start_ns);

  // -context: the metrics server binds before any worker starts; handlers
  // read `latest`, which print_ready updates after each printed window.
  http::LatestMetrics latest({ctx.storage, ctx.action, ctx.writers, ctx.readers}, ctx.unit);
  std::unique_ptr<http::MetricsServer> metrics;
  if (options.metrics) {
    absl::StatusOr<std::unique_ptr<http::MetricsServer>> server =
        http::MetricsServer::Start(options.metrics_host, options.metrics_port, options.metrics_path,
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
      << TimeUnitName(options.time_unit) << ", latency range [" << config.min_latency << ", "
      << config.max_latency << "]\n";
  for (const std::string& line : (*channels)->Describe()) out << line << "\n";
  out << "PerL Clock: "
      << (tsc ? absl::StrFormat("calibrated TSC (%.4f ticks/ns)", tsc->ticks_per_ns())
              : std::string("CLOCK_MONOTONIC"))
      << "\n";
  if (metrics) out << "PerL Prometheus metrics: " << metrics->Url() << "\n";
  BenchResult result;
  std::string mode;
  switch (options.mode()) {
    case BenchMode::kExact:
      mode = absl::StrCat("exact, ", options.records, " records");
      result.requested = options.records;
      break;
    case BenchMode::kTimed:
      mode = absl::StrCat("timed, ", options.seconds, " seconds, saturation");
      break;
    case BenchMode::kRate:
      mode = absl::StrCat("rate-controlled, ", options.seconds, " seconds, ",
                          options.throughput_mbps, " MB/s");
      break;
  }
  out << "PerlBench Mode: " << mode << "\n";
  out.flush();

  // Worker plans.
  std::vector<int64_t> shares = options.records > 0 ? SplitRecords(options.records, workers)
                                                    : std::vector<int64_t>(workers, 0);
  const int64_t deadline_ns =
      options.seconds > 0 ? clock.NowNanos() + static_cast<int64_t>(options.seconds * 1e9) : 0;
  const double per_worker_rps = options.throughput_mbps > 0 ? options.throughput_mbps * 1024.0 *
                                                                  1024.0 / options.size / workers
                                                            : 0;
  std::vector<WorkerPlan> plans(workers);
  for (int w = 0; w < workers; ++w) {
    plans[w].size = options.size;
    plans[w].records = shares[w];
    plans[w].deadline_ns = deadline_ns;
    plans[w].records_per_second = per_worker_rps;
    if (options.mode() == BenchMode::kExact && shares[w] == 0) plans[w].records = -1;  // idle
  }

  RecorderOptions recorder_options;
  recorder_options.idle_ns = options.idle_ns;
  RecorderThread recorder(**channels, sink, recorder_options);
  recorder.Start();

  std::atomic<bool> stop_workers{false};
  std::atomic<int> running{workers};
  std::vector<WorkerResult> results(workers);
  std::vector<std::thread> threads;
  threads.reserve(workers);
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      if (plans[w].records >= 0) {
        results[w] =
            RunWorker(plans[w], options.time_unit, clock, (*channels)->producer(w), stop_workers);
      }
      running.fetch_sub(1, std::memory_order_release);
    });
  }

  const bool progress = options.progress.value_or(isatty(STDERR_FILENO) == 1);
  bool progress_shown = false;
  int64_t windows_reported = 0;
  int64_t csv_id = 0;
  auto print_ready = [&] {
    for (PrintedWindow& r : sink.TakeReady()) {
      if (progress_shown) {
        err << "\r\033[K" << std::flush;
        progress_shown = false;
      }
      const ReportRow row = MakeReportRow(r.snapshot, r.seconds);
      out << FormatConsoleLine(ctx, row, r.total) << "\n" << std::flush;
      if (csv) *csv << CsvRow(ctx, row, ++csv_id, r.total, r.wall) << "\n";
      latest.Publish(r.snapshot, r.seconds, r.total);
      if (r.total) {
        result.total = r.snapshot;
      } else {
        ++windows_reported;
      }
    }
  };

  int64_t last_progress_ns = start_ns;
  while (running.load(std::memory_order_acquire) > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) {
      stop_workers.store(true, std::memory_order_relaxed);
    }
    print_ready();
    const int64_t now = MonotonicNanos();
    if (progress && now - start_ns > 2'000'000'000 && now - last_progress_ns > 500'000'000) {
      const double secs = static_cast<double>(now - start_ns) / 1e9;
      const uint64_t consumed = recorder.consumed();
      err << "\r\033[K[perld bench] "
          << absl::StrFormat("%.1f s, %d records, %.2f M records/s", secs, consumed,
                             static_cast<double>(consumed) / secs / 1e6)
          << std::flush;
      progress_shown = true;
      last_progress_ns = now;
    }
  }
  for (auto& t : threads) t.join();
  recorder.StopAndDrain();  // every queued timestamp reaches the windows
  const int64_t end_ns = MonotonicNanos();
  sink.Finish(end_ns);
  print_ready();
  if (metrics) metrics->Stop();

  for (const WorkerResult& r : results) result.attempted += r.attempted;
  result.dropped = static_cast<int64_t>((*channels)->dropped());
  result.blocked = static_cast<int64_t>((*channels)->blocked());
  result.windows_reported = windows_reported;
  result.seconds = static_cast<double>(end_ns - start_ns) / 1e9;
  result.peak_rss_kb = PeakRssKb();
  if (csv) {
    csv->flush();
    if (!*csv) err << "perld bench: error writing " << options.csv_file << "\n";
  }

  out << absl::StrFormat(
             "PerlBench Summary: %d records recorded of %d operations, %d dropped, %d blocked "
             "sends, %d invalid latencies, %.3f s, peak RSS %d KiB",
             result.total.records, result.attempted, result.dropped, result.blocked,
             result.total.invalid, result.seconds, result.peak_rss_kb)
      << "\n";
  bool ok =
      result.total.invalid == 0 && result.dropped == 0 && result.total.records == result.attempted;
  if (options.mode() == BenchMode::kExact && result.total.records != result.requested) {
    err << "perld bench: exact mode recorded " << result.total.records << " of " << result.requested
        << " requested records\n";
    ok = false;
  }
  if (result.total.invalid != 0) {
    err << "perld bench: " << result.total.invalid << " invalid latencies\n";
  }
  if (result.dropped != 0) {
    err << "perld bench: " << result.dropped << " timestamps dropped at the pending bound\n";
  }
  result.exit_code = ok ? 0 : 1;
  return result;
}

}  // namespace perld::bench
