#include "client/perlctl/distribution_export.h"

#include <algorithm>
#include <charconv>
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

namespace {

// HdrHistogram's header line of a percentile distribution.
std::string HgrmHeader() {
  return Printf("%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)");
}

// `v` with `decimals` decimals as Java's Formatter writes "%.Nf": the
// shortest decimal that reads back as `v`, rounded half up (printf rounds the
// binary value half to even: 0.9997802734375 is ...437 there, ...438 in
// Java). REQUIRES: v finite, >= 0.
std::string JavaFixed(double v, int decimals) {
  char buf[400];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed);
  if (ec != std::errc()) return Printf("%.*f", decimals, v);
  std::string digits(buf, end);
  size_t point = digits.find('.');
  if (point == std::string::npos) {
    point = digits.size();
    digits += '.';
  }
  digits.append(static_cast<size_t>(decimals) + 1, '0');  // room to round
  const size_t keep = point + 1 + static_cast<size_t>(decimals);
  const bool up = digits[keep] >= '5';
  digits.resize(keep);
  if (decimals == 0) digits.pop_back();  // no '.'
  if (up) {
    size_t i = digits.size();
    for (;;) {
      if (i == 0) {
        digits.insert(digits.begin(), '1');
        break;
      }
      --i;
      if (digits[i] == '.') continue;
      if (digits[i] != '9') {
        ++digits[i];
        break;
      }
      digits[i] = '0';
    }
  }
  return digits;
}

// A row below 100% and the last (100%) row, as outputPercentileDistribution
// prints them (values with 3 decimals: perld's latencies are integers).
std::string HgrmRow(int64_t value, double fraction, int64_t cumulative) {
  return Printf("%12.3f %14s %10lld %14s\n", static_cast<double>(value),
                JavaFixed(fraction, 12).c_str(), static_cast<long long>(cumulative),
                JavaFixed(1 / (1 - fraction), 2).c_str());
}
std::string HgrmLastRow(int64_t value, int64_t cumulative) {
  return Printf("%12.3f %2.12f %10lld\n", static_cast<double>(value), 1.0,
                static_cast<long long>(cumulative));
}

// The #[Mean/Max/Buckets] footer over the exact distribution.
std::string HgrmFooter(const ExportedDistribution& d) {
  int64_t total = 0;
  double sum = 0;
  for (const auto& [latency, count] : d.buckets) {
    total += count;
    sum += static_cast<double>(latency) * static_cast<double>(count);
  }
  const double mean = total > 0 ? sum / static_cast<double>(total) : 0;
  double squares = 0;
  for (const auto& [latency, count] : d.buckets) {
    const double deviation = static_cast<double>(latency) - mean;
    squares += deviation * deviation * static_cast<double>(count);
  }
  const double stddev = total > 0 ? std::sqrt(squares / static_cast<double>(total)) : 0;
  const double max = d.buckets.empty() ? 0 : static_cast<double>(d.buckets.back().first);
  std::string out = Printf("#[Mean    = %12.3f, StdDeviation   = %12.3f]\n", mean, stddev);
  out +=
      Printf("#[Max     = %12.3f, Total count    = %12lld]\n", max, static_cast<long long>(total));
  out += Printf("#[Buckets = %12lld, SubBuckets     = %12d]\n",
                static_cast<long long>(d.buckets.size()), 1);
  return out;
}

}  // namespace

std::string DistributionHgrm(const ExportedDistribution& d) {
  int64_t total = 0;
  for (const auto& bucket : d.buckets) total += bucket.second;
  std::string out = HgrmHeader();
  int64_t cumulative = 0;
  for (const auto& [latency, count] : d.buckets) {
    cumulative += count;
    if (cumulative < total) {
      out += HgrmRow(latency, static_cast<double>(cumulative) / static_cast<double>(total),
                     cumulative);
    } else {
      out += HgrmLastRow(latency, cumulative);
    }
  }
  return out + HgrmFooter(d);
}

std::string DistributionHgrmLadder(const ExportedDistribution& d, PercentileMethod method) {
  std::vector<int64_t> cumulative;  // cumulative[i]: records in buckets 0..i
  cumulative.reserve(d.buckets.size());
  int64_t total = 0;
  for (const auto& bucket : d.buckets) cumulative.push_back(total += bucket.second);
  std::string out = HgrmHeader();
  if (total > 0) {
    // HdrHistogram's PercentileIterator: from level 0, each step adds
    // 100 / (ticks * 2^(floor(log2(100 / (100 - level))) + 1)); a row per
    // level up to the first whose record lies in the largest latency's
    // bucket, then the 100% row.
    constexpr int kTicksPerHalfDistance = 5;
    constexpr int kMaxRows = 10'000;  // the levels approach 100: a bound
    double level = 0;
    for (int row = 0; row < kMaxRows && level < 100.0; ++row) {
      absl::StatusOr<PercentileSet> one = PercentileSet::Create({level}, method);
      if (!one.ok()) break;
      const int64_t index = one->Index(0, total);
      const size_t b = static_cast<size_t>(
          std::upper_bound(cumulative.begin(), cumulative.end(), index) - cumulative.begin());
      out += HgrmRow(d.buckets[b].first, level / 100.0, cumulative[b]);
      if (cumulative[b] == total) break;  // then the 100% row
      const auto ticks = static_cast<int64_t>(
          kTicksPerHalfDistance *
          std::pow(2, static_cast<int64_t>(std::log(100.0 / (100.0 - level)) / std::log(2)) + 1));
      level += 100.0 / static_cast<double>(ticks);
    }
    out += HgrmLastRow(d.buckets.back().first, total);
  }
  return out + HgrmFooter(d);
}

}  // namespace perld::perlctl
