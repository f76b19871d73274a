// The one place where run data becomes perld.v1 messages (and bench options
// come back from them). Pure functions; any thread.
#pragma once

#include "absl/status/statusor.h"
#include "daemon/bench/bench_options.h"
#include "daemon/config/daemon_config.h"
#include "daemon/ingest/ingest_types.h"
#include "daemon/runs/run_info.h"
#include "daemon/runs/window_record.h"
#include "perld/v1/perld.pb.h"

namespace perld::service {

void ToProto(const runs::RunInfo& info, v1::RunInfo* out);
// `final_total`: a KIND_TOTAL window that is the run's final total.
void ToProto(const runs::WindowRecord& window, bool final_total, v1::Window* out);
// A window's schedule (a response view's, issue 30).
void ToProto(const runs::WindowRecord::Schedule& schedule, v1::Schedule* out);
// A snapshot's percentiles (percent, exact latency, records at it).
void AddPercentiles(const LatencySnapshot& s,
                    google::protobuf::RepeatedPtrField<v1::Percentile>* out);
v1::RunState ToProto(runs::RunState state);
v1::EndReason ToProto(runs::EndReason reason);
v1::TimeUnit ToProto(TimeUnit unit);

// Proto state filter -> registry state; UNSPECIFIED -> nullopt.
std::optional<runs::RunState> FromProto(v1::RunState state);
// Proto time unit -> unit; UNSPECIFIED -> `unspecified`; nullopt when unknown.
std::optional<TimeUnit> FromProto(v1::TimeUnit unit, TimeUnit unspecified);
// INVALID_ARGUMENT for an unknown value.
absl::StatusOr<runs::LatencyKind> FromProto(v1::LatencyKind kind);

// Bench options from a StartBench request, unset fields from the daemon's
// configuration. InvalidArgument names the field.
absl::StatusOr<bench::BenchOptions> BenchOptionsFromProto(const v1::BenchOptions& in,
                                                          const config::DaemonConfig& config,
                                                          int64_t* reporting_interval_ms);

// A client's breakdown row (ingest::RunTable::Clients): every field but its
// percentiles (SerializeClientsAnswer writes those; AddPercentiles builds them).
void ToProtoRow(const ingest::ClientView& c, v1::RemoteClient* out);

}  // namespace perld::service
