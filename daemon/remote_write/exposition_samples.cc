#include "daemon/remote_write/exposition_samples.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "daemon/remote_write/remote_write_encoding.h"

namespace perld::remote_write {
namespace {

// absl's string_view is its own type in Debian's Abseil.
absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool IsNameChar(char c, bool first) {
  return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (!first && absl::ascii_isdigit(static_cast<unsigned char>(c)));
}

// The end of the series text of `line` (after the name and its `{...}`), or
// npos when the line is not a sample.
size_t SeriesEnd(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && IsNameChar(line[i], i == 0)) ++i;
  if (i == 0) return std::string_view::npos;
  if (i < line.size() && line[i] == '{') {
    bool quoted = false;
    for (++i; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted) {
        if (c == '\\') {
          ++i;
        } else if (c == '"') {
          quoted = false;
        }
      } else if (c == '"') {
        quoted = true;
      } else if (c == '}') {
        return i + 1;
      }
    }
    return std::string_view::npos;
  }
  return i;
}

// The labels of a series text `name{k="v",...}` with __name__; false when
// malformed.
bool ParseLabels(std::string_view series, std::vector<Label>* labels) {
  const size_t brace = series.find('{');
  labels->emplace_back("__name__", std::string(series.substr(0, brace)));
  if (brace == std::string_view::npos) return true;
  size_t i = brace + 1;
  const size_t end = series.size() - 1;  // the closing '}'
  while (i < end) {
    const size_t eq = series.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= end || series[eq + 1] != '"') return false;
    const absl::string_view trimmed = absl::StripAsciiWhitespace(Absl(series.substr(i, eq - i)));
    std::string name(trimmed.data(), trimmed.size());
    if (name.empty()) return false;
    std::string value;
    size_t j = eq + 2;
    for (; j < end && series[j] != '"'; ++j) {
      if (series[j] == '\\' && j + 1 < end) {
        const char e = series[++j];
        value.push_back(e == 'n' ? '\n' : e);
      } else {
        value.push_back(series[j]);
      }
    }
    if (j >= end) return false;  // no closing quote
    labels->emplace_back(std::move(name), std::move(value));
    i = j + 1;
    while (i < end && (series[i] == ',' || series[i] == ' ')) ++i;
  }
  return true;
}

}  // namespace

bool ParseSampleValue(std::string_view text, double* value) {
  if (text.empty()) return false;
  bool negative = false;
  if (text.front() == '+' || text.front() == '-') {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  if (absl::EqualsIgnoreCase(Absl(text), "inf") || absl::EqualsIgnoreCase(Absl(text), "infinity")) {
    *value = negative ? -std::numeric_limits<double>::infinity()
                      : std::numeric_limits<double>::infinity();
    return true;
  }
  if (absl::EqualsIgnoreCase(Absl(text), "nan")) {
    *value = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (text.empty() ||
      !(absl::ascii_isdigit(static_cast<unsigned char>(text.front())) || text.front() == '.')) {
    return false;
  }
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  // Out of range: from_chars leaves v alone; Prometheus (Go) gives +-Inf or 0.
  if (ec == std::errc::result_out_of_range) {
    return false;
  }
  if (ec != std::errc() || end != text.data() + text.size()) return false;
  *value = negative ? -v : v;
  return true;
}

int64_t ExpositionSamples::Collect(std::string_view text, int64_t timestamp_ms,
                                   std::vector<QueuedSample>* out) {
  ++generation_;
  int64_t skipped = 0;
  std::vector<Label> labels;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    const size_t series_end = SeriesEnd(line);
    if (series_end == std::string_view::npos || series_end >= line.size() ||
        line[series_end] != ' ') {
      ++skipped;
      continue;
    }
    const std::string_view series = line.substr(0, series_end);
    std::string_view rest = line.substr(series_end + 1);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    const std::string_view value_text = rest.substr(0, rest.find(' '));
    double value = 0;
    if (!ParseSampleValue(value_text, &value)) {
      ++skipped;
      continue;
    }
    auto it = interned_.find(Absl(series));
    if (it == interned_.end()) {
      labels.clear();
      if (!ParseLabels(series, &labels)) {
        ++skipped;
        continue;
      }
      it = interned_
               .emplace(std::string(series),
                        Interned{std::make_shared<const std::string>(EncodeLabels(labels)), 0})
               .first;
    }
    it->second.generation = generation_;
    out->push_back({it->second.labels, value, timestamp_ms});
  }
  absl::erase_if(interned_,
                 [this](const auto& entry) { return entry.second.generation != generation_; });
  return skipped;
}

}  // namespace perld::remote_write
