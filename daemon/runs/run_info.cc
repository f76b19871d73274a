#include "daemon/runs/run_info.h"

#include <utility>

#include "daemon/runs/window_record.h"

namespace perld::runs {

const char* RunSourceName(RunSource source) {
  switch (source) {
    case RunSource::kBench:
      return "bench";
    case RunSource::kIngest:
      return "ingest";
    case RunSource::kSbp:
      return "sbp";
  }
  return "bench";
}

const char* RunStateName(RunState state) {
  switch (state) {
    case RunState::kRunning:
      return "running";
    case RunState::kFinished:
      return "finished";
    case RunState::kFailed:
      return "failed";
  }
  return "running";
}

const char* LatencyKindOf(const RunInfo& info) {
  return info.service_run != 0 ? "response" : "service";
}

const char* EndReasonName(EndReason reason) {
  switch (reason) {
    case EndReason::kNone:
      return "";
    case EndReason::kCompleted:
      return "completed";
    case EndReason::kStopped:
      return "stopped";
    case EndReason::kShutdown:
      return "shutdown";
    case EndReason::kFailed:
      return "failed";
    case EndReason::kSloFailed:
      return "slo_failed";
  }
  return "";
}

const char* SloStateName(SloState state) {
  switch (state) {
    case SloState::kNone:
      return "";
    case SloState::kPending:
      return "pending";
    case SloState::kHolding:
      return "holding";
    case SloState::kFailing:
      return "failing";
    case SloState::kPassed:
      return "passed";
    case SloState::kFailed:
      return "failed";
  }
  return "";
}

bool ParseSloState(std::string_view name, SloState* out) {
  for (SloState s : {SloState::kNone, SloState::kPending, SloState::kHolding, SloState::kFailing,
                     SloState::kPassed, SloState::kFailed}) {
    if (name == SloStateName(s)) {
      *out = s;
      return true;
    }
  }
  return false;
}

bool ParseEndReason(std::string_view name, EndReason* out) {
  for (EndReason r : {EndReason::kNone, EndReason::kCompleted, EndReason::kStopped,
                      EndReason::kShutdown, EndReason::kFailed, EndReason::kSloFailed}) {
    if (name == EndReasonName(r)) {
      *out = r;
      return true;
    }
  }
  return false;
}

bool ParseRunSource(std::string_view name, RunSource* out) {
  for (RunSource s : {RunSource::kBench, RunSource::kIngest, RunSource::kSbp}) {
    if (name == RunSourceName(s)) {
      *out = s;
      return true;
    }
  }
  return false;
}

bool ParseRunState(std::string_view name, RunState* out) {
  for (RunState s : {RunState::kRunning, RunState::kFinished, RunState::kFailed}) {
    if (name == RunStateName(s)) {
      *out = s;
      return true;
    }
  }
  return false;
}

const char* WindowKindName(WindowRecord::Kind kind) {
  switch (kind) {
    case WindowRecord::Kind::kPeriodic:
      return "periodic";
    case WindowRecord::Kind::kTotalSegment:
      return "total_segment";
    case WindowRecord::Kind::kTotal:
      return "total";
  }
  return "periodic";
}

PercentileSet PercentilesOf(const RunSpec& spec) {
  absl::StatusOr<PercentileSet> set = PercentileSet::Create(spec.latency.percentiles);
  return set.ok() ? *std::move(set) : PercentileSet::Default();
}

}  // namespace perld::runs
