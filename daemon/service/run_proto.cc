#include "daemon/service/run_proto.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "daemon/bench/sbk_report.h"
#include "daemon/core/run_total.h"

namespace perld::service {

v1::RunState ToProto(runs::RunState state) {
  switch (state) {
    case runs::RunState::kRunning:
      return v1::RUN_STATE_RUNNING;
    case runs::RunState::kFinished:
      return v1::RUN_STATE_FINISHED;
    case runs::RunState::kFailed:
      return v1::RUN_STATE_FAILED;
  }
  return v1::RUN_STATE_UNSPECIFIED;
}

v1::EndReason ToProto(runs::EndReason reason) {
  switch (reason) {
    case runs::EndReason::kNone:
      return v1::END_REASON_UNSPECIFIED;
    case runs::EndReason::kCompleted:
      return v1::END_REASON_COMPLETED;
    case runs::EndReason::kStopped:
      return v1::END_REASON_STOPPED;
    case runs::EndReason::kShutdown:
      return v1::END_REASON_SHUTDOWN;
    case runs::EndReason::kFailed:
      return v1::END_REASON_FAILED;
    case runs::EndReason::kSloFailed:
      return v1::END_REASON_SLO_FAILED;
  }
  return v1::END_REASON_UNSPECIFIED;
}

std::optional<runs::RunState> FromProto(v1::RunState state) {
  switch (state) {
    case v1::RUN_STATE_RUNNING:
      return runs::RunState::kRunning;
    case v1::RUN_STATE_FINISHED:
      return runs::RunState::kFinished;
    case v1::RUN_STATE_FAILED:
      return runs::RunState::kFailed;
    default:
      return std::nullopt;
  }
}

v1::TimeUnit ToProto(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kMs:
      return v1::TIME_UNIT_MS;
    case TimeUnit::kUs:
      return v1::TIME_UNIT_US;
    case TimeUnit::kNs:
      return v1::TIME_UNIT_NS;
  }
  return v1::TIME_UNIT_UNSPECIFIED;
}

namespace {

v1::RunSource ToProto(runs::RunSource source) {
  switch (source) {
    case runs::RunSource::kBench:
      return v1::RUN_SOURCE_BENCH;
    case runs::RunSource::kIngest:
      return v1::RUN_SOURCE_INGEST;
    case runs::RunSource::kSbp:
      return v1::RUN_SOURCE_SBP;
  }
  return v1::RUN_SOURCE_UNSPECIFIED;
}

v1::Window::Kind ToProto(runs::WindowRecord::Kind kind) {
  switch (kind) {
    case runs::WindowRecord::Kind::kPeriodic:
      return v1::Window::KIND_PERIODIC;
    case runs::WindowRecord::Kind::kTotalSegment:
      return v1::Window::KIND_TOTAL_SEGMENT;
    case runs::WindowRecord::Kind::kTotal:
      return v1::Window::KIND_TOTAL;
  }
  return v1::Window::KIND_UNSPECIFIED;
}

v1::SloStatus::State ToProto(runs::SloState state) {
  switch (state) {
    case runs::SloState::kNone:
      return v1::SloStatus::STATE_UNSPECIFIED;
    case runs::SloState::kPending:
      return v1::SloStatus::STATE_PENDING;
    case runs::SloState::kHolding:
      return v1::SloStatus::STATE_HOLDING;
    case runs::SloState::kFailing:
      return v1::SloStatus::STATE_FAILING;
    case runs::SloState::kPassed:
      return v1::SloStatus::STATE_PASSED;
    case runs::SloState::kFailed:
      return v1::SloStatus::STATE_FAILED;
  }
  return v1::SloStatus::STATE_UNSPECIFIED;
}

}  // namespace

