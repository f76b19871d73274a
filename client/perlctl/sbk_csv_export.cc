#include "client/perlctl/sbk_csv_export.h"

#include <algorithm>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "daemon/core/latency_config.h"
#include "daemon/core/latency_snapshot.h"

namespace perld::perlctl {
namespace {

TimeUnit UnitOf(v1::TimeUnit unit) {
  switch (unit) {
    case v1::TIME_UNIT_US:
      return TimeUnit::kUs;
    case v1::TIME_UNIT_NS:
      return TimeUnit::kNs;
    default:
      return TimeUnit::kMs;
  }
}

bool InexactTotal(const v1::Window& w) {
  return w.kind() == v1::Window::KIND_TOTAL && !w.exact_total();
}

const v1::Percentile* Find(const v1::Window& w, double percent) {
  for (const v1::Percentile& p : w.percentiles()) {
    if (p.percent() == percent) return &p;
  }
  return nullptr;
}

// Closing order of two windows of one run (SbkRowWindows).
bool ClosedBefore(const v1::Window& a, const v1::Window& b) {
  if (a.end_unix_ms() != b.end_unix_ms()) return a.end_unix_ms() < b.end_unix_ms();
  if (a.kind() != b.kind()) return a.kind() == v1::Window::KIND_PERIODIC;
  return a.seq() < b.seq();
}

std::string WindowName(const v1::Window& w) {
  return absl::StrCat(w.kind() == v1::Window::KIND_PERIODIC ? "window " : "total segment ",
                      w.seq());
}

}  // namespace

bench::ReportContext SbkReportContext(const v1::RunInfo& run) {
  bench::ReportContext ctx;  // storage: "PerlBench", as csvDir
  ctx.action = run.writers() > 0 && run.readers() > 0 ? "Write_Reading"
               : run.readers() > 0                    ? "Reading"
                                                      : "Writing";
  ctx.unit = UnitOf(run.latency().time_unit());
  ctx.writers = run.writers();
  ctx.readers = run.readers();
  ctx.percentiles.assign(run.latency().percentiles().begin(), run.latency().percentiles().end());
  return ctx;
}

std::vector<double> MissingPercentiles(const v1::Window& w, const std::vector<double>& percents) {
  std::vector<double> missing;
  if (InexactTotal(w) || w.valid_latency_records() == 0) return missing;
  for (double p : percents) {
    if (Find(w, p) == nullptr) missing.push_back(p);
  }
  return missing;
}

bench::ReportRow SbkReportRow(const v1::Window& w, const std::vector<double>& percents) {
  LatencySnapshot s;
  s.records = w.records();
  s.bytes = w.bytes();
  s.total_latency = w.total_latency();
  s.min_latency = w.min_latency();
  s.max_latency = w.max_latency();
  s.invalid = w.invalid_latency_records();
  s.lower_discard = w.lower_latency_discard_records();
  s.higher_discard = w.higher_latency_discard_records();
  s.valid = w.valid_latency_records();
  s.rejected = w.rejected_records();
  s.percentiles_exact = !InexactTotal(w);
  if (s.percentiles_exact && MissingPercentiles(w, percents).empty()) {
    for (double percent : percents) {
      const v1::Percentile* p = Find(w, percent);
      s.values.push_back(p != nullptr ? p->latency() : 0);  // none: an empty window's 0
      s.counts.push_back(p != nullptr ? p->count() : 0);
    }
  }
  // rate_seconds is the window's RateSeconds() (seconds unless remote
  // clients' spans set it); 0 from an older daemon: `seconds`.
  return bench::MakeReportRow(s, w.seconds(), w.rate_seconds());
}

std::vector<v1::Window> SbkRowWindows(const std::vector<v1::Window>& history) {
  std::vector<v1::Window> rows;
  for (const v1::Window& w : history) {
    if (w.kind() == v1::Window::KIND_PERIODIC || w.kind() == v1::Window::KIND_TOTAL_SEGMENT) {
      rows.push_back(w);
    }
  }
  std::stable_sort(rows.begin(), rows.end(), ClosedBefore);
  return rows;
}

int64_t DroppedWindows(const std::vector<v1::Window>& rows, int64_t latest_seq,
                       const v1::Window& total) {
  int64_t periodic = 0, first_periodic = 0, segments = 0, last_segment = 0;
  for (const v1::Window& w : rows) {
    if (w.kind() == v1::Window::KIND_PERIODIC) {
      ++periodic;
      if (first_periodic == 0 || w.seq() < first_periodic) first_periodic = w.seq();
      latest_seq = std::max(latest_seq, w.seq());
    } else {
      ++segments;
      last_segment = std::max(last_segment, w.seq());
    }
  }
  // A total segment closes with a periodic window, after it: with the run's
  // first window retained, nothing is gone.
  if (first_periodic == 1) return 0;
  if (segments == 0) last_segment = std::max<int64_t>(total.full_closes(), total.segments() - 1);
  return std::max<int64_t>(latest_seq - periodic, 0) +
         std::max<int64_t>(last_segment - segments, 0);
}

SbkCsvFile SbkCsv(const v1::GetRunResponse& run, const std::vector<v1::Window>& history) {
  const bench::ReportContext ctx = SbkReportContext(run.run());
  const std::vector<double>& percents = ctx.percentiles;
  const std::vector<v1::Window> rows = SbkRowWindows(history);
  SbkCsvFile file;
  file.dropped = DroppedWindows(rows, run.has_latest() ? run.latest().seq() : 0, run.total());
  file.text = bench::CsvHeader(ctx) + "\n";
  int64_t id = file.dropped;
  auto add = [&](const v1::Window& w, bool total) {
    absl::StrAppend(&file.text,
                    bench::CsvRow(ctx, SbkReportRow(w, percents), ++id, total,
                                  static_cast<std::time_t>(w.end_unix_ms() / 1000)),
                    "\n");
  };
  for (const v1::Window& w : rows) {
    const bool segment = w.kind() == v1::Window::KIND_TOTAL_SEGMENT;
    if (!MissingPercentiles(w, percents).empty()) file.without_percentiles.push_back(WindowName(w));
    add(w, segment);
    ++(segment ? file.segment_rows : file.regular_rows);
  }
  if (!MissingPercentiles(run.total(), percents).empty()) {
    file.without_percentiles.emplace_back("the total");
  }
  add(run.total(), true);
  return file;
}

}  // namespace perld::perlctl
