#include "daemon/http/live_api.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "daemon/common/json_writer.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/run_total.h"
#include "daemon/runs/range_percentiles.h"

namespace perld::http {
namespace {

using json::JsonWriter;

constexpr double kBytesPerMebibyte = 1024.0 * 1024.0;

double Rate(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0; }

HttpResponse Error(int status, const std::string& message) {
  JsonWriter j;
  j.BeginObject().Key("error").String(message).EndObject();
  return HttpResponse{status, j.str() + "\n", kJsonContentType};
}

void WriteRun(const runs::RunView& view, JsonWriter& j) {
  const runs::RunInfo& info = view.info;
  j.BeginObject()
      .Key("id")
      .Uint(info.id)
      .Key("name")
      .String(info.spec.name)
      .Key("source")
      .String(runs::RunSourceName(info.spec.source))
      .Key("state")
      .String(runs::RunStateName(info.state))
      .Key("endReason")
      .String(runs::EndReasonName(info.end_reason))
      .Key("failureReason")
      .String(info.failure_reason)
      .Key("unit")
      .String(TimeUnitSymbol(info.spec.latency.time_unit))
      .Key("startUnixMs")
      .Int(info.start_unix_ms)
      .Key("endUnixMs")
      .Int(info.end_unix_ms)
      .Key("records")
      .Int(view.total.snapshot.records)
      .Key("seconds")
      .Double(view.total.seconds)
      // An ended run's own rate (its total); a running one's latest window.
      .Key("recordsPerSecond")
      .Double(view.total_final
                  ? Rate(static_cast<double>(view.total.snapshot.records), view.total.seconds)
              : view.latest ? Rate(static_cast<double>(view.latest->snapshot.records),
                                   view.latest->RateSeconds())
                            : 0.0)
      .Key("windows")
      .Int(view.latest ? view.latest->seq : 0)
      .Key("parameters")
      .String(info.spec.parameters)
      // A rate-controlled run's two views (issue 30): which this is, the
      // other's id (0: closed loop), the target rate and the verdict.
      .Key("kind")
      .String(runs::LatencyKindOf(info))
      .Key("responseRun")
      .Uint(info.response_run)
      .Key("serviceRun")
      .Uint(info.service_run)
      .Key("targetRate")
      .Double(info.spec.target_rate)
      .Key("lateThresholdNs")
      .Int(info.spec.late_threshold_ns)
      .Key("rateNotSustained")
      .Bool(info.rate_not_sustained)
      .Key("schedule");
  const runs::WindowRecord::Schedule& sc = view.total.schedule;
  if (info.spec.target_rate <= 0) {
    j.Null();
  } else {
    j.BeginObject()
        .Key("operations")
        .Int(sc.operations)
        .Key("late")
        .Int(sc.late)
        .Key("skipped")
        .Int(sc.skipped)
        .Key("maxLag")
        .Int(sc.max_lag)
        .Key("minLag")
        .Int(sc.min_lag)
        .Key("totalLag")
        .Int(sc.total_lag)
        .EndObject();
  }
  j.Key("labels").BeginObject();
  for (const auto& [k, v] : info.spec.labels) j.Key(k).String(v);
  j.EndObject().Key("slo");
  if (info.spec.slo.empty()) {
    j.Null();
  } else {
    j.BeginObject()
        .Key("expression")
        .String(info.spec.slo)
        .Key("abortOnFail")
        .Bool(info.spec.abort_on_fail)
        .Key("state")
        .String(runs::SloStateName(info.slo_status.state))
        .Key("window")
        .Int(info.slo_status.window)
        .Key("verdicts")
        .BeginArray();
    for (const runs::SloStatus::Verdict& v : info.slo_status.verdicts) {
      j.BeginObject().Key("term").String(v.term).Key("held").Bool(v.held).Key("line").String(
          v.line);
      j.EndObject();
    }
    j.EndArray().EndObject();
  }
  j.EndObject();
}

// The figures every window and the total share.
// `rate_seconds`: what the rates divide by (WindowRecord::RateSeconds).
void WriteFigures(const LatencySnapshot& s, double seconds, double rate_seconds, JsonWriter& j) {
  j.Key("records")
      .Int(s.records)
      .Key("seconds")
      .Double(seconds)
      .Key("rateSeconds")
      .Double(rate_seconds)
      .Key("recordsPerSecond")
      .Double(Rate(static_cast<double>(s.records), rate_seconds))
      .Key("mbPerSecond")
      .Double(Rate(static_cast<double>(s.bytes) / kBytesPerMebibyte, rate_seconds))
      .Key("avg")
      .Double(s.AvgLatency())
      .Key("min")
      .Int(s.min_latency)
      .Key("max")
      .Int(s.max_latency)
      .Key("values");
  if (!s.percentiles_exact) {  // a total without exact percentiles: none
    j.Null();
    return;
  }
  j.BeginArray();
  for (int64_t v : s.values) j.Int(v);
  j.EndArray();
}

// An absl status as the JSON endpoints answer it.
HttpResponse StatusError(const absl::Status& status) {
  int code = 500;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      code = 400;
      break;
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
      code = 404;
      break;
    case absl::StatusCode::kFailedPrecondition:
      code = 409;
      break;
    default:
      break;
  }
  return Error(code, std::string(status.message()));
}

// The spectrum's ladder: 1/(1-p) = m * 10^d, m = kLadderHundredths[i] / 100.
// The tail 1 - p in percent is kTailMillis[i] / 1000 / 10^d: exact decimals.
constexpr std::array<int64_t, 10> kLadderHundredths = {100, 125, 160, 200, 250,
                                                       320, 400, 500, 640, 800};
constexpr std::array<int64_t, 10> kTailMillis = {100000, 80000, 62500, 50000, 40000,
                                                 31250,  25000, 20000, 15625, 12500};
constexpr int kLadderDecades = 13;  // d = 0..12: 1/(1-p) up to 8 * 10^12
// Above this many records every rung of the ladder fits (8 * 10^12 < it).
constexpr int64_t kLadderAllFit = 1'000'000'000'000'000;
// The summary beside the spectrum (every one on the ladder).
struct SummaryPercent {
  double percent;
  const char* name;
};
constexpr std::array<SummaryPercent, 5> kSummaryPercents = {
    {{50, "50"}, {90, "90"}, {99, "99"}, {99.9, "99.9"}, {99.99, "99.99"}}};

int64_t PowerOfTen(int n) {
  int64_t v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

// 100 - tail_millis / 10^(3 + d) as the double nearest that decimal.
double LadderPercent(int64_t tail_millis, int d) {
  const int64_t unit = PowerOfTen(3 + d);
  const int64_t digits = 100 * unit - tail_millis;                  // < 10^17
  const std::string fraction = absl::StrCat(unit + digits % unit);  // "1" and the digits
  const std::string text = absl::StrCat(digits / unit, ".", fraction.substr(1));
  double percent = 0;
  const bool parsed = absl::SimpleAtod(text, &percent);
  return parsed ? percent : 0;
}

// The latency at `percent` in `s` (its percents ascending), if asked.
std::optional<int64_t> ValueAt(const LatencySnapshot& s, double percent) {
  auto it = std::lower_bound(s.percents.begin(), s.percents.end(), percent);
  if (it == s.percents.end() || *it != percent) return std::nullopt;
  const auto i = static_cast<size_t>(it - s.percents.begin());
  return i < s.values.size() ? std::optional<int64_t>(s.values[i]) : std::nullopt;
}

// run=NAME|ID as perlctl takes it, with kind=response|service (issue 30;
// RunRegistry::ResolveKind: a rate-controlled run's name shows its response
// view unless kind=service).
absl::StatusOr<runs::RunId> ResolveRunParam(const runs::RunRegistry& registry,
                                            const HttpRequest& request, const std::string& run) {
  runs::LatencyKind kind = runs::LatencyKind::kDefault;
  if (auto k = request.params.find("kind"); k != request.params.end()) {
    if (k->second == "response") {
      kind = runs::LatencyKind::kResponse;
    } else if (k->second == "service") {
      kind = runs::LatencyKind::kService;
    } else {
      return absl::InvalidArgumentError("kind: response or service");
    }
  }
  return registry.ResolveKind(run, kind);
}

// The run a request names: run=NAME|ID (ResolveRunParam) or id=N.
absl::StatusOr<runs::RunId> RequestedRun(const runs::RunRegistry& registry,
                                         const HttpRequest& request, absl::string_view example) {
  if (auto run = request.params.find("run"); run != request.params.end()) {
    return ResolveRunParam(registry, request, run->second);
  }
  runs::RunId id = 0;
  if (auto id_param = request.params.find("id");
      id_param == request.params.end() || !absl::SimpleAtoi(id_param->second, &id)) {
    return absl::InvalidArgumentError(absl::StrCat("run: a run's name or id is required, e.g. ",
                                                   example, "?run=nightly or ?id=7"));
  }
  return id;
}

// A window number >= 1.
bool ParseWindow(absl::string_view text, int64_t* out) {
  return absl::SimpleAtoi(text, out) && *out >= 1;
}

// windows=A-B|A-|-B|A, from=UNIXMS, to=UNIXMS; none: the total.
absl::StatusOr<std::optional<SpectrumRange>> RequestedRange(const HttpRequest& request) {
  const auto& params = request.params;
  const auto windows = params.find("windows");
  const auto from = params.find("from");
  const auto to = params.find("to");
  if (windows == params.end() && from == params.end() && to == params.end()) return std::nullopt;
  SpectrumRange range;
  if (windows != params.end()) {
    const absl::string_view text = windows->second;
    const size_t dash = text.find('-');
    const absl::string_view first = text.substr(0, dash);
    const absl::string_view last = dash == absl::string_view::npos ? first : text.substr(dash + 1);
    if ((first.empty() && last.empty()) ||
        (!first.empty() && !ParseWindow(first, &range.first_window)) ||
        (!last.empty() && !ParseWindow(last, &range.last_window))) {
      return absl::InvalidArgumentError(
          "windows: A-B, A-, -B or A with window numbers >= 1, e.g. windows=3-10");
    }
    if (range.last_window > 0 && range.first_window > range.last_window) {
      return absl::InvalidArgumentError(absl::StrCat("windows: window ", range.first_window,
                                                     " is after window ", range.last_window));
    }
  }
  if (from != params.end() &&
      (!absl::SimpleAtoi(from->second, &range.from_unix_ms) || range.from_unix_ms < 0)) {
    return absl::InvalidArgumentError("from: a time in Unix milliseconds >= 0 (0: open)");
  }
  if (to != params.end() &&
      (!absl::SimpleAtoi(to->second, &range.to_unix_ms) || range.to_unix_ms < 0)) {
    return absl::InvalidArgumentError("to: a time in Unix milliseconds >= 0 (0: open)");
  }
  if (range.to_unix_ms > 0 && range.from_unix_ms > range.to_unix_ms) {
    return absl::InvalidArgumentError("from is after to");
  }
  return range;
}

}  // namespace

std::vector<double> SpectrumPercents(int64_t valid) {
  std::vector<double> percents;
  if (valid <= 0) return percents;
  for (int d = 0; d < kLadderDecades; ++d) {
    for (size_t i = 0; i < kLadderHundredths.size(); ++i) {
      // 1/(1-p) <= valid, in integers: m * 100 * 10^d <= valid * 100.
      if (valid < kLadderAllFit && kLadderHundredths[i] * PowerOfTen(d) > valid * 100) {
        percents.push_back(100);
        return percents;
      }
      percents.push_back(LadderPercent(kTailMillis[i], d));
    }
  }
  percents.push_back(100);
  return percents;
}

HttpResponse RunsJson(const runs::RunRegistry& registry, const DaemonFacts& facts) {
  std::vector<runs::RunInfo> infos = registry.List({});
  std::sort(infos.begin(), infos.end(),
            [](const runs::RunInfo& a, const runs::RunInfo& b) { return a.id > b.id; });
  JsonWriter j;
  j.BeginObject()
      .Key("version")
      .String(facts.version)
      .Key("uptimeSeconds")
      .Double(facts.uptime_seconds)
      .Key("nowUnixMs")
      .Int(facts.now_unix_ms)
      .Key("runs")
      .BeginArray();
  for (const runs::RunInfo& info : infos) {
    absl::StatusOr<runs::RunView> view = registry.Get(info.id);
    if (view.ok()) WriteRun(*view, j);
  }
  j.EndArray().EndObject();
  return HttpResponse{200, j.str() + "\n", kJsonContentType};
}

HttpResponse RunJson(const runs::RunRegistry& registry, const HttpRequest& request) {
  runs::RunId id = 0;
  if (auto run = request.params.find("run"); run != request.params.end()) {
    // A name or an id, as perlctl takes it (ResolveRunParam).
    absl::StatusOr<runs::RunId> resolved = ResolveRunParam(registry, request, run->second);
    if (!resolved.ok()) {
      return Error(resolved.status().code() == absl::StatusCode::kInvalidArgument ? 400 : 404,
                   std::string(resolved.status().message()));
    }
    id = *resolved;
  } else if (auto id_param = request.params.find("id");
             id_param == request.params.end() || !absl::SimpleAtoi(id_param->second, &id)) {
    return Error(400,
                 "id: a run id (a positive integer) is required, e.g. /api/run?id=7, or "
                 "run: a run's name or id, e.g. /api/run?run=nightly");
  }
  int64_t max_windows = kDefaultLiveWindows;
  if (auto w = request.params.find("windows"); w != request.params.end()) {
    if (!absl::SimpleAtoi(w->second, &max_windows) || max_windows < 0) {
      return Error(400, "windows: a count >= 0 is required");
    }
  }
  absl::StatusOr<runs::RunView> view = registry.Get(id);
  if (!view.ok()) return Error(404, std::string(view.status().message()));
  absl::StatusOr<std::vector<runs::WindowRecord>> history = registry.History(id);
  std::vector<runs::WindowRecord> windows;
  if (history.ok()) {
    for (runs::WindowRecord& w : *history) {
      if (w.kind == runs::WindowRecord::Kind::kPeriodic) windows.push_back(std::move(w));
    }
  }
  if (static_cast<int64_t>(windows.size()) > max_windows) {
    windows.erase(windows.begin(), windows.end() - max_windows);
  }
  const std::vector<double>& percents = view->info.spec.latency.percentiles;

  JsonWriter j;
  j.BeginObject().Key("run");
  WriteRun(*view, j);
  j.Key("percents").BeginArray();
  for (double p : percents) j.Double(p);
  j.EndArray().Key("windows").BeginArray();
  for (const runs::WindowRecord& w : windows) {
    j.BeginObject().Key("seq").Int(w.seq).Key("endUnixMs").Int(w.end_unix_ms);
    j.Key("warmup").Bool(w.warmup);
    WriteFigures(w.snapshot, w.seconds, w.RateSeconds(), j);
    j.EndObject();
  }
  j.EndArray().Key("total").BeginObject();
  absl::StatusOr<runs::PercentileAnswer> total =
      registry.Percentiles(id, runs::PercentileScope::kTotal, percents);
  const LatencySnapshot& snapshot = total.ok() ? total->snapshot : view->total.snapshot;
  j.Key("final").Bool(view->total_final).Key("exact").Bool(total.ok() && total->exact);
  WriteFigures(snapshot, view->total.seconds, view->total.RateSeconds(), j);
  j.Key("counts");
  if (snapshot.percentiles_exact) {
    j.BeginArray();
    for (int64_t c : snapshot.counts) j.Int(c);
    j.EndArray();
  } else {
    j.Null().Key("inexactReason").String(kInexactTotalReason);
  }
  j.EndObject().EndObject();
  return HttpResponse{200, j.str() + "\n", kJsonContentType};
}

HttpResponse SpectrumJson(const runs::RunRegistry& registry, const WindowRangeReader& read_range,
                          const HttpRequest& request) {
  absl::StatusOr<runs::RunId> id = RequestedRun(registry, request, "/api/spectrum");
  if (!id.ok()) return StatusError(id.status());
  absl::StatusOr<std::optional<SpectrumRange>> range = RequestedRange(request);
  if (!range.ok()) return StatusError(range.status());
  absl::StatusOr<runs::RunInfo> info = registry.Info(*id);
  if (!info.ok()) return StatusError(info.status());
  // Every rung at once (one walk of the distribution), trimmed to the
  // records' precision below.
  static const std::vector<double> kLadder = SpectrumPercents(std::numeric_limits<int64_t>::max());

  LatencySnapshot s;
  bool exact = true;
  bool final = info->state != runs::RunState::kRunning;
  std::optional<runs::RangeAnswer> ranged;
  if (!range->has_value()) {
    absl::StatusOr<runs::PercentileAnswer> answer =
        registry.Percentiles(*id, runs::PercentileScope::kTotal, kLadder);
    if (!answer.ok()) return StatusError(answer.status());
    s = std::move(answer->snapshot);
    exact = answer->exact && s.percentiles_exact;
    final = answer->total_final;
  } else {
    if (!read_range) {
      return Error(409, "ranges are answered from the state directory, which this perld has not");
    }
    absl::StatusOr<std::vector<runs::WindowRecord>> windows = read_range(*id, **range);
    if (!windows.ok()) return StatusError(windows.status());
    static const absl::StatusOr<PercentileSet> kLadderSet = PercentileSet::Create(kLadder);
    if (!kLadderSet.ok()) return StatusError(kLadderSet.status());
    absl::StatusOr<runs::RangeAnswer> answer =
        runs::RangePercentiles(*id, *windows, (*range)->first_window, *kLadderSet);
    if (!answer.ok()) return StatusError(answer.status());
    s = answer->snapshot;
    ranged = *std::move(answer);
  }

  JsonWriter j;
  j.BeginObject()
      .Key("run")
      .Uint(*id)
      .Key("name")
      .String(info->spec.name)
      .Key("unit")
      .String(TimeUnitSymbol(info->spec.latency.time_unit))
      .Key("scope")
      .String(ranged ? "range" : "total")
      .Key("final")
      .Bool(final);
  if (ranged) {
    j.Key("firstWindow")
        .Int(ranged->first_window)
        .Key("lastWindow")
        .Int(ranged->last_window)
        .Key("windows")
        .Int(ranged->windows)
        .Key("startUnixMs")
        .Int(ranged->start_unix_ms)
        .Key("endUnixMs")
        .Int(ranged->end_unix_ms)
        .Key("seconds")
        .Double(ranged->seconds);
  }
  j.Key("records")
      .Int(s.records)
      .Key("validLatencyRecords")
      .Int(s.valid)
      .Key("exact")
      .Bool(exact)
      .Key("reason")
      .String(exact ? "" : kInexactTotalReason)
      .Key("min")
      .Int(s.min_latency)
      .Key("max")
      .Int(s.max_latency)
      .Key("avg")
      .Double(s.AvgLatency())
      .Key("percentiles");
  if (exact) {
    j.BeginObject();
    for (const SummaryPercent& p : kSummaryPercents) {
      if (std::optional<int64_t> v = ValueAt(s, p.percent)) j.Key(p.name).Int(*v);
    }
    j.EndObject();
  } else {
    j.Null();
  }
  j.Key("points").BeginArray();
  if (exact) {  // never a point from part of the run
    for (double percent : SpectrumPercents(s.valid)) {
      if (std::optional<int64_t> v = ValueAt(s, percent)) {
        j.BeginObject().Key("percent").Double(percent).Key("latency").Int(*v).EndObject();
      }
    }
  }
  j.EndArray().EndObject();
  return HttpResponse{200, j.str() + "\n", kJsonContentType};
}

}  // namespace perld::http
