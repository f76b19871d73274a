#include "daemon/common/slo.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "daemon/common/json_writer.h"

namespace perld {
namespace {

using Metric = SloTerm::Metric;
using Op = SloTerm::Op;

absl::Status Bad(const std::string& term, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("'", term, "': ", why));
}

std::string Compact(absl::string_view s) {
  std::string out;
  for (char c : s) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(c))) out += c;
  }
  return out;
}

bool Holds(double measured, Op op, double threshold) {
  switch (op) {
    case Op::kLe:
      return measured <= threshold;
    case Op::kLt:
      return measured < threshold;
    case Op::kGe:
      return measured >= threshold;
    case Op::kGt:
      return measured > threshold;
    case Op::kEq:
      return measured == threshold;
  }
  return false;
}

std::string Number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrCat(static_cast<int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string XmlEscaped(absl::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

absl::StatusOr<SloTerm> ParseTerm(const std::string& text) {
  SloTerm t;
  t.text = text;
  // The operator: the first of < > =, two characters when "<=", ">=", "==".
  const size_t at = text.find_first_of("<>=");
  if (at == std::string::npos || at == 0) {
    return Bad(text, "expected METRIC OP VALUE, e.g. p99<=2ms (OP: <=, <, >=, >, =)");
  }
  size_t op_len = 1;
  const bool two = at + 1 < text.size() && text[at + 1] == '=';
  switch (text[at]) {
    case '<':
      t.op = two ? Op::kLe : Op::kLt;
      break;
    case '>':
      t.op = two ? Op::kGe : Op::kGt;
      break;
    default:
      t.op = Op::kEq;
      break;
  }
  if (two) op_len = 2;
  const std::string metric = absl::AsciiStrToLower(text.substr(0, at));
  absl::string_view value = absl::string_view(text).substr(at + op_len);
  if (!ParseSloMetric(metric, &t.metric, &t.percent)) {
    return Bad(text, absl::StrCat("unknown metric '", metric, "' (", kSloMetrics, ")"));
  }
  // The number, then a latency's optional unit.
  std::string unit;
  if (!SplitAmount(value, &t.value, &unit) || t.value < 0) {
    return Bad(text, "the value must be a number >= 0");
  }
  if (!unit.empty()) {
    if (!t.latency()) {
      return Bad(text, absl::StrCat("'", metric, "' takes a plain number, not '", unit, "'"));
    }
    t.value_unit_ns = LatencyUnitNs(unit);
    if (t.value_unit_ns == 0) {
      return Bad(text, absl::StrCat("unknown unit '", unit, "' (ns, us, mcs, ms, s)"));
    }
  }
  return t;
}

}  // namespace

bool SplitAmount(absl::string_view text, double* number, std::string* suffix) {
  size_t end = 0;
  if (end < text.size() && (text[end] == '+' || text[end] == '-')) ++end;
  while (end < text.size() && (absl::ascii_isdigit(static_cast<unsigned char>(text[end])) ||
                               text[end] == '.' || text[end] == 'e' || text[end] == 'E' ||
                               ((text[end] == '-' || text[end] == '+') &&
                                (text[end - 1] == 'e' || text[end - 1] == 'E')))) {
    ++end;
  }
  if (!absl::SimpleAtod(text.substr(0, end), number) || !std::isfinite(*number)) return false;
  *suffix = std::string(text.substr(end));
  return true;
}

namespace {

// Every metric named by a word (pN is the other).
constexpr std::pair<const char*, Metric> kNamedMetrics[] = {
    {"min", Metric::kMin},         {"max", Metric::kMax},         {"avg", Metric::kAvg},
    {"invalid", Metric::kInvalid}, {"records", Metric::kRecords}, {"rate", Metric::kRate}};

}  // namespace

bool ParseSloMetric(const std::string& name, SloTerm::Metric* metric, double* percent) {
  const std::string m = absl::AsciiStrToLower(name);
  for (const auto& [text, named] : kNamedMetrics) {
    if (m == text) {
      *metric = named;
      return true;
    }
  }
  double p = 0;
  if (m.size() < 2 || m[0] != 'p' || !absl::SimpleAtod(m.substr(1), &p) || !(p >= 0 && p <= 100)) {
    return false;
  }
  *metric = Metric::kPercentile;
  *percent = p;
  return true;
}

std::string SloMetricName(SloTerm::Metric metric, double percent) {
  for (const auto& [text, named] : kNamedMetrics) {
    if (metric == named) return text;
  }
  return absl::StrCat("p", json::ShortestDouble(percent));
}

std::optional<double> SloValue(const SloFacts& f, SloTerm::Metric metric, double percent,
                               std::string* why) {
  std::string missing;
  switch (metric) {
    case Metric::kPercentile:
      if (const auto it = f.percentiles.find(percent); it != f.percentiles.end()) {
        return static_cast<double>(it->second);
      }
      missing = f.no_percentiles.empty() ? "not measured" : f.no_percentiles;
      break;
    case Metric::kMin:
    case Metric::kMax:
    case Metric::kAvg:
      if (f.valid > 0) {
        return metric == Metric::kMin   ? static_cast<double>(f.min)
               : metric == Metric::kMax ? static_cast<double>(f.max)
                                        : f.avg;
      }
      missing = "the run has no latency yet";
      break;
    case Metric::kInvalid:
      return static_cast<double>(f.invalid);
    case Metric::kRecords:
      return static_cast<double>(f.records);
    case Metric::kRate:
      return f.rate;
  }
  if (why != nullptr) *why = missing;
  return std::nullopt;
}

absl::StatusOr<std::vector<SloTerm>> ParseSlo(const std::string& expression) {
  std::vector<SloTerm> terms;
  for (absl::string_view part : absl::StrSplit(expression, ',')) {
    const std::string text = Compact(part);
    if (text.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("an empty term in '", expression, "' (terms are comma-separated)"));
    }
    absl::StatusOr<SloTerm> term = ParseTerm(text);
    if (!term.ok()) return term.status();
    terms.push_back(*std::move(term));
  }
  return terms;
}