void ToProto(const runs::RunInfo& info, v1::RunInfo* out) {
  out->set_id(info.id);
  out->set_name(info.spec.name);
  for (const auto& [k, v] : info.spec.labels) (*out->mutable_labels())[k] = v;
  out->set_source(ToProto(info.spec.source));
  out->set_state(ToProto(info.state));
  out->set_failure_reason(info.failure_reason);
  out->set_end_reason(ToProto(info.end_reason));
  out->set_start_unix_ms(info.start_unix_ms);
  out->set_end_unix_ms(info.end_unix_ms);
  const LatencyConfig& l = info.spec.latency;
  v1::LatencyConfig* lc = out->mutable_latency();
  lc->set_time_unit(ToProto(l.time_unit));
  lc->set_min_latency(l.min_latency);
  lc->set_max_latency(l.max_latency);
  for (double p : l.percentiles) lc->add_percentiles(p);
  lc->set_periodic_recorder(RecorderKindName(info.spec.periodic_recorder));
  lc->set_total_recorder(RecorderKindName(info.spec.total_recorder));
  lc->set_max_array_size_mb(l.max_array_size_mb);
  lc->set_max_hash_map_size_mb(l.max_hash_map_size_mb);
  lc->set_total_max_hash_map_size_mb(l.total_max_hash_map_size_mb);
  out->set_reporting_interval_ms(info.spec.reporting_interval_ms);
  out->set_clock(info.spec.clock);
  out->set_clock_resolution_ns(info.spec.clock_resolution_ns);
  out->set_parameters(info.spec.parameters);
  out->set_writers(info.spec.writers);
  out->set_readers(info.spec.readers);
  out->set_bucketed_reason(info.spec.bucketed_reason);
  out->set_kind(info.service_run != 0 ? v1::LATENCY_KIND_RESPONSE : v1::LATENCY_KIND_SERVICE);
  out->set_response_run(info.response_run);
  out->set_service_run(info.service_run);
  out->set_target_rate(info.spec.target_rate);
  out->set_rate_not_sustained(info.rate_not_sustained);
  if (info.spec.target_rate > 0) out->set_late_threshold_ns(info.spec.late_threshold_ns);
  if (!info.spec.slo.empty()) {
    out->mutable_slo()->set_expression(info.spec.slo);
    out->mutable_slo()->set_abort_on_fail(info.spec.abort_on_fail);
    v1::SloStatus* status = out->mutable_slo_status();
    status->set_state(ToProto(info.slo_status.state));
    status->set_window(info.slo_status.window);
    for (const runs::SloStatus::Verdict& verdict : info.slo_status.verdicts) {
      v1::SloStatus::Verdict* v = status->add_verdicts();
      v->set_term(verdict.term);
      v->set_held(verdict.held);
      v->set_line(verdict.line);
    }
  }
}

void ToProto(const runs::WindowRecord::Schedule& schedule, v1::Schedule* out) {
  out->set_operations(schedule.operations);
  out->set_late(schedule.late);
  out->set_skipped(schedule.skipped);
  out->set_max_lag(schedule.max_lag);
  out->set_min_lag(schedule.min_lag);
  out->set_total_lag(schedule.total_lag);
  out->set_not_sustained(schedule.not_sustained);
}

void AddPercentiles(const LatencySnapshot& s,
                    google::protobuf::RepeatedPtrField<v1::Percentile>* out) {
  const size_t n = std::min({s.percents.size(), s.values.size(), s.counts.size()});
  for (size_t i = 0; i < n; ++i) {
    v1::Percentile* p = out->Add();
    p->set_percent(s.percents[i]);
    p->set_latency(s.values[i]);
    p->set_count(s.counts[i]);
  }
}

void ToProto(const runs::WindowRecord& w, bool final_total, v1::Window* out) {
  const LatencySnapshot& s = w.snapshot;
  const bench::ReportRow row = bench::MakeReportRow(s, w.seconds, w.RateSeconds());
  out->set_kind(ToProto(w.kind));
  out->set_seq(w.seq);
  out->set_start_unix_ms(w.start_unix_ms);
  out->set_end_unix_ms(w.end_unix_ms);
  out->set_seconds(w.seconds);
  out->set_rate_seconds(w.RateSeconds());
  out->set_warmup(w.warmup);
  out->set_warmup_records(w.warmup_left_out.records);
  out->set_records(s.records);
  out->set_bytes(s.bytes);
  out->set_valid_latency_records(s.valid);
  out->set_invalid_latency_records(s.invalid);
  out->set_lower_latency_discard_records(s.lower_discard);
  out->set_higher_latency_discard_records(s.higher_discard);
  out->set_min_latency(s.min_latency);
  out->set_max_latency(s.max_latency);
  out->set_total_latency(s.total_latency);
  out->set_rejected_records(s.rejected);
  out->set_avg_latency(row.avg_latency);
  out->set_records_per_second(row.records_per_sec);
  out->set_mb_per_second(row.mb_per_sec);
  out->set_median_latency(s.median);
  AddPercentiles(s, out->mutable_percentiles());
  out->set_overflow(s.overflow);
  out->set_closed_full(s.closed_full);
  out->set_full_closes(s.full_closes);
  out->set_remote_reports(w.remote.reports);
  out->set_clients(w.remote.clients);
  out->set_late_reports(w.remote.late);
  out->set_cache_releases(w.cache_releases);
  if (w.schedule.operations > 0 || w.schedule.skipped > 0) {
    ToProto(w.schedule, out->mutable_schedule());
  }
  if (w.kind == runs::WindowRecord::Kind::kTotal) {
    out->set_segments(w.segments);
    out->set_exact_total(w.exact_total);
    out->set_final(final_total);
    if (!s.percentiles_exact) out->set_inexact_reason(kInexactTotalReason);
  }
}

