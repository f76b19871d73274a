#include "daemon/http/metrics_exposition.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace perld::http {
namespace {

constexpr double kBytesPerMebibyte = 1024.0 * 1024.0;
constexpr int64_t kNanosPerSecond = 1'000'000'000;

// HELP text escaping: backslash and newline (quotes stay as they are).
std::string EscapeHelp(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string IntText(int64_t v) { return absl::StrCat(v); }

// Writes the samples of one family: `# HELP`, `# TYPE`, then one line per
// (labels, value) pair. `labels` is the text between the braces.
class FamilyWriter {
 public:
  FamilyWriter(std::string* out, const std::string& name, const std::string& help)
      : out_(out), name_(name) {
    *out_ += absl::StrCat("# HELP ", name, " ", EscapeHelp(help), "\n# TYPE ", name, " gauge\n");
  }
  void Sample(const std::string& labels, const std::string& value) {
    *out_ += absl::StrCat(name_, "{", labels, "} ", value, "\n");
  }

 private:
  std::string* out_;
  std::string name_;
};

// A window figure: the text of one sample value for one window.
using Figure = std::function<std::string(const ExpositionWindow&, TimeUnit)>;

double Rate(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0; }

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatSampleValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string UnitsToSecondsText(int64_t value, TimeUnit unit) {
  // units per second: 1000 (ms), 1'000'000 (us), 1'000'000'000 (ns).
  const int64_t per_second = kNanosPerSecond / NanosPerUnit(unit);
  int digits = 0;
  for (int64_t p = per_second; p > 1; p /= 10) ++digits;
  const bool negative = value < 0;
  // Work on the magnitude as unsigned so INT64_MIN stays well defined.
  const uint64_t magnitude =
      negative ? uint64_t{0} - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  const uint64_t whole = magnitude / static_cast<uint64_t>(per_second);
  uint64_t frac = magnitude % static_cast<uint64_t>(per_second);
  std::string out = absl::StrCat(negative ? "-" : "", whole);
  if (frac != 0) {
    std::string frac_text = absl::StrCat(frac);
    frac_text.insert(0, static_cast<size_t>(digits) - frac_text.size(), '0');
    while (frac_text.back() == '0') frac_text.pop_back();
    absl::StrAppend(&out, ".", frac_text);
  }
  return out;
}

std::string RenderExposition(const ExpositionInput& in) {
  return RenderExposition(std::span<const ExpositionInput>(&in, 1));
}

std::string RenderExposition(std::span<const ExpositionInput> runs) {
  struct Scoped {
    std::string labels;  // run labels plus window="..."
    const ExpositionWindow* window;
    TimeUnit unit;
  };
  std::vector<std::string> run_labels;
  std::vector<Scoped> windows;
  for (const ExpositionInput& in : runs) {
    std::vector<std::string> parts;
    for (const auto& [key, value] : in.labels.extra) {
      parts.push_back(absl::StrCat(key, "=\"", EscapeLabelValue(value), "\""));
    }
    if (in.labels.sbk) {
      parts.push_back(absl::StrCat("storage=\"", EscapeLabelValue(in.labels.storage),
                                   "\",action=\"", EscapeLabelValue(in.labels.action),
                                   "\",writers=\"", in.labels.writers, "\",readers=\"",
                                   in.labels.readers, "\""));
    }
    std::string labels = absl::StrJoin(parts, ",");
    if (in.interval) {
      windows.push_back({absl::StrCat(labels, ",window=\"interval\""), &*in.interval, in.unit});
    }
    if (in.total) {
      windows.push_back({absl::StrCat(labels, ",window=\"total\""), &*in.total, in.unit});
    }
    run_labels.push_back(std::move(labels));
  }
  std::string out;
  if (!runs.empty()) {
    FamilyWriter resolution(&out, "perld_latency_resolution_seconds",
                            "Latency time unit of the run; every latency is a multiple of it.");
    for (size_t i = 0; i < runs.size(); ++i) {
      resolution.Sample(run_labels[i], UnitsToSecondsText(1, runs[i].unit));
    }
  }
  if (windows.empty()) return out;

  const std::pair<const char*, const char*> names[] = {
      {"perld_window_seconds", "Length of the window in seconds."},
      {"perld_records", "Records accepted in the window (valid, discarded and invalid)."},
      {"perld_bytes", "Bytes of the records accepted in the window."},
      {"perld_records_per_second", "Records per second over the window."},
      {"perld_mebibytes_per_second", "Throughput in MiB (2^20 bytes) per second over the window."},
      {"perld_latency_average_seconds",
       "Average latency over valid and discarded records, in seconds."},
      {"perld_latency_min_seconds", "Smallest non-negative latency in seconds, 0 if none."},
      {"perld_latency_max_seconds", "Largest non-negative latency in seconds, 0 if none."},
      {"perld_invalid_latencies", "Records with a negative latency."},
      {"perld_lower_discards", "Records with a latency below the minimum latency."},
      {"perld_higher_discards", "Records with a latency above the maximum latency."},
  };
  const Figure figures[] = {
      [](const ExpositionWindow& w, TimeUnit) { return FormatSampleValue(w.seconds); },
      [](const ExpositionWindow& w, TimeUnit) { return IntText(w.snapshot.records); },
      [](const ExpositionWindow& w, TimeUnit) { return IntText(w.snapshot.bytes); },
      [](const ExpositionWindow& w, TimeUnit) {
        return FormatSampleValue(Rate(static_cast<double>(w.snapshot.records), w.seconds));
      },
      [](const ExpositionWindow& w, TimeUnit) {
        return FormatSampleValue(
            Rate(static_cast<double>(w.snapshot.bytes) / kBytesPerMebibyte, w.seconds));
      },
      [](const ExpositionWindow& w, TimeUnit unit) {
        return FormatSampleValue(w.snapshot.AvgLatency() * static_cast<double>(NanosPerUnit(unit)) /
                                 static_cast<double>(kNanosPerSecond));
      },
      [](const ExpositionWindow& w, TimeUnit unit) {
        return UnitsToSecondsText(w.snapshot.min_latency, unit);
      },
      [](const ExpositionWindow& w, TimeUnit unit) {
        return UnitsToSecondsText(w.snapshot.max_latency, unit);
      },
      [](const ExpositionWindow& w, TimeUnit) { return IntText(w.snapshot.invalid); },
      [](const ExpositionWindow& w, TimeUnit) { return IntText(w.snapshot.lower_discard); },
      [](const ExpositionWindow& w, TimeUnit) { return IntText(w.snapshot.higher_discard); },
  };
  static_assert(std::size(names) == std::size(figures));
  for (size_t f = 0; f < std::size(names); ++f) {
    FamilyWriter family(&out, names[f].first, names[f].second);
    for (const Scoped& w : windows) family.Sample(w.labels, figures[f](*w.window, w.unit));
  }

  // Percentiles: one family for the values, one for the counts at them.
  auto percentile_family = [&](const char* name, const char* help, bool values) {
    FamilyWriter family(&out, name, help);
    for (const Scoped& w : windows) {
      const LatencySnapshot& s = w.window->snapshot;
      const size_t n = std::min({s.percents.size(), s.values.size(), s.counts.size()});
      for (size_t i = 0; i < n; ++i) {
        family.Sample(
            absl::StrCat(w.labels, ",percentile=\"", FormatSampleValue(s.percents[i]), "\""),
            values ? UnitsToSecondsText(s.values[i], w.unit) : IntText(s.counts[i]));
      }
    }
  };
  percentile_family("perld_latency_seconds", "Exact latency at the percentile, in seconds.", true);
  percentile_family("perld_latency_percentile_records",
                    "Records whose latency equals the latency at the percentile.", false);
  return out;
}

LatestMetrics::LatestMetrics(ExpositionLabels labels, TimeUnit unit) {
  input_.labels = std::move(labels);
  input_.unit = unit;
}

void LatestMetrics::Publish(const LatencySnapshot& snapshot, double seconds, bool total) {
  std::lock_guard<std::mutex> lock(mu_);
  if (total) {
    input_.total = ExpositionWindow{snapshot, seconds};
    running_.reset();
    return;
  }
  input_.interval = ExpositionWindow{snapshot, seconds};
  if (!running_) {
    running_ = ExpositionWindow{snapshot, seconds};
    running_->snapshot.percents.clear();
    running_->snapshot.fractions.clear();
    running_->snapshot.values.clear();
    running_->snapshot.counts.clear();
    running_->snapshot.median = 0;
  } else {
    running_->snapshot.AddCountersOf(snapshot);
    running_->seconds += seconds;
  }
  input_.total = running_;
}

std::string LatestMetrics::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  return RenderExposition(input_);
}

}  // namespace perld::http