int64_t LatencyUnitNs(absl::string_view unit) {
  if (unit == "ns") return 1;
  if (unit == "us" || unit == "mcs") return 1'000;
  if (unit == "ms") return 1'000'000;
  if (unit == "s") return 1'000'000'000;
  return 0;
}

std::string HumanLatency(double value, int64_t unit_ns) {
  const double ns = value * static_cast<double>(unit_ns);
  char buf[48];
  if (ns < 1e3) {
    std::snprintf(buf, sizeof(buf), "%.4g ns", ns);
  } else if (ns < 1e6) {
    std::snprintf(buf, sizeof(buf), "%.4g us", ns / 1e3);
  } else if (ns < 1e9) {
    std::snprintf(buf, sizeof(buf), "%.4g ms", ns / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%.4g s", ns / 1e9);
  }
  return buf;
}

std::vector<SloVerdict> EvaluateSlo(const std::vector<SloTerm>& terms, const SloFacts& facts) {
  std::vector<SloVerdict> verdicts;
  for (const SloTerm& t : terms) {
    SloVerdict v;
    v.term = &t;
    v.threshold = t.value;
    if (t.latency() && t.value_unit_ns != 0) {
      v.threshold =
          t.value * static_cast<double>(t.value_unit_ns) / static_cast<double>(facts.unit_ns);
    }
    std::string missing;
    v.measured = SloValue(facts, t.metric, t.percent, &missing);
    v.held = v.measured && Holds(*v.measured, t.op, v.threshold);
    std::string shown;
    if (!v.measured) {
      shown = absl::StrCat("cannot be measured: ", missing);
    } else if (t.latency()) {
      shown = absl::StrCat(Number(*v.measured), " ", facts.unit, " (",
                           HumanLatency(*v.measured, facts.unit_ns), "; the limit ",
                           HumanLatency(v.threshold, facts.unit_ns), ")");
    } else if (t.metric == Metric::kRate) {
      char rate[48];
      std::snprintf(rate, sizeof(rate), "%.1f records/s", *v.measured);
      shown = rate;
    } else {
      shown = Number(*v.measured);
    }
    v.line = absl::StrCat(v.held ? "PASS " : "FAIL ", t.text, ": ", shown);
    verdicts.push_back(std::move(v));
  }
  return verdicts;
}

bool SloFailureIsFinal(const SloVerdict& v) {
  if (v.held || !v.measured) return false;
  const SloTerm& t = *v.term;
  const bool grows = t.metric == Metric::kRecords || t.metric == Metric::kInvalid ||
                     t.metric == Metric::kMax ||
                     (t.metric == Metric::kPercentile && t.percent >= 100);
  const bool shrinks =
      t.metric == Metric::kMin || (t.metric == Metric::kPercentile && t.percent <= 0);
  if (grows) {
    return t.op == Op::kLe || t.op == Op::kLt || (t.op == Op::kEq && *v.measured > v.threshold);
  }
  if (shrinks) {
    return t.op == Op::kGe || t.op == Op::kGt || (t.op == Op::kEq && *v.measured < v.threshold);
  }
  return false;
}

std::string SloJunit(const std::string& run_name, const std::vector<SloVerdict>& verdicts) {
  int failures = 0;
  for (const SloVerdict& v : verdicts) failures += v.held ? 0 : 1;
  std::string xml = absl::StrCat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"", verdicts.size(),
      "\" failures=\"", failures, "\">\n  <testsuite name=\"perld check ", XmlEscaped(run_name),
      "\" tests=\"", verdicts.size(), "\" failures=\"", failures, "\" errors=\"0\">\n");
  for (const SloVerdict& v : verdicts) {
    absl::StrAppend(&xml, "    <testcase classname=\"perld.slo\" name=\"", XmlEscaped(v.term->text),
                    "\" time=\"0\"");
    if (v.held) {
      absl::StrAppend(&xml, "/>\n");
    } else {
      absl::StrAppend(&xml, ">\n      <failure message=\"", XmlEscaped(v.line), "\">",
                      XmlEscaped(v.line), "</failure>\n    </testcase>\n");
    }
  }
  absl::StrAppend(&xml, "  </testsuite>\n</testsuites>\n");
  return xml;
}

}  // namespace perld
