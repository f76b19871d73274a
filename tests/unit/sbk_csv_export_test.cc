// `perlctl export --format sbk-csv` (client/perlctl/sbk_csv_export.h): the
// rows the daemon's csvDir writer writes, from the Query API's protos.
#include "client/perlctl/sbk_csv_export.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "daemon/bench/sbk_report.h"
#include "daemon/core/latency_snapshot.h"

namespace perld::perlctl {
namespace {

const std::vector<double> kPercents = {50, 99.9};

v1::RunInfo RunInfoOf(int writers = 2, int readers = 0) {
  v1::RunInfo run;
  run.set_id(7);
  run.set_state(v1::RUN_STATE_FINISHED);
  run.set_writers(writers);
  run.set_readers(readers);
  run.mutable_latency()->set_time_unit(v1::TIME_UNIT_NS);
  for (double p : kPercents) run.mutable_latency()->add_percentiles(p);
  return run;
}

// A window as the daemon's run_proto ToProto writes it from `s`.
v1::Window WindowOf(v1::Window::Kind kind, int64_t seq, int64_t end_ms, const LatencySnapshot& s,
                    double seconds, double rate_seconds = 0) {
  v1::Window w;
  w.set_kind(kind);
  w.set_seq(seq);
  w.set_start_unix_ms(end_ms - static_cast<int64_t>(seconds * 1000));
  w.set_end_unix_ms(end_ms);
  w.set_seconds(seconds);
  w.set_rate_seconds(rate_seconds > 0 ? rate_seconds : seconds);
  w.set_records(s.records);
  w.set_bytes(s.bytes);
  w.set_valid_latency_records(s.valid);
  w.set_invalid_latency_records(s.invalid);
  w.set_lower_latency_discard_records(s.lower_discard);
  w.set_higher_latency_discard_records(s.higher_discard);
  w.set_min_latency(s.min_latency);
  w.set_max_latency(s.max_latency);
  w.set_total_latency(s.total_latency);
  for (size_t i = 0; i < s.values.size(); ++i) {
    v1::Percentile* p = w.add_percentiles();
    p->set_percent(s.percents[i]);
    p->set_latency(s.values[i]);
    p->set_count(s.counts[i]);
  }
  if (kind == v1::Window::KIND_TOTAL) {
    w.set_exact_total(s.percentiles_exact);
    w.set_final(true);
    w.set_segments(1);
  }
  return w;
}

LatencySnapshot Snapshot(int64_t records, int64_t low, int64_t high) {
  LatencySnapshot s;
  s.records = records;
  s.bytes = records * 100;
  s.valid = records - 3;
  s.invalid = 1;
  s.lower_discard = 1;
  s.higher_discard = 1;
  s.total_latency = records * (low + high) / 2;
  s.min_latency = low;
  s.max_latency = high;
  s.percents = kPercents;
  s.values = {(low + high) / 2, high - 1};
  s.counts = {3, 1};
  return s;
}

v1::Window Periodic(int64_t seq, int64_t end_ms) {
  return WindowOf(v1::Window::KIND_PERIODIC, seq, end_ms, Snapshot(1000 + seq, seq, 100 + seq), 1);
}
v1::Window Segment(int64_t seq, int64_t end_ms) {
  return WindowOf(v1::Window::KIND_TOTAL_SEGMENT, seq, end_ms, Snapshot(5000 + seq, 1, 900), 3);
}

std::vector<int64_t> Seqs(const std::vector<v1::Window>& rows) {
  std::vector<int64_t> out;
  out.reserve(rows.size());
  for (const v1::Window& w : rows) {
    out.push_back(w.kind() == v1::Window::KIND_PERIODIC ? w.seq() : -w.seq());
  }
  return out;
}

TEST(SbkCsvExportTest, ContextIsTheRunsAsCsvDirFillsIt) {
  bench::ReportContext ctx = SbkReportContext(RunInfoOf(2, 0));
  EXPECT_EQ(ctx.storage, "PerlBench");
  EXPECT_EQ(ctx.action, "Writing");
  EXPECT_EQ(ctx.unit, TimeUnit::kNs);
  EXPECT_EQ(ctx.writers, 2);
  EXPECT_EQ(ctx.readers, 0);
  EXPECT_EQ(ctx.percentiles, kPercents);
  EXPECT_EQ(SbkReportContext(RunInfoOf(0, 3)).action, "Reading");
  EXPECT_EQ(SbkReportContext(RunInfoOf(1, 1)).action, "Write_Reading");
  v1::RunInfo us = RunInfoOf();
  us.mutable_latency()->set_time_unit(v1::TIME_UNIT_US);
  EXPECT_EQ(SbkReportContext(us).unit, TimeUnit::kUs);
}

TEST(SbkCsvExportTest, RowIsTheSnapshotsRow) {
  const LatencySnapshot s = Snapshot(2'000'003, 4, 90);
  const v1::Window w = WindowOf(v1::Window::KIND_PERIODIC, 1, 1'700'000'000'000, s, 1.25, 1.5);
  const bench::ReportContext ctx = SbkReportContext(RunInfoOf());
  EXPECT_EQ(bench::CsvRow(ctx, SbkReportRow(w, kPercents), 1, false, 1'700'000'000),
            bench::CsvRow(ctx, bench::MakeReportRow(s, 1.25, 1.5), 1, false, 1'700'000'000));
  const bench::ReportRow row = SbkReportRow(w, kPercents);
  EXPECT_DOUBLE_EQ(row.records_per_sec, 2'000'003 / 1.5);  // over the rate seconds
  EXPECT_EQ(row.percentile_values, s.values);
  EXPECT_EQ(row.percentile_counts, s.counts);
}

TEST(SbkCsvExportTest, PercentilesFollowTheRunsOrder) {
  v1::Window w = Periodic(1, 1000);
  std::swap(*w.mutable_percentiles(0), *w.mutable_percentiles(1));
  const bench::ReportRow row = SbkReportRow(w, kPercents);
  EXPECT_EQ(row.percentile_values, Snapshot(1001, 1, 101).values);
}

TEST(SbkCsvExportTest, InexactTotalAndMissingPercentilesLeaveCellsEmpty) {
  LatencySnapshot s = Snapshot(10, 1, 9);
  s.percentiles_exact = false;
  s.values.clear();
  s.counts.clear();
  const v1::Window total = WindowOf(v1::Window::KIND_TOTAL, 1, 5000, s, 5);
  EXPECT_TRUE(MissingPercentiles(total, kPercents).empty());  // none asked of it
  const bench::ReportRow row = SbkReportRow(total, kPercents);
  EXPECT_FALSE(row.percentiles_exact);
  EXPECT_TRUE(row.percentile_values.empty());
  const std::string line = bench::CsvRow(SbkReportContext(RunInfoOf()), row, 3, true, 5);
  // ...,MinLatency,MaxLatency,InvalidLatencies,LowerDiscard,HigherDiscard, 4 empty cells
  EXPECT_TRUE(line.ends_with(",1,9,1,1,1,,,,")) << line;

  v1::Window partial = Periodic(2, 2000);
  partial.mutable_percentiles()->RemoveLast();
  EXPECT_EQ(MissingPercentiles(partial, kPercents), std::vector<double>{99.9});
  EXPECT_TRUE(SbkReportRow(partial, kPercents).percentile_values.empty());
}

TEST(SbkCsvExportTest, EmptyWindowHasZeroPercentiles) {
  LatencySnapshot s;
  v1::Window w = WindowOf(v1::Window::KIND_PERIODIC, 1, 1000, s, 1);
  EXPECT_TRUE(MissingPercentiles(w, kPercents).empty());
  EXPECT_EQ(SbkReportRow(w, kPercents).percentile_values, (std::vector<int64_t>{0, 0}));
}

TEST(SbkCsvExportTest, RowWindowsAreInClosingOrder) {
  // Live history: closing order already, the total last.
  v1::Window total = WindowOf(v1::Window::KIND_TOTAL, 1, 4000, Snapshot(9, 1, 9), 4);
  std::vector<v1::Window> live = {Periodic(1, 1000), Periodic(2, 2000), Segment(1, 2000),
                                  Periodic(3, 3000), total};
  EXPECT_EQ(Seqs(SbkRowWindows(live)), (std::vector<int64_t>{1, 2, -1, 3}));
  // Restored from the state directory: periodic windows, then segments.
  std::vector<v1::Window> restored = {Periodic(1, 1000), Periodic(2, 2000), Periodic(3, 3000),
                                      Segment(1, 2000), total};
  EXPECT_EQ(Seqs(SbkRowWindows(restored)), (std::vector<int64_t>{1, 2, -1, 3}));
}

TEST(SbkCsvExportTest, DroppedWindowsCountWhatRetentionDropped) {
  v1::Window total = WindowOf(v1::Window::KIND_TOTAL, 1, 9000, Snapshot(9, 1, 9), 9);
  total.set_full_closes(2);  // the run closed two total segments
  total.set_segments(3);
  // The first window retained: nothing dropped, whatever the total says.
  EXPECT_EQ(DroppedWindows({Periodic(1, 1000), Segment(1, 1000), Segment(2, 2000)}, 2, total), 0);
  // Windows 1-3 and segment 1 dropped; segment 2 retained.
  EXPECT_EQ(DroppedWindows({Periodic(4, 4000), Segment(2, 4000), Periodic(5, 5000)}, 5, total), 4);
  // No segment retained: both dropped, as the total counts them.
  EXPECT_EQ(DroppedWindows({Periodic(6, 6000)}, 6, total), 7);
  // A total rebuilt from stored windows counts segments, not full closes.
  total.set_full_closes(0);
  EXPECT_EQ(DroppedWindows({Periodic(6, 6000)}, 6, total), 7);
  // Nothing retained but the total.
  total.set_segments(1);
  EXPECT_EQ(DroppedWindows({}, 3, total), 3);
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST(SbkCsvExportTest, FileIsCsvDirsFile) {
  v1::GetRunResponse run;
  *run.mutable_run() = RunInfoOf();
  const LatencySnapshot t = Snapshot(5000, 1, 900);
  *run.mutable_total() = WindowOf(v1::Window::KIND_TOTAL, 1, 3000, t, 3);
  *run.mutable_latest() = Periodic(3, 3000);
  const std::vector<v1::Window> history = {Periodic(1, 1000), Periodic(2, 2000), Segment(1, 2000),
                                           Periodic(3, 3000), run.total()};
  const SbkCsvFile file = SbkCsv(run, history);
  EXPECT_EQ(file.regular_rows, 3);
  EXPECT_EQ(file.segment_rows, 1);
  EXPECT_EQ(file.dropped, 0);
  EXPECT_TRUE(file.without_percentiles.empty());
  const bench::ReportContext ctx = SbkReportContext(run.run());
  // What RunCsvWriter writes for the same windows, in the same order.
  const std::vector<std::string> want = {
      bench::CsvHeader(ctx),
      bench::CsvRow(ctx, bench::MakeReportRow(Snapshot(1001, 1, 101), 1), 1, false, 1),
      bench::CsvRow(ctx, bench::MakeReportRow(Snapshot(1002, 2, 102), 1), 2, false, 2),
      bench::CsvRow(ctx, bench::MakeReportRow(Snapshot(5001, 1, 900), 3), 3, true, 2),
      bench::CsvRow(ctx, bench::MakeReportRow(Snapshot(1003, 3, 103), 1), 4, false, 3),
      bench::CsvRow(ctx, bench::MakeReportRow(t, 3), 5, true, 3),
  };
  EXPECT_EQ(Lines(file.text), want);
  EXPECT_TRUE(file.text.ends_with("\n"));
}

TEST(SbkCsvExportTest, RetainedRowsKeepTheirIds) {
  v1::GetRunResponse run;
  *run.mutable_run() = RunInfoOf();
  *run.mutable_total() = WindowOf(v1::Window::KIND_TOTAL, 1, 9000, Snapshot(9, 1, 9), 9);
  *run.mutable_latest() = Periodic(9, 9000);
  const SbkCsvFile file = SbkCsv(run, {Periodic(8, 8000), Periodic(9, 9000), run.total()});
  EXPECT_EQ(file.dropped, 7);
  EXPECT_EQ(file.regular_rows, 2);
  const std::vector<std::string> lines = Lines(file.text);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(lines[1].starts_with("8,")) << lines[1];
  EXPECT_TRUE(lines[2].starts_with("9,")) << lines[2];
  EXPECT_TRUE(lines[3].starts_with("10,")) << lines[3];
  EXPECT_NE(lines[3].find(",Total,"), std::string::npos);
}

TEST(SbkCsvExportTest, WindowsWithoutPercentilesAreNamed) {
  v1::GetRunResponse run;
  *run.mutable_run() = RunInfoOf();
  *run.mutable_total() = WindowOf(v1::Window::KIND_TOTAL, 1, 2000, Snapshot(9, 1, 9), 2);
  v1::Window segment = Segment(1, 1000);
  segment.clear_percentiles();
  const SbkCsvFile file = SbkCsv(run, {Periodic(1, 1000), segment, Periodic(2, 2000)});
  EXPECT_EQ(file.without_percentiles, std::vector<std::string>{"total segment 1"});
  const std::vector<std::string> lines = Lines(file.text);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_TRUE(lines[2].ends_with(",,,,")) << lines[2];
}

}  // namespace
}  // namespace perld::perlctl
