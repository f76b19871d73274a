#include "client/perlctl/compare.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace perld::perlctl {
namespace {

using Metric = SloTerm::Metric;

absl::Status Bad(const std::string& term, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--fail-if: '", term, "': ", why));
}

std::string Number(double v) {
  char buf[48];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f", v);
  }
  return buf;
}

std::string Signed(double v, const char* fmt) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return v > 0 ? absl::StrCat("+", buf) : buf;
}

std::string SignedNumber(double v) { return v > 0 ? absl::StrCat("+", Number(v)) : Number(v); }

void Scale(SloFacts* f, int64_t factor, int64_t unit_ns, const char* unit) {
  f->min *= factor;
  f->max *= factor;
  f->avg *= static_cast<double>(factor);
  for (auto& [percent, latency] : f->percentiles) latency *= factor;
  f->unit_ns = unit_ns;
  f->unit = unit;
}

}  // namespace

absl::StatusOr<std::vector<RegressionTerm>> ParseFailIf(const std::string& expression) {
  std::vector<RegressionTerm> terms;
  for (absl::string_view part : absl::StrSplit(expression, ',')) {
    RegressionTerm t;
    for (char c : part) {
      if (!absl::ascii_isspace(static_cast<unsigned char>(c))) t.text += c;
    }
    if (t.text.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--fail-if: an empty term in '", expression,
                                                     "' (terms are comma-separated)"));
    }
    const size_t at = t.text.find_first_of("<>");
    if (at == std::string::npos || at == 0) {
      return Bad(t.text, "expected METRIC > CHANGE or METRIC < CHANGE, e.g. p99>+5%");
    }
    t.above = t.text[at] == '>';
    const std::string metric = t.text.substr(0, at);
    if (!ParseSloMetric(metric, &t.metric, &t.percent)) {
      return Bad(t.text, absl::StrCat("unknown metric '", metric, "' (", kSloMetrics, ")"));
    }
    std::string suffix;
    if (!SplitAmount(absl::string_view(t.text).substr(at + 1), &t.limit, &suffix)) {
      return Bad(t.text, "the change must be a number, e.g. +5% or +2ms");
    }
    if (suffix == "%") {
      t.relative = true;
    } else if (!suffix.empty()) {
      if (!SloTerm::IsLatency(t.metric)) {
        return Bad(t.text,
                   absl::StrCat("'", metric, "' changes by a number or a %, not '", suffix, "'"));
      }
      t.limit_unit_ns = LatencyUnitNs(suffix);
      if (t.limit_unit_ns == 0) {
        return Bad(t.text, absl::StrCat("unknown unit '", suffix, "' (%, ns, us, mcs, ms, s)"));
      }
    }
    terms.push_back(std::move(t));
  }
  return terms;
}

void ToCommonUnit(SloFacts* a, SloFacts* b) {
  if (a->unit_ns == b->unit_ns) return;
  SloFacts* coarse = a->unit_ns > b->unit_ns ? a : b;
  const SloFacts* fine = coarse == a ? b : a;
  Scale(coarse, coarse->unit_ns / fine->unit_ns, fine->unit_ns, fine->unit);
}

std::optional<double> CompareRow::delta() const {
  if (!a || !b) return std::nullopt;
  return *b - *a;
}

std::optional<double> CompareRow::relative() const {
  if (!a || !b || *a == 0) return std::nullopt;
  return (*b - *a) / *a * 100;
}

std::vector<CompareRow> CompareRows(const SloFacts& a, const SloFacts& b,
                                    const std::vector<double>& percents) {
  std::vector<std::pair<Metric, double>> metrics = {{Metric::kRecords, 0},
                                                    {Metric::kRate, 0},
                                                    {Metric::kInvalid, 0},
                                                    {Metric::kMin, 0},
                                                    {Metric::kAvg, 0}};
  for (double p : percents) metrics.emplace_back(Metric::kPercentile, p);
  metrics.emplace_back(Metric::kMax, 0);
  std::vector<CompareRow> rows;
  for (const auto& [metric, percent] : metrics) {
    CompareRow r;
    r.metric = SloMetricName(metric, percent);
    r.latency = SloTerm::IsLatency(metric);
    r.a = SloValue(a, metric, percent);
    r.b = SloValue(b, metric, percent);
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<RegressionVerdict> EvaluateFailIf(const std::vector<RegressionTerm>& terms,
                                              const SloFacts& a, const SloFacts& b) {
  std::vector<RegressionVerdict> verdicts;
  for (const RegressionTerm& t : terms) {
    RegressionVerdict v;
    v.term = &t;
    const std::optional<double> va = SloValue(a, t.metric, t.percent);
    const std::optional<double> vb = SloValue(b, t.metric, t.percent);
    const char* unit = SloTerm::IsLatency(t.metric) ? b.unit : "";
    if (!va || !vb) {
      v.failed = true;  // a gate that cannot look does not pass
      v.line = absl::StrCat("FAIL ", t.text, ": not measured in ", !va ? "A" : "B");
    } else if (t.relative && *va == 0) {
      v.failed = *vb != 0 && (t.above ? *vb > 0 : *vb < 0);
      v.line = absl::StrCat(v.failed ? "FAIL " : "PASS ", t.text, ": ", Number(*va), " -> ",
                            Number(*vb), " ", unit, " (A is 0: no relative change)");
    } else {
      const double change = t.relative ? (*vb - *va) / *va * 100 : *vb - *va;
      double limit = t.limit;
      if (!t.relative && t.limit_unit_ns != 0) {
        limit = t.limit * static_cast<double>(t.limit_unit_ns) / static_cast<double>(b.unit_ns);
      }
      v.failed = t.above ? change > limit : change < limit;
      v.line = absl::StrCat(v.failed ? "FAIL " : "PASS ", t.text, ": ", Number(*va), " -> ",
                            Number(*vb), unit[0] != '\0' ? " " : "", unit, " (",
                            t.relative ? Signed(change, "%.1f%%") : SignedNumber(change), ")");
    }
    verdicts.push_back(std::move(v));
  }
  return verdicts;
}

std::string CompareTable(const std::vector<CompareRow>& rows, const char* unit) {
  char line[256];
  std::snprintf(line, sizeof(line), "%-10s %16s %16s %16s %9s\n", "", "A", "B", "B-A", "change");
  std::string out = line;
  for (const CompareRow& r : rows) {
    const std::string suffix = r.latency ? absl::StrCat(" ", unit) : "";
    const auto shown = [&](const std::optional<double>& v) {
      return v ? Number(*v) + suffix : std::string("-");
    };
    const std::optional<double> d = r.delta();
    const std::optional<double> rel = r.relative();
    std::snprintf(line, sizeof(line), "%-10s %16s %16s %16s %9s\n",
                  (r.metric == "rate" ? "records/s" : r.metric).c_str(), shown(r.a).c_str(),
                  shown(r.b).c_str(), d ? (SignedNumber(*d) + suffix).c_str() : "-",
                  rel ? Signed(*rel, "%.1f%%").c_str() : "-");
    out += line;
  }
  return out;
}

}  // namespace perld::perlctl
