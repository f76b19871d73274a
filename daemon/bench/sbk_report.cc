#include "daemon/bench/sbk_report.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/core/run_total.h"

namespace perld::bench {
namespace {

constexpr double kBytesPerMb = 1024.0 * 1024.0;

// Percent as the shortest text that round-trips ("5", "92.5", "99.99").
std::string PercentText(double percent) { return absl::StrFormat("%g", percent); }

}  // namespace

ReportRow MakeReportRow(const LatencySnapshot& s, double seconds, double rate_seconds) {
  ReportRow r;
  r.seconds = seconds;
  r.bytes = s.bytes;
  r.records = s.records;
  const double per = rate_seconds > 0 ? rate_seconds : seconds;
  r.records_per_sec = per > 0 ? static_cast<double>(s.records) / per : 0;
  r.mb_per_sec = per > 0 ? static_cast<double>(s.bytes) / kBytesPerMb / per : 0;
  r.avg_latency = s.AvgLatency();
  r.min_latency = s.min_latency;
  r.max_latency = s.max_latency;
  r.invalid = s.invalid;
  r.lower_discard = s.lower_discard;
  r.higher_discard = s.higher_discard;
  r.percentile_values = s.values;
  r.percentile_counts = s.counts;
  r.percentiles_exact = s.percentiles_exact;
  return r;
}

std::string PercentileName(double percent) { return PercentText(percent) + "th"; }

std::string FormatConsoleLine(const ReportContext& ctx, const ReportRow& row, bool total) {
  const char* u = TimeUnitName(ctx.unit);
  std::string out = absl::StrFormat(
      "%s%s %s %5d writers, %5d readers, %8.2f seconds, %11.1f MB, %12d records, %13.1f "
      "records/sec, "
      "%10.2f MB/sec, %10.1f %s avg latency, %8d %s min latency, %10d %s max latency; "
      "%6d invalid latencies; Discarded Latencies: %6d lower, %6d higher; Latency Percentiles:",
      total ? "Total " : "", ctx.storage, ctx.action, ctx.writers, ctx.readers, row.seconds,
      static_cast<double>(row.bytes) / kBytesPerMb, row.records, row.records_per_sec,
      row.mb_per_sec, row.avg_latency, u, row.min_latency, u, row.max_latency, u, row.invalid,
      row.lower_discard, row.higher_discard);
  if (!row.percentiles_exact) {
    absl::StrAppend(&out, " ", kInexactTotalReason);
  }
  for (size_t i = 0; i < ctx.percentiles.size() && i < row.percentile_values.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? " " : ", ", row.percentile_values[i], " ", u, " ",
                    PercentileName(ctx.percentiles[i]));
  }
  out += ".";
  return out;
}

std::string CsvHeader(const ReportContext& ctx) {
  std::string h =
      "ID,Date,Time,Header,Type,Connections,MaxConnections,Storage,Action,LatencyTimeUnit,"
      "Writers,Readers,MaxWriters,MaxReaders,ReportSeconds,MB,Records,Records/Sec,MB/Sec,"
      "AvgLatency,MinLatency,MaxLatency,InvalidLatencies,LowerDiscard,HigherDiscard";
  for (double p : ctx.percentiles) absl::StrAppend(&h, ",Percentile_", PercentText(p));
  for (double p : ctx.percentiles) absl::StrAppend(&h, ",Percentile_Count_", PercentText(p));
  return h;
}

std::string CsvRow(const ReportContext& ctx, const ReportRow& row, int64_t id, bool total,
                   std::time_t wall) {
  std::tm tm{};
  localtime_r(&wall, &tm);
  char date[16], time_of_day[16];
  std::strftime(date, sizeof(date), "%Y-%m-%d", &tm);
  std::strftime(time_of_day, sizeof(time_of_day), "%H:%M:%S", &tm);
  std::string out = absl::StrFormat(
      "%d,%s,%s,perld,%s,0,0,%s,%s,%s,%d,%d,%d,%d,%d,%.1f,%d,%.1f,%.2f,%.1f,%d,%d,%d,%d,%d", id,
      date, time_of_day, total ? "Total" : "Regular", ctx.storage, ctx.action,
      TimeUnitFullName(ctx.unit), ctx.writers, ctx.readers, ctx.writers, ctx.readers,
      static_cast<int64_t>(row.seconds), static_cast<double>(row.bytes) / kBytesPerMb, row.records,
      row.records_per_sec, row.mb_per_sec, row.avg_latency, row.min_latency, row.max_latency,
      row.invalid, row.lower_discard, row.higher_discard);
  // A total without exact percentiles leaves their cells empty, never 0.
  for (size_t i = 0; i < ctx.percentiles.size(); ++i) {
    out += ",";
    if (i < row.percentile_values.size()) absl::StrAppend(&out, row.percentile_values[i]);
  }
  for (size_t i = 0; i < ctx.percentiles.size(); ++i) {
    out += ",";
    if (i < row.percentile_counts.size()) absl::StrAppend(&out, row.percentile_counts[i]);
  }
  return out;
}

}  // namespace perld::bench
