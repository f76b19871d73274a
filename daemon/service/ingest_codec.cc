#include "daemon/service/ingest_codec.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "daemon/core/latency_recorder.h"
#include "daemon/service/run_proto.h"

namespace perld::service {

absl::StatusOr<ingest::OpenRequest> DecodeOpen(const v1::IngestOpen& open) {
  ingest::OpenRequest out;
  switch (open.mode()) {
    case v1::IngestOpen::MODE_RAW:
      out.mode = ingest::ClientMode::kRaw;
      break;
    case v1::IngestOpen::MODE_WINDOWS:
      out.mode = ingest::ClientMode::kWindows;
      break;
    default:
      return absl::InvalidArgumentError("open: mode must be MODE_RAW or MODE_WINDOWS");
  }
  if (open.time_unit() != v1::TIME_UNIT_UNSPECIFIED) {
    out.time_unit = FromProto(open.time_unit(), TimeUnit::kNs);
    if (!out.time_unit) return absl::InvalidArgumentError("open: unknown time_unit");
  }
  out.run_name = open.run_name();
  out.labels = {open.labels().begin(), open.labels().end()};
  if (open.has_min_latency()) out.min_latency = open.min_latency();
  if (open.has_max_latency()) out.max_latency = open.max_latency();
  out.percentiles.assign(open.percentiles().begin(), open.percentiles().end());
  if (open.has_reporting_interval_ms()) out.reporting_interval_ms = open.reporting_interval_ms();
  out.client_id = open.client_id();
  out.client_name = open.client_name();
  if (open.clock_resolution_ns() < 0) {
    return absl::InvalidArgumentError("open: clock_resolution_ns must not be negative");
  }
  out.clock = open.clock();
  out.clock_resolution_ns = open.clock_resolution_ns();
  out.slo = open.slo().expression();
  out.abort_on_fail = open.slo().abort_on_fail();
  out.bucketed_reason = open.bucketed_reason();
  if (!(open.target_rate() >= 0) || !std::isfinite(open.target_rate())) {
    return absl::InvalidArgumentError("open: target_rate must be a finite rate >= 0");
  }
  if (open.late_threshold_ns() < 0) {
    return absl::InvalidArgumentError("open: late_threshold_ns must not be negative");
  }
  out.target_rate = open.target_rate();
  out.late_threshold_ns = open.late_threshold_ns();
  out.must_exist = open.must_exist();
  out.must_create = open.must_create();
  out.run_id = open.run_id();
  out.durable_sequence = open.durable_sequence();
  return out;
}

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

}  // namespace

absl::StatusOr<int64_t> DecodeBatch(const v1::TimestampBatch& batch, int64_t max_batch_length,
                                    runs::RemoteWindow* window) {
  std::vector<TimeStamp>* out = &window->timestamps;
  out->clear();
  window->intended.clear();
  window->schedule = {};
  const int64_t n = batch.count();
  if (n > max_batch_length) {
    return absl::ResourceExhaustedError(
        absl::StrCat("ingest.maxBatchLength: batch ", batch.sequence(), " has ", n,
                     " timestamps, the limit is ", max_batch_length));
  }
  if (batch.latency_delta_size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("batch ", batch.sequence(), ": count is ", n,
                                                   " but latency_delta has ",
                                                   batch.latency_delta_size(), " entries"));
  }
  if (batch.records_size() != 0 && batch.records_size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("batch ", batch.sequence(), ": records has ",
                                                   batch.records_size(), " entries, not 0 or ", n));
  }
  if (batch.bytes_size() != 0 && batch.bytes_size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("batch ", batch.sequence(), ": bytes has ",
                                                   batch.bytes_size(), " entries, not 0 or ", n));
  }
  const int64_t constant_records = batch.constant_records() == 0 ? 1 : batch.constant_records();
  if (constant_records > kInt32Max || batch.constant_bytes() > kInt32Max) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch ", batch.sequence(), ": constant_records or constant_bytes > 2^31-1"));
  }
  // `out` may come with a pooled buffer (RemoteWindowInbox::TakeTimestampBuffer);
  // one far larger than this batch would count against the client's memory
  // at its capacity (RemoteWindow::bytes): a small batch takes its own.
  if (out->capacity() > 2 * static_cast<size_t>(n) + 1024) std::vector<TimeStamp>().swap(*out);
  out->reserve(static_cast<size_t>(n));  // written once below (no zero-fill first)
  int64_t latency = 0;
  int64_t records_total = 0;
  for (int i = 0; i < n; ++i) {
    if (__builtin_add_overflow(latency, batch.latency_delta(i), &latency)) {
      out->clear();
      return absl::InvalidArgumentError(
          absl::StrCat("batch ", batch.sequence(), ": latency ", i, " overflows int64"));
    }
    const int64_t records = batch.records_size() != 0 ? batch.records(i) : constant_records;
    const int64_t bytes = batch.bytes_size() != 0 ? batch.bytes(i) : batch.constant_bytes();
    if (records < 1 || records > kInt32Max || bytes > kInt32Max) {
      out->clear();
      return absl::InvalidArgumentError(absl::StrCat("batch ", batch.sequence(), ": timestamp ", i,
                                                     " has records ", records, " and bytes ", bytes,
                                                     " (records in [1, 2^31-1], bytes < 2^31)"));
    }
    records_total += records;
    out->push_back(
        TimeStamp{0, latency, static_cast<int32_t>(records), static_cast<int32_t>(bytes)});
  }
  if (batch.skipped() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    out->clear();
    return absl::InvalidArgumentError(
        absl::StrCat("batch ", batch.sequence(), ": skipped overflows int64"));
  }
  window->schedule.skipped = static_cast<int64_t>(batch.skipped());
  if (batch.start_lag_delta_size() == 0) return records_total;
  if (batch.start_lag_delta_size() != n) {
    out->clear();
    return absl::InvalidArgumentError(
        absl::StrCat("batch ", batch.sequence(), ": start_lag_delta has ",
                     batch.start_lag_delta_size(), " entries, not 0 or ", n));
  }
  window->intended.resize(static_cast<size_t>(n));
  int64_t lag = 0;
  for (int i = 0; i < n; ++i) {
    int64_t response = 0;
    if (__builtin_add_overflow(lag, batch.start_lag_delta(i), &lag) || lag < 0 ||
        __builtin_add_overflow((*out)[static_cast<size_t>(i)].end, lag, &response)) {
      out->clear();
      window->intended.clear();
      return absl::InvalidArgumentError(
          absl::StrCat("batch ", batch.sequence(), ": start lag ", i,
                       " is negative or overflows int64 (an operation never starts before its "
                       "slot; latency + lag must fit int64)"));
    }
    window->intended[static_cast<size_t>(i)] = -lag;
  }
  return records_total;
}

