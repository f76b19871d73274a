#include "client/perlctl/run_output.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
namespace perld::perlctl {
namespace {

constexpr size_t kColumns = 100;  // human output fits a 100-column terminal

// "" for a window with exact percentiles; else why a total gives none.
std::string InexactReason(const v1::Window& w) {
  if (w.kind() != v1::Window::KIND_TOTAL || w.exact_total()) return "";
  return w.inexact_reason().empty() ? "not exact" : w.inexact_reason();
}

// `items` after `label`, joined by `sep` and wrapped to kColumns,
// continuation lines aligned under the first item; ends in '\n'.
std::string Wrapped(const std::string& label, const std::vector<std::string>& items,
                    const std::string& sep) {
  std::string out;
  std::string line = label;
  const std::string pad(label.size(), ' ');
  for (const std::string& item : items) {
    const bool first = line.size() == label.size();
    if (!first && line.size() + sep.size() + item.size() > kColumns) {
      absl::StrAppend(&out, line, "\n");
      line = pad;
    }
    absl::StrAppend(&line, line.size() == label.size() ? "" : sep, item);
  }
  return absl::StrCat(out, line, "\n");
}

// `text` wrapped at its spaces.
std::string Wrapped(const std::string& label, const std::string& text) {
  return Wrapped(label, std::vector<std::string>(absl::StrSplit(text, ' ', absl::SkipEmpty())),
                 " ");
}

std::string Format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

}  // namespace

std::string UtcTime(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

const char* TimeUnitText(v1::TimeUnit unit) {
  switch (unit) {
    case v1::TIME_UNIT_MS:
      return "ms";
    case v1::TIME_UNIT_US:
      return "us";
    case v1::TIME_UNIT_NS:
      return "ns";
    default:
      return "?";
  }
}

const char* StateText(v1::RunState state) {
  switch (state) {
    case v1::RUN_STATE_RUNNING:
      return "running";
    case v1::RUN_STATE_FINISHED:
      return "finished";
    case v1::RUN_STATE_FAILED:
      return "failed";
    default:
      return "unknown";
  }
}

const char* EndReasonText(v1::EndReason reason) {
  switch (reason) {
    case v1::END_REASON_COMPLETED:
      return "completed";
    case v1::END_REASON_STOPPED:
      return "stopped";
    case v1::END_REASON_SHUTDOWN:
      return "shutdown";
    case v1::END_REASON_FAILED:
      return "failed";
    case v1::END_REASON_SLO_FAILED:
      return "slo_failed";
    default:
      return "";
  }
}

std::string StateWithReason(const v1::RunInfo& run) {
  std::string why;
  switch (run.end_reason()) {
    case v1::END_REASON_COMPLETED:
      why = "completed";
      break;
    case v1::END_REASON_STOPPED:
      why = "stopped by request";
      break;
    case v1::END_REASON_SHUTDOWN:
      why = "cut short by the daemon's shutdown";
      break;
    case v1::END_REASON_SLO_FAILED:
      why = "stopped by its SLO: a term failed for good";
      break;
    default:
      break;
  }
  if (run.rate_not_sustained())
    absl::StrAppend(&why, why.empty() ? "" : "; ", "rate not sustained");
  std::string s = StateText(run.state());
  return why.empty() ? s : absl::StrCat(s, " (", why, ")");
}

const char* SourceText(v1::RunSource source) {
  switch (source) {
    case v1::RUN_SOURCE_BENCH:
      return "bench";
    case v1::RUN_SOURCE_INGEST:
      return "ingest";
    case v1::RUN_SOURCE_SBP:
      return "sbp";
    default:
      return "unknown";
  }
}

const char* WindowKindText(v1::Window::Kind kind) {
  switch (kind) {
    case v1::Window::KIND_PERIODIC:
      return "periodic";
    case v1::Window::KIND_TOTAL_SEGMENT:
      return "total_segment";
    case v1::Window::KIND_TOTAL:
      return "total";
    default:
      return "unknown";
  }
}

const char* SloStateText(v1::SloStatus::State state) {
  switch (state) {
    case v1::SloStatus::STATE_PENDING:
      return "pending";
    case v1::SloStatus::STATE_HOLDING:
      return "holding";
    case v1::SloStatus::STATE_FAILING:
      return "failing";
    case v1::SloStatus::STATE_PASSED:
      return "passed";
    case v1::SloStatus::STATE_FAILED:
      return "failed";
    default:
      return "";
  }
}

std::string SloText(const v1::RunInfo& run) {
  if (run.slo().expression().empty()) return "";
  const v1::SloStatus& st = run.slo_status();
  std::string s =
      absl::StrCat("  slo:      ", SloStateText(st.state()), " '", run.slo().expression(), "'",
                   run.slo().abort_on_fail() ? " (abortOnFail)" : "");
  if (st.window() > 0) {
    absl::StrAppend(
        &s, st.state() == v1::SloStatus::STATE_PASSED || st.state() == v1::SloStatus::STATE_FAILED
                ? " on the final total"
                : absl::StrCat(" on the total to window ", st.window()));
  }
  absl::StrAppend(&s, "\n");
  for (const v1::SloStatus::Verdict& v : st.verdicts()) absl::StrAppend(&s, "    ", v.line(), "\n");
  return s;
}

const char* KindText(const v1::RunInfo& run) {
  return run.kind() == v1::LATENCY_KIND_RESPONSE ? "response" : "service";
}

std::string KindNote(const v1::RunInfo& run) {
  if (run.kind() == v1::LATENCY_KIND_RESPONSE) {
    return absl::StrCat("response time (end - intended start) of a rate-controlled run at ",
                        ShortestDouble(run.target_rate()), " operations/s; its service time: run ",
                        run.service_run(), " (--kind service)");
  }
  if (run.response_run() != 0) {
    return absl::StrCat("service time (end - actual start) of a rate-controlled run at ",
                        ShortestDouble(run.target_rate()), " operations/s; its response time: run ",
                        run.response_run(), " (--kind response, the default)");
  }
  return "service time under closed-loop load";
}

std::string ScheduleText(const v1::Schedule& sc, const v1::RunInfo& run) {
  const char* unit = TimeUnitText(run.latency().time_unit());
  std::string s = absl::StrCat(
      sc.operations(), " operations, ", sc.late(), " started late (over ",
      ShortestDouble(static_cast<double>(run.late_threshold_ns()) / 1000.0),
      " us after their slot), ", sc.skipped(), " slots skipped; start lag max ", sc.max_lag(), " ",
      unit, ", mean ",
      absl::StrFormat("%.1f", sc.operations() > 0 ? static_cast<double>(sc.total_lag()) /
                                                        static_cast<double>(sc.operations())
                                                  : 0.0),
      " ", unit);
  if (sc.not_sustained()) absl::StrAppend(&s, "; rate not sustained (the lag kept growing)");
  return s;
}

void WriteRunJson(const v1::RunInfo& run, JsonWriter& json) {
  json.Key("id").Uint(run.id());
  json.Key("name").String(run.name());
  json.Key("labels").BeginObject();
  // protobuf maps have no order: sort for stable output.
  std::map<std::string, std::string> labels(run.labels().begin(), run.labels().end());
  for (const auto& [k, v] : labels) json.Key(k).String(v);
  json.EndObject();
  json.Key("source").String(SourceText(run.source()));
  json.Key("state").String(StateText(run.state()));
  json.Key("failureReason").String(run.failure_reason());
  json.Key("endReason");
  if (run.end_reason() == v1::END_REASON_UNSPECIFIED) {
    json.Null();  // running (or ended before perld kept the reason)
  } else {
    json.String(EndReasonText(run.end_reason()));
  }
  json.Key("startUnixMs").Int(run.start_unix_ms());
  json.Key("endUnixMs").Int(run.end_unix_ms());
  const v1::LatencyConfig& l = run.latency();
  json.Key("latencyConfig").BeginObject();
  json.Key("timeUnit").String(TimeUnitText(l.time_unit()));
  json.Key("minLatency").Int(l.min_latency());
  json.Key("maxLatency").Int(l.max_latency());
  json.Key("percentiles").BeginArray();
  for (double p : l.percentiles()) json.Double(p);
  json.EndArray();
  json.Key("periodicRecorder").String(l.periodic_recorder());
  json.Key("totalRecorder").String(l.total_recorder());
  json.EndObject();
  json.Key("reportingIntervalMs").Int(run.reporting_interval_ms());
  json.Key("clock").String(run.clock());
  json.Key("clockResolutionNs").Int(run.clock_resolution_ns());
  json.Key("parameters").String(run.parameters());
  // A bucketed run (RunInfo.bucketed_reason): its values stand for the raw
  // ones (e.g. imported HdrHistogram buckets), so its percentiles, given,
  // are not exact ones of the raw measurements.
  json.Key("exact").Bool(run.bucketed_reason().empty());
  json.Key("bucketed").Bool(!run.bucketed_reason().empty());
  json.Key("inexactReason").String(run.bucketed_reason());
  json.Key("writers").Int(run.writers());
  json.Key("readers").Int(run.readers());
  // Rate-controlled runs (issue 30): which latency this run holds and its
  // other view; closed-loop runs hold service time only.
  json.Key("kind").String(KindText(run));
  json.Key("targetRate").Double(run.target_rate());
  json.Key("lateThresholdNs").Int(run.late_threshold_ns());
  json.Key("responseRun").Uint(run.response_run());
  json.Key("serviceRun").Uint(run.service_run());
  json.Key("kindNote").String(KindNote(run));
  json.Key("rateNotSustained").Bool(run.rate_not_sustained());
  json.Key("slo");
  if (run.slo().expression().empty()) {
    json.Null();
  } else {
    const v1::SloStatus& st = run.slo_status();
    json.BeginObject();
    json.Key("expression").String(run.slo().expression());
    json.Key("abortOnFail").Bool(run.slo().abort_on_fail());
    json.Key("state").String(SloStateText(st.state()));
    json.Key("window").Int(st.window());
    json.Key("verdicts").BeginArray();
    for (const v1::SloStatus::Verdict& v : st.verdicts()) {
      json.BeginObject();
      json.Key("term").String(v.term());
      json.Key("held").Bool(v.held());
      json.Key("line").String(v.line());
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
  }
}

void WriteWindowJson(const v1::Window& w, JsonWriter& json, const v1::RunInfo* run) {
  json.BeginObject();
  if (run != nullptr) {
    json.Key("runId").Uint(run->id());
    json.Key("runName").String(run->name());
  }
  json.Key("kind").String(WindowKindText(w.kind()));
  json.Key("seq").Int(w.seq());
  json.Key("warmup").Bool(w.warmup());
  json.Key("warmupRecords").Int(w.warmup_records());
  json.Key("startUnixMs").Int(w.start_unix_ms());
  json.Key("endUnixMs").Int(w.end_unix_ms());
  json.Key("seconds").Double(w.seconds());
  // What the rates divide by (a daemon before rate_seconds sent 0: seconds).
  json.Key("rateSeconds").Double(w.rate_seconds() > 0 ? w.rate_seconds() : w.seconds());
  json.Key("records").Int(w.records());
  json.Key("bytes").Int(w.bytes());
  json.Key("validLatencyRecords").Int(w.valid_latency_records());
  json.Key("invalidLatencyRecords").Int(w.invalid_latency_records());
  json.Key("lowerLatencyDiscardRecords").Int(w.lower_latency_discard_records());
  json.Key("higherLatencyDiscardRecords").Int(w.higher_latency_discard_records());
  json.Key("rejectedRecords").Int(w.rejected_records());
  json.Key("minLatency").Int(w.min_latency());
  json.Key("maxLatency").Int(w.max_latency());
  json.Key("totalLatency").Int(w.total_latency());
  json.Key("avgLatency").Double(w.avg_latency());
  json.Key("recordsPerSecond").Double(w.records_per_second());
  json.Key("mbPerSecond").Double(w.mb_per_second());
  if (const std::string inexact = InexactReason(w); !inexact.empty()) {
    // No percentile: never one computed from part of the run.
    json.Key("medianLatency").Null();
    json.Key("percentiles").Null();
    json.Key("percentileCounts").Null();
    json.Key("inexactReason").String(inexact);
  } else {
    json.Key("medianLatency").Int(w.median_latency());
    json.Key("percentiles").BeginObject();
    for (const v1::Percentile& p : w.percentiles())
      json.Key(ShortestDouble(p.percent())).Int(p.latency());
    json.EndObject();
    json.Key("percentileCounts").BeginObject();
    for (const v1::Percentile& p : w.percentiles())
      json.Key(ShortestDouble(p.percent())).Int(p.count());
    json.EndObject();
  }
  json.Key("schedule");
  if (!w.has_schedule()) {
    json.Null();  // a closed-loop run
  } else {
    const v1::Schedule& sc = w.schedule();
    json.BeginObject();
    json.Key("operations").Int(sc.operations());
    json.Key("late").Int(sc.late());
    json.Key("skipped").Int(sc.skipped());
    json.Key("maxLag").Int(sc.max_lag());
    json.Key("minLag").Int(sc.min_lag());
    json.Key("totalLag").Int(sc.total_lag());
    json.Key("meanLag").Double(sc.operations() > 0 ? static_cast<double>(sc.total_lag()) /
                                                         static_cast<double>(sc.operations())
                                                   : 0);
    json.Key("notSustained").Bool(sc.not_sustained());
    json.EndObject();
  }
  json.Key("overflow").Bool(w.overflow());
  json.Key("closedFull").Bool(w.closed_full());
  json.Key("remoteReports").Int(w.remote_reports());
  json.Key("clients").Int(w.clients());
  json.Key("lateReports").Int(w.late_reports());
  json.Key("cacheReleases").Int(w.cache_releases());
  if (w.kind() == v1::Window::KIND_TOTAL) {
    json.Key("final").Bool(w.final());
    json.Key("exactTotal").Bool(w.exact_total());
    json.Key("segments").Int(w.segments());
  }
  json.EndObject();
}

namespace {

// A total's latency at `percent` with its unit, "-" when the total has none
// (no latency yet, not exact, or the run's percentile set lacks it).
std::string TotalPercentile(const v1::Window& total, double percent, const char* unit) {
  if (total.valid_latency_records() == 0 || !InexactReason(total).empty()) return "-";
  for (const v1::Percentile& p : total.percentiles()) {
    if (p.percent() == percent) return absl::StrCat(p.latency(), " ", unit);
  }
  return "-";
}

}  // namespace

std::string ProgressText(const RunGoal& goal, int64_t records, double elapsed_s,
                         const std::string& indent) {
  if (!goal.known() || elapsed_s <= 0) return "";
  if (goal.seconds > 0) {
    const double left = std::max(0.0, goal.seconds - elapsed_s);
    return absl::StrCat(indent, "progress: ", Format("%.1f", std::min(elapsed_s, goal.seconds)),
                        " of ", ShortestDouble(goal.seconds), " s (",
                        Format("%.0f", 100 * std::min(1.0, elapsed_s / goal.seconds)), "%), ETA ",
                        Format("%.1f", left), " s\n");
  }
  const double rate = static_cast<double>(records) / elapsed_s;
  const int64_t left = std::max<int64_t>(0, goal.records - records);
  std::string eta = "-";
  if (left == 0) {
    eta = "0 s";
  } else if (rate > 0) {
    eta = absl::StrCat(Format("%.1f", static_cast<double>(left) / rate), " s");
  }
  return absl::StrCat(indent, "progress: ", records, " of ", goal.records, " records (",
                      Format("%.0f", 100 * std::min(1.0, static_cast<double>(records) /
                                                             static_cast<double>(goal.records))),
                      "%), ETA ", eta, "\n");
}

std::string RunsTable(const v1::ListRunsResponse& runs, bool wide) {
  std::string out;
  char line[1024];
  const char* const head = "%-5s %-20s %-9s %-20s %9s %12s %11s %10s %10s %10s";
  std::snprintf(line, sizeof(line), head, "ID", "NAME", "STATE", "STARTED", "SECONDS", "RECORDS",
                "RECORDS/S", "P50", "P99", "MAX");
  out += line;
  if (wide)
    absl::StrAppend(&out, " ", absl::StrFormat("%-7s %-20s %s", "SOURCE", "ENDED", "PARAMETERS"));
  out += "\n";
  for (int i = 0; i < runs.runs_size(); ++i) {
    const v1::RunInfo& r = runs.runs(i);
    const v1::Window total = i < runs.totals_size() ? runs.totals(i) : v1::Window();
    const char* u = TimeUnitText(r.latency().time_unit());
    const bool has_total = total.kind() == v1::Window::KIND_TOTAL;
    std::snprintf(
        line, sizeof(line), head, std::to_string(r.id()).c_str(), r.name().c_str(),
        // An ended run that did not complete says why (stopped, shutdown).
        r.end_reason() == v1::END_REASON_STOPPED || r.end_reason() == v1::END_REASON_SHUTDOWN
            ? EndReasonText(r.end_reason())
            : StateText(r.state()),
        UtcTime(r.start_unix_ms()).c_str(),
        has_total ? Format("%.2f", total.seconds()).c_str() : "-",
        has_total ? std::to_string(total.records()).c_str() : "-",
        has_total ? Format("%.0f", total.records_per_second()).c_str() : "-",
        has_total ? TotalPercentile(total, 50, u).c_str() : "-",
        has_total ? TotalPercentile(total, 99, u).c_str() : "-",
        has_total && total.valid_latency_records() > 0
            ? absl::StrCat(total.max_latency(), " ", u).c_str()
            : "-");
    out += line;
    if (wide) {
      absl::StrAppend(&out, " ",
                      absl::StrFormat("%-7s %-20s %s", SourceText(r.source()),
                                      UtcTime(r.end_unix_ms()), r.parameters()));
    }
    out += "\n";
  }
  return out;
}

std::string WindowLine(const v1::Window& w, v1::TimeUnit unit) {
  const char* u = TimeUnitText(unit);
  std::string s = WindowKindText(w.kind());
  if (w.kind() != v1::Window::KIND_TOTAL) absl::StrAppend(&s, " ", w.seq());
  if (w.kind() == v1::Window::KIND_TOTAL && !w.final()) absl::StrAppend(&s, " (running)");
  absl::StrAppend(&s, ": ", Format("%.2f", w.seconds()), " s, ", w.records(), " records, ",
                  Format("%.1f", w.records_per_second()), " records/sec, ",
                  Format("%.2f", w.mb_per_second()), " MB/sec, ", Format("%.1f", w.avg_latency()),
                  " ", u, " avg latency, ", w.min_latency(), " ", u, " min latency, ",
                  w.max_latency(), " ", u, " max latency; ", w.invalid_latency_records(),
                  " invalid latencies; Discarded Latencies: ", w.lower_latency_discard_records(),
                  " lower, ", w.higher_latency_discard_records(), " higher; Latency Percentiles: ");
  const char* sep = "";
  for (const v1::Percentile& p : w.percentiles()) {
    absl::StrAppend(&s, sep, p.latency(), " ", u, " ", ShortestDouble(p.percent()), "th");
    sep = ", ";
  }
  absl::StrAppend(&s, InexactReason(w));
  if (w.remote_reports() > 0) {
    absl::StrAppend(&s, "; ", w.clients(), " clients, ", w.remote_reports(), " reports (",
                    w.late_reports(), " late)");
  }
  absl::StrAppend(&s, ".");
  return s;
}

std::string WindowText(const v1::Window& w, v1::TimeUnit unit, const WindowFormat& format,
                       const std::string& indent, const std::string& title) {
  if (format.sbk) return indent + WindowLine(w, unit) + "\n";
  const char* u = TimeUnitText(unit);
  std::string head = title.empty() ? WindowKindText(w.kind()) : title;
  if (title.empty() && w.kind() != v1::Window::KIND_TOTAL) absl::StrAppend(&head, " ", w.seq());
  if (title.empty() && w.kind() == v1::Window::KIND_TOTAL)
    absl::StrAppend(&head, w.final() ? " (final)" : " (running)");
  if (w.warmup()) absl::StrAppend(&head, " (warm-up: not in the total)");
  if (w.warmup_records() > 0) {
    absl::StrAppend(&head, " (after a warm-up of ", w.warmup_records(), " records)");
  }
  std::string s = absl::StrCat(indent, head, ", ", Format("%.2f", w.seconds()), " s: ", w.records(),
                               " records, ", Format("%.1f", w.records_per_second()), " records/s, ",
                               Format("%.2f", w.mb_per_second()), " MB/s");
  if (w.remote_reports() > 0) {
    absl::StrAppend(&s, "; ", w.clients(), " clients, ", w.remote_reports(), " reports (",
                    w.late_reports(), " late)");
  }
  absl::StrAppend(&s, "\n", indent, "  latency: min ", w.min_latency(), " ", u, ", avg ",
                  Format("%.1f", w.avg_latency()), " ", u, ", max ", w.max_latency(), " ", u);
  if (w.invalid_latency_records() > 0) {
    absl::StrAppend(&s, "; ", w.invalid_latency_records(), " invalid");
  }
  if (w.lower_latency_discard_records() + w.higher_latency_discard_records() > 0) {
    absl::StrAppend(&s, "; discarded ", w.lower_latency_discard_records(), " below, ",
                    w.higher_latency_discard_records(), " above the range");
  }
  absl::StrAppend(&s, "\n");
  if (const std::string inexact = InexactReason(w); !inexact.empty()) {
    return absl::StrCat(s, indent, "  ", inexact, "\n");
  }
  // The ladder: "p50 31 ns", wrapped at 100 columns.
  std::vector<std::string> rungs;
  std::vector<double> missing = format.percents;
  for (const v1::Percentile& p : w.percentiles()) {
    auto wanted = std::find(missing.begin(), missing.end(), p.percent());
    if (!format.percents.empty() && wanted == missing.end()) continue;
    if (wanted != missing.end()) missing.erase(wanted);
    rungs.push_back(absl::StrCat("p", ShortestDouble(p.percent()), " ", p.latency(), " ", u));
  }
  if (!rungs.empty()) absl::StrAppend(&s, Wrapped(indent + "  ", rungs, "  "));
  // SBK's default unit is ms: a fast system reads "0 ms" everywhere.
  const bool all_zero = w.valid_latency_records() > 0 && !w.percentiles().empty() &&
                        std::all_of(w.percentiles().begin(), w.percentiles().end(),
                                    [](const v1::Percentile& p) { return p.latency() == 0; });
  if (all_zero && unit != v1::TIME_UNIT_NS) {
    absl::StrAppend(&s, indent, "  (every percentile is 0 ", u, ": the latencies are below 1 ", u,
                    "; a run with -time ns measures them)\n");
  }
  if (!missing.empty()) {
    std::string list;
    for (double p : missing) absl::StrAppend(&list, list.empty() ? "" : ",", ShortestDouble(p));
    absl::StrAppend(&s, indent, "  (not in this window's set: ", list,
                    "; `perlctl percentiles RUN --p ", list, "` answers any percentile)\n");
  }
  return s;
}

std::string ShowText(const v1::GetRunResponse& r, const WindowFormat& format) {
  const v1::RunInfo& run = r.run();
  std::string s = absl::StrCat("run ", run.id(), " '", run.name(), "'\n");
  absl::StrAppend(&s, "  source:   ", SourceText(run.source()), "\n");
  absl::StrAppend(&s, "  state:    ", StateWithReason(run));
  if (!run.failure_reason().empty()) absl::StrAppend(&s, " (", run.failure_reason(), ")");
  absl::StrAppend(&s, "\n  started:  ", UtcTime(run.start_unix_ms()), "\n");
  if (run.end_unix_ms() > 0) absl::StrAppend(&s, "  ended:    ", UtcTime(run.end_unix_ms()), "\n");
  if (!run.labels().empty()) {
    std::map<std::string, std::string> labels(run.labels().begin(), run.labels().end());
    absl::StrAppend(&s, "  labels:  ");
    for (const auto& [k, v] : labels) absl::StrAppend(&s, " ", k, "=", v);
    absl::StrAppend(&s, "\n");
  }
  const v1::LatencyConfig& l = run.latency();
  absl::StrAppend(&s, "  latency:  ", TimeUnitText(l.time_unit()), ", range [", l.min_latency(),
                  ", ", l.max_latency(), "], recorders ", l.periodic_recorder(), " / ",
                  l.total_recorder(), "\n");
  absl::StrAppend(&s, "  interval: ", run.reporting_interval_ms(), " ms\n");
  std::string clock = run.clock();
  if (run.clock_resolution_ns() > 0 && !absl::StrContains(clock, "resolution")) {
    absl::StrAppend(&clock, " (resolution ", run.clock_resolution_ns(), " ns)");
  }
  absl::StrAppend(&s, Wrapped("  clock:    ", clock));
  if (!run.parameters().empty()) absl::StrAppend(&s, Wrapped("  options:  ", run.parameters()));
  if (!run.bucketed_reason().empty()) {
    absl::StrAppend(&s, Wrapped("  values:   ", "not exact (bucketed): " + run.bucketed_reason()));
  }
  absl::StrAppend(&s, Wrapped("  kind:     ", KindNote(run)));
  if (r.total().has_schedule()) {
    absl::StrAppend(&s, Wrapped("  schedule: ", ScheduleText(r.total().schedule(), run)));
  }
  absl::StrAppend(&s, SloText(run));
  if (r.windows_without_distribution() > 0) {
    absl::StrAppend(
        &s, Wrapped("  ranges:   ",
                    absl::StrCat(r.windows_without_distribution(), " window(s) from window ",
                                 r.first_window_without_distribution(),
                                 " on have no stored distribution (over "
                                 "retention.maxWindowDistributionBytesPerRun): ranges over them "
                                 "are refused")));
  }
  if (r.has_latest()) {
    absl::StrAppend(&s, "  latest: ", WindowText(r.latest(), l.time_unit(), format, "  "));
  }
  absl::StrAppend(&s, "  total:  ", WindowText(r.total(), l.time_unit(), format, "  "));
  return s;
}

}  // namespace perld::perlctl
