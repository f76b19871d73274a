#include "daemon/bench/sbk_report.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace perld::bench {
namespace {

ReportContext Context() {
  ReportContext ctx;
  ctx.action = "Writing";
  ctx.unit = TimeUnit::kNs;
  ctx.writers = 2;
  ctx.readers = 0;
  ctx.percentiles = {50, 92.5, 99.99};
  return ctx;
}

LatencySnapshot Snapshot() {
  LatencySnapshot s;
  s.records = 3'145'728;
  s.bytes = 3'145'728LL * 1024;  // 3072 MiB
  s.total_latency = 300;
  s.valid = 100;
  s.lower_discard = 0;
  s.higher_discard = 50;
  s.invalid = 7;
  s.min_latency = 1;
  s.max_latency = 9;
  s.values = {2, 5, 9};
  s.counts = {40, 10, 1};
  return s;
}

TEST(SbkReportTest, RowFollowsSbkArithmetic) {
  const ReportRow row = MakeReportRow(Snapshot(), 2.0);
  EXPECT_DOUBLE_EQ(row.records_per_sec, 3'145'728 / 2.0);
  EXPECT_DOUBLE_EQ(row.mb_per_sec, 1536.0);          // 1 MB = 2^20 bytes
  EXPECT_DOUBLE_EQ(row.avg_latency, 300.0 / 150.0);  // over valid + discards
  EXPECT_EQ(row.invalid, 7);
}

TEST(SbkReportTest, CsvHeaderHasSbkColumnLayout) {
  EXPECT_EQ(CsvHeader(Context()),
            "ID,Date,Time,Header,Type,Connections,MaxConnections,Storage,Action,LatencyTimeUnit,"
            "Writers,Readers,MaxWriters,MaxReaders,ReportSeconds,MB,Records,Records/Sec,MB/Sec,"
            "AvgLatency,MinLatency,MaxLatency,InvalidLatencies,LowerDiscard,HigherDiscard,"
            "Percentile_50,Percentile_92.5,Percentile_99.99,Percentile_Count_50,"
            "Percentile_Count_92.5,Percentile_Count_99.99");
}

TEST(SbkReportTest, CsvRowMatchesHeaderColumnByColumn) {
  const ReportContext ctx = Context();
  const std::string row = CsvRow(ctx, MakeReportRow(Snapshot(), 2.0), 3, true, 0);
  const std::vector<std::string> names = absl::StrSplit(CsvHeader(ctx), ',');
  const std::vector<std::string> cells = absl::StrSplit(row, ',');
  ASSERT_EQ(cells.size(), names.size()) << row;
  auto cell = [&](const std::string& name) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return cells[i];
    }
    return std::string("<missing>");
  };
  EXPECT_EQ(cell("ID"), "3");
  EXPECT_EQ(cell("Type"), "Total");
  EXPECT_EQ(cell("Storage"), "PerlBench");
  EXPECT_EQ(cell("Action"), "Writing");
  EXPECT_EQ(cell("LatencyTimeUnit"), "NANOSECONDS");
  EXPECT_EQ(cell("Writers"), "2");
  EXPECT_EQ(cell("ReportSeconds"), "2");
  EXPECT_EQ(cell("MB"), "3072.0");
  EXPECT_EQ(cell("Records"), "3145728");
  EXPECT_EQ(cell("MB/Sec"), "1536.00");
  EXPECT_EQ(cell("InvalidLatencies"), "7");
  EXPECT_EQ(cell("HigherDiscard"), "50");
  EXPECT_EQ(cell("Percentile_92.5"), "5");
  EXPECT_EQ(cell("Percentile_Count_99.99"), "1");
  const std::vector<std::string> regular =
      absl::StrSplit(CsvRow(ctx, MakeReportRow(Snapshot(), 2.0), 4, false, 0), ',');
  EXPECT_EQ(regular[4], "Regular");
}

TEST(SbkReportTest, ConsoleLineNamesEveryFigureAndPercentile) {
  const std::string line = FormatConsoleLine(Context(), MakeReportRow(Snapshot(), 2.0), true);
  EXPECT_EQ(line.rfind("Total PerlBench Writing", 0), 0u) << line;
  for (const char* part : {"2 writers", "3145728 records", "1536.00 MB/sec", "2.0 ns avg latency",
                           "1 ns min latency", "9 ns max latency", "7 invalid latencies",
                           "50 higher", "2 ns 50th", "5 ns 92.5th", "9 ns 99.99th"}) {
    EXPECT_NE(line.find(part), std::string::npos) << part << " in " << line;
  }
}

}  // namespace
}  // namespace perld::bench