absl::Status CheckPairs(uint64_t sequence, int64_t pairs, int64_t max_pairs) {
  if (pairs > max_pairs) {
    return absl::ResourceExhaustedError(
        absl::StrCat("ingest.maxPairsPerReport: window ", sequence, " has ", pairs,
                     " latency/count pairs, the limit is ", max_pairs));
  }
  return absl::OkStatus();
}

absl::Status CheckWindow(uint64_t sequence, runs::RemoteWindow& w, int64_t min_bound,
                         int64_t max_bound) {
  const LatencyCounters& c = w.counters;
  if (c.bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("window ", sequence, ": bytes is negative"));
  }
  if (c.min_latency != kNoMinLatency && c.min_latency > c.max_latency) {
    return absl::InvalidArgumentError(absl::StrCat(
        "window ", sequence, ": min_latency ", c.min_latency, " > max_latency ", c.max_latency));
  }
  if (absl::Status s = LatencyRecorder::CheckBuckets(c, w.buckets, min_bound, max_bound); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("window ", sequence, ": ", s.message()));
  }
  w.checked = {.min_bound = min_bound, .max_bound = max_bound};
  return absl::OkStatus();
}

absl::StatusOr<runs::RemoteWindow> DecodeWindow(const v1::WindowReport& report, int64_t max_pairs,
                                                int64_t min_bound, int64_t max_bound) {
  const int64_t n = report.latency_delta_size();
  if (absl::Status s = CheckPairs(report.sequence(), n, max_pairs); !s.ok()) return s;
  if (report.count_size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("window ", report.sequence(),
                                                   ": latency_delta has ", n,
                                                   " entries but count has ", report.count_size()));
  }
  runs::RemoteWindow w;
  LatencyCounters& c = w.counters;
  c.records = report.records();
  c.bytes = report.bytes();
  c.total_latency = report.total_latency();
  c.invalid = report.invalid_latency_records();
  c.lower_discard = report.lower_latency_discard_records();
  c.higher_discard = report.higher_latency_discard_records();
  c.valid = report.valid_latency_records();
  c.rejected = report.rejected_records();
  // min/max describe the non-negative latencies seen; none seen: the
  // counters' empty values, whatever was sent.
  if (report.records() > report.invalid_latency_records()) {
    c.min_latency = report.min_latency();
    c.max_latency = report.max_latency();
  }
  w.start_unix_ms = report.start_unix_ms();
  w.end_unix_ms = report.end_unix_ms();
  w.buckets.resize(static_cast<size_t>(n));
  uint64_t latency = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t delta = report.latency_delta(i);
    if ((i > 0 && delta == 0) || __builtin_add_overflow(latency, delta, &latency) ||
        latency > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat("window ", report.sequence(), ": pair ", i,
                       ": latencies must be strictly ascending and fit int64"));
    }
    const uint64_t count = report.count(i);
    if (count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat("window ", report.sequence(), ": pair ", i, ": count overflows int64"));
    }
    w.buckets[static_cast<size_t>(i)] =
        LatencyBucket{static_cast<int64_t>(latency), static_cast<int64_t>(count)};
  }
  if (absl::Status s = CheckWindow(report.sequence(), w, min_bound, max_bound); !s.ok()) return s;
  if (report.response()) {
    const v1::Schedule& s = report.schedule();
    w.response = true;
    w.schedule = {.operations = s.operations(),
                  .late = s.late(),
                  .skipped = s.skipped(),
                  .max_lag = s.max_lag(),
                  .min_lag = s.min_lag(),
                  .total_lag = s.total_lag()};
    const runs::WindowRecord::Schedule& d = w.schedule;
    if (d.operations < 0 || d.late < 0 || d.late > d.operations || d.skipped < 0 || d.min_lag < 0 ||
        d.max_lag < d.min_lag || d.total_lag < 0 ||
        (d.operations == 0 && (d.max_lag != 0 || d.total_lag != 0))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "window ", report.sequence(),
          ": schedule: counts must be >= 0, late <= operations, 0 <= min_lag <= max_lag"));
    }
  }
  return w;
}

}  // namespace perld::service
