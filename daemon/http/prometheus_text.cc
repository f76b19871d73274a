#include "daemon/http/prometheus_text.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace perld::http {
namespace {

constexpr int64_t kNanosPerSecond = 1'000'000'000;

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kSummary:
      return "summary";
  }
  return "untyped";
}

}  // namespace

Labels& Labels::Add(std::string_view key, std::string_view value) {
  if (!text_.empty()) text_ += ',';
  text_.append(key).append("=\"").append(EscapeLabelValue(value)).append("\"");
  return *this;
}

Labels& Labels::AddText(std::string_view text) {
  if (text.empty()) return *this;
  if (!text_.empty()) text_ += ',';
  text_.append(text);
  return *this;
}

void PrometheusText::Family(std::string_view name, MetricType type, std::string_view help) {
  name_ = std::string(name);
  out_.append("# HELP ").append(name).append(" ").append(EscapeHelp(help));
  out_.append("\n# TYPE ").append(name).append(" ").append(TypeName(type)).append("\n");
}

void PrometheusText::Sample(const Labels& labels, std::string_view value) {
  SampleText("", labels.text(), "", value);
}

void PrometheusText::Sample(std::string_view suffix, const Labels& labels, std::string_view value) {
  SampleText(suffix, labels.text(), "", value);
}

void PrometheusText::SampleText(std::string_view suffix, std::string_view labels,
                                std::string_view extra, std::string_view value) {
  AppendSampleLine(&out_, name_, suffix, labels, extra, value);
}

void AppendSampleLine(std::string* out, std::string_view name, std::string_view suffix,
                      std::string_view labels, std::string_view extra, std::string_view value) {
  // One resize and straight copies: this runs for every line of a scrape.
  const bool braces = !labels.empty() || !extra.empty();
  const bool comma = !labels.empty() && !extra.empty();
  const size_t size = name.size() + suffix.size() + (braces ? 2 : 0) + labels.size() +
                      (comma ? 1 : 0) + extra.size() + 1 + value.size() + 1;
  const size_t at = out->size();
  out->resize(at + size);
  char* p = out->data() + at;
  auto put = [&p](std::string_view piece) {
    if (piece.empty()) return;  // an empty view's data() may be null: no memcpy
    std::memcpy(p, piece.data(), piece.size());
    p += piece.size();
  };
  put(name);
  put(suffix);
  if (braces) {
    *p++ = '{';
    put(labels);
    if (comma) *p++ = ',';
    put(extra);
    *p++ = '}';
  }
  *p++ = ' ';
  put(value);
  *p = '\n';
}

namespace {

// Backslash and newline escaped, and double quotes too when `quotes`.
std::string Escape(std::string_view text, bool quotes) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) { return Escape(value, /*quotes=*/true); }

std::string EscapeHelp(std::string_view text) { return Escape(text, /*quotes=*/false); }

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
  // Work on the magnitude as unsigned so INT64_MIN stays well defined.
  const bool negative = value < 0;
  const uint64_t magnitude =
      negative ? uint64_t{0} - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  const uint64_t whole = magnitude / static_cast<uint64_t>(per_second);
  uint64_t frac = magnitude % static_cast<uint64_t>(per_second);
  char buf[48];
  char* p = buf;
  if (negative) *p++ = '-';
  p = std::to_chars(p, buf + sizeof(buf), whole).ptr;
  if (frac != 0) {
    // `digits` fraction digits, leading zeros kept, trailing zeros dropped.
    while (frac % 10 == 0) {
      frac /= 10;
      --digits;
    }
    *p++ = '.';
    char* end = p + digits;
    for (char* q = end; q != p; frac /= 10) *--q = static_cast<char>('0' + frac % 10);
    p = end;
  }
  return std::string(buf, p);
}

std::string PercentToQuantileText(double percent) {
  const std::string text = FormatSampleValue(percent);
  // Only plain decimals in [0, 100] are shifted; anything else (exponent
  // form, out of range) falls back to the division.
  if (!(percent >= 0 && percent <= 100) || text.find_first_of("e+-N") != std::string::npos) {
    return FormatSampleValue(percent / 100.0);
  }
  const size_t dot = text.find('.');
  std::string whole = text.substr(0, dot);
  const std::string frac = dot == std::string::npos ? "" : text.substr(dot + 1);
  if (whole.size() < 2) whole.insert(0, 2 - whole.size(), '0');
  const std::string head = whole.substr(0, whole.size() - 2);
  std::string tail = whole.substr(whole.size() - 2) + frac;
  while (!tail.empty() && tail.back() == '0') tail.pop_back();
  const std::string integer = head.empty() ? "0" : head;
  return tail.empty() ? integer : absl::StrCat(integer, ".", tail);
}

}  // namespace perld::http
