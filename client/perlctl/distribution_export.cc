#include "client/perlctl/distribution_export.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "daemon/common/json_writer.h"

namespace perld::perlctl {
namespace {

// printf into a string, in the "C" locale's number format (HdrHistogram
// writes Locale.US: '.' decimals, no grouping).
template <typename... Args>
std::string Printf(const char* format, Args... args) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), format, args...);
  return buf;
}

}  // namespace

std::string DistributionJson(const ExportedDistribution& d) {
  json::JsonWriter j;
  j.BeginObject();
  j.Key("runId").Uint(d.run_id);
  j.Key("runName").String(d.run_name);
  j.Key("timeUnit").String(d.unit);
  if (d.first_window > 0) {
    j.Key("firstWindow").Int(d.first_window);
    j.Key("lastWindow").Int(d.last_window);
  }
  const v1::Window& t = d.total;
  j.Key("records").Int(t.records());
  j.Key("bytes").Int(t.bytes());
  j.Key("validLatencyRecords").Int(t.valid_latency_records());
  j.Key("invalidLatencyRecords").Int(t.invalid_latency_records());
  j.Key("lowerLatencyDiscardRecords").Int(t.lower_latency_discard_records());
  j.Key("higherLatencyDiscardRecords").Int(t.higher_latency_discard_records());
  j.Key("minLatency").Int(t.min_latency());
  j.Key("maxLatency").Int(t.max_latency());
  j.Key("totalLatency").Int(t.total_latency());
  j.Key("latencies").BeginArray();
  for (const auto& [latency, count] : d.buckets) j.BeginArray().Int(latency).Int(count).EndArray();
  j.EndArray().EndObject();
  return j.str() + "\n";
}

std::string DistributionCsv(const ExportedDistribution& d) {
  std::string out = absl::StrCat("latency_", d.unit, ",count\n");
  for (const auto& [latency, count] : d.buckets) absl::StrAppend(&out, latency, ",", count, "\n");
  return out;
}

std::string DistributionHgrm(const ExportedDistribution& d) {
  int64_t total = 0;
  double sum = 0;
  for (const auto& [latency, count] : d.buckets) {
    total += count;
    sum += static_cast<double>(latency) * static_cast<double>(count);
  }
  std::string out =
      Printf("%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)");
  const double mean = total > 0 ? sum / static_cast<double>(total) : 0;
  double squares = 0;
  int64_t cumulative = 0;
  for (const auto& [latency, count] : d.buckets) {
    const double deviation = static_cast<double>(latency) - mean;
    squares += deviation * deviation * static_cast<double>(count);
    cumulative += count;
    const double value = static_cast<double>(latency);
    if (cumulative < total) {
      const double fraction = static_cast<double>(cumulative) / static_cast<double>(total);
      out += Printf("%12.3f %2.12f %10lld %14.2f\n", value, fraction,
                    static_cast<long long>(cumulative), 1 / (1 - fraction));
    } else {  // the last line: 100%, no 1/(1-p)
      out += Printf("%12.3f %2.12f %10lld\n", value, 1.0, static_cast<long long>(cumulative));
    }
  }
  const double stddev = total > 0 ? std::sqrt(squares / static_cast<double>(total)) : 0;
  const double max = d.buckets.empty() ? 0 : static_cast<double>(d.buckets.back().first);
  out += Printf("#[Mean    = %12.3f, StdDeviation   = %12.3f]\n", mean, stddev);
  out +=
      Printf("#[Max     = %12.3f, Total count    = %12lld]\n", max, static_cast<long long>(total));
  out += Printf("#[Buckets = %12lld, SubBuckets     = %12d]\n",
                static_cast<long long>(d.buckets.size()), 1);
  return out;
}

}  // namespace perld::perlctl