absl::StatusOr<runs::LatencyKind> FromProto(v1::LatencyKind kind) {
  switch (kind) {
    case v1::LATENCY_KIND_UNSPECIFIED:
      return runs::LatencyKind::kDefault;
    case v1::LATENCY_KIND_RESPONSE:
      return runs::LatencyKind::kResponse;
    case v1::LATENCY_KIND_SERVICE:
      return runs::LatencyKind::kService;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("kind: unknown latency kind ", kind,
                       " (LATENCY_KIND_RESPONSE = 1, LATENCY_KIND_SERVICE = 2)"));
  }
}

std::optional<TimeUnit> FromProto(v1::TimeUnit unit, TimeUnit unspecified) {
  switch (unit) {
    case v1::TIME_UNIT_MS:
      return TimeUnit::kMs;
    case v1::TIME_UNIT_US:
      return TimeUnit::kUs;
    case v1::TIME_UNIT_NS:
      return TimeUnit::kNs;
    case v1::TIME_UNIT_UNSPECIFIED:
      return unspecified;
    default:
      return std::nullopt;
  }
}

absl::StatusOr<bench::BenchOptions> BenchOptionsFromProto(const v1::BenchOptions& in,
                                                          const config::DaemonConfig& config,
                                                          int64_t* reporting_interval_ms) {
  auto bad = [](const char* field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("options.", field, ": ", why));
  };
  bench::BenchOptions o;
  if (in.writers() < 0 || in.readers() < 0) return bad("writers", "must be >= 0");
  if (in.writers() + int64_t{in.readers()} < 1) {
    return bad("writers", "give writers and/or readers (>= 1 in total)");
  }
  o.writers = in.writers();
  o.readers = in.readers();
  if (in.size() < 0) return bad("size", "must be >= 0");
  o.size = in.size();
  if (in.records() < 0) return bad("records", "must be >= 0");
  o.records = in.records();
  if (!std::isfinite(in.seconds()) || in.seconds() < 0 || in.seconds() > 365.0 * 86400) {
    return bad("seconds", "must be >= 0 and at most a year");
  }
  o.seconds = in.seconds();
  if (o.records == 0 && o.seconds == 0) {
    return bad("records", "give records (exact mode) or seconds (timed mode)");
  }
  if (!std::isfinite(in.throughput_mbps()) ||
      (in.throughput_mbps() < 0 && in.throughput_mbps() != -1)) {
    return bad("throughput_mbps", "must be -1 or 0 (saturation) or > 0 MB/s");
  }
  o.throughput_mbps = in.throughput_mbps() > 0 ? in.throughput_mbps() : -1;
  if (o.throughput_mbps > 0 && o.size <= 0) {
    return bad("throughput_mbps", "rate control needs size > 0");
  }
  if (o.throughput_mbps > 0 && o.seconds <= 0) {
    return bad("throughput_mbps", "rate control needs seconds > 0");
  }
  std::optional<TimeUnit> unit = FromProto(in.time_unit(), config.latency.time_unit);
  if (!unit) return bad("time_unit", "unknown time unit");
  o.time_unit = *unit;
  // The configured range applies when the run uses the configured unit.
  const LatencyConfig unit_defaults = o.time_unit == config.latency.time_unit
                                          ? config.latency
                                          : LatencyConfig::ForUnit(o.time_unit);
  o.min_latency = in.has_min_latency() ? in.min_latency() : unit_defaults.min_latency;
  o.max_latency = in.has_max_latency() ? in.max_latency() : unit_defaults.max_latency;
  if (*o.min_latency < 0 || *o.max_latency <= *o.min_latency) {
    return bad("min_latency", absl::StrCat("range [", *o.min_latency, ", ", *o.max_latency,
                                           "] must satisfy 0 <= min < max"));
  }
  o.channels = config.channels;
  if (in.has_mpscqueue())
    o.channels.queue = in.mpscqueue() ? QueueKind::kMpsc : QueueKind::kLibrary;
  if (in.has_max_qs()) o.channels.max_qs = in.max_qs();
  if (in.has_q_per_worker()) o.channels.q_per_worker = in.q_per_worker();
  if (in.has_max_pending_per_worker()) {
    if (in.max_pending_per_worker() < 2) return bad("max_pending_per_worker", "must be >= 2");
    o.channels.max_pending_per_worker = static_cast<size_t>(in.max_pending_per_worker());
  }
  switch (in.overflow()) {
    case v1::OVERFLOW_BLOCK:
      o.channels.overflow = OverflowPolicy::kBlock;
      break;
    case v1::OVERFLOW_DROP:
      o.channels.overflow = OverflowPolicy::kDrop;
      break;
    case v1::OVERFLOW_UNSPECIFIED:
      break;
    default:
      return bad("overflow", "unknown policy");
  }
  if (in.warmup_ms() < 0 ||
      (in.warmup_ms() > 0 &&
       (o.seconds <= 0 || static_cast<double>(in.warmup_ms()) >= o.seconds * 1000))) {
    return bad("warmup_ms", "must be >= 0 and, in a timed run, below its seconds");
  }
  o.warmup_ms = in.warmup_ms();
  switch (in.clock()) {
    case v1::BENCH_CLOCK_UNSPECIFIED:
      o.clock = config.clock;
      break;
    case v1::BENCH_CLOCK_AUTO:
      o.clock = ClockSource::kAuto;
      break;
    case v1::BENCH_CLOCK_TSC:
      o.clock = ClockSource::kTsc;
      break;
    case v1::BENCH_CLOCK_MONOTONIC:
      o.clock = ClockSource::kMonotonic;
      break;
    default:
      return bad("clock", "unknown clock (BENCH_CLOCK_AUTO, _TSC, _MONOTONIC)");
  }
  switch (in.catchup()) {
    case v1::BENCH_CATCHUP_UNSPECIFIED:
    case v1::BENCH_CATCHUP_BURST:
      o.catchup = bench::Catchup::kBurst;
      break;
    case v1::BENCH_CATCHUP_SKIP:
      o.catchup = bench::Catchup::kSkip;
      break;
    default:
      return bad("catchup", "unknown catch-up (BENCH_CATCHUP_BURST, _SKIP)");
  }
  if (in.has_late_us()) {
    if (in.late_us() < 0 || in.late_us() > int64_t{86'400} * 1'000'000) {
      return bad("late_us", "must be in [0, 86400000000]");
    }
    o.late_us = in.late_us();
  }
  o.idle_ns = config.idle_ns;
  *reporting_interval_ms = config.reporting_interval_ms;
  if (in.has_reporting_interval_ms()) {
    if (in.reporting_interval_ms() < 10 || in.reporting_interval_ms() > 86'400'000) {
      return bad("reporting_interval_ms", "must be in [10, 86400000]");
    }
    *reporting_interval_ms = in.reporting_interval_ms();
  }
  return o;
}

void ToProtoRow(const ingest::ClientView& c, v1::RemoteClient* out) {
  out->set_client_id(c.id);
  out->set_client_name(c.name);
  out->set_clock(c.clock);
  out->set_mode(c.mode == ingest::ClientMode::kWindows ? "windows" : "raw");
  out->set_state(c.state);
  out->set_acked_sequence(c.acked_sequence);
  out->set_duplicates(c.duplicates);
  out->set_reports(c.reports);
  out->set_timestamps(c.timestamps);
  const LatencyCounters& k = c.counters;
  out->set_records(k.records);
  out->set_bytes(k.bytes);
  out->set_valid_latency_records(k.valid);
  out->set_invalid_latency_records(k.invalid);
  out->set_lower_latency_discard_records(k.lower_discard);
  out->set_higher_latency_discard_records(k.higher_discard);
  out->set_min_latency(k.min_latency == kNoMinLatency ? 0 : k.min_latency);
  out->set_max_latency(k.max_latency);
  out->set_total_latency(k.total_latency);
  out->set_exact(c.exact);
  out->set_last_report_unix_ms(c.last_report_unix_ms);
}

}  // namespace perld::service
