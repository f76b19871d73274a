// The ingest domain's vocabulary, free of any transport: what a remote
// client asks when it opens (OpenRequest), what the daemon answers about one
// message (Applied) and about a client's acknowledgement state (Progress),
// and a client's row in the per-client breakdown (ClientView). The gRPC
// services (Ingest, SBK's SBP) translate their wire messages to and from
// these; the rules are in proto/perld/v1/ingest.proto's header and
// RunTable's.
//
// Plain data; any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/core/latency_config.h"
#include "daemon/core/latency_recorder.h"
#include "daemon/core/latency_snapshot.h"
#include "daemon/runs/run_info.h"

namespace perld::ingest {

enum class ClientMode { kRaw, kWindows };
// "MODE_RAW", "MODE_WINDOWS": the spelling clients know from the protocol.
const char* ClientModeName(ClientMode mode);

// IngestOpen, decoded.
struct OpenRequest {
  std::string run_name;
  std::map<std::string, std::string> labels;  // used when the run is created
  std::optional<TimeUnit> time_unit;          // nullopt: the daemon's timeUnit
  std::optional<int64_t> min_latency;
  std::optional<int64_t> max_latency;
  std::vector<double> percentiles;  // used when the run is created; empty: the daemon's
  std::optional<int64_t> reporting_interval_ms;
  std::string client_id;  // stable across the client's reconnects
  std::string client_name;
  std::string clock;                // the client's timestamp clock; "": not reported
  int64_t clock_resolution_ns = 0;  // 0: not reported
  // The run's SLO when this open creates it (RunSpec::slo); a joining
  // client's non-empty one must equal the run's.
  std::string slo;
  bool abort_on_fail = false;
  // Non-empty: this client's latencies are bucketed values, and why
  // (IngestOpen.bucketed_reason): the run it creates or joins is marked so.
  std::string bucketed_reason;
  // > 0: a rate-controlled client (IngestOpen.target_rate): the run it
  // creates keeps a response view; a run it joins must have this rate.
  double target_rate = 0;
  int64_t late_threshold_ns = 0;  // used when it creates a rate-controlled run; 0: 1 ms
  ClientMode mode = ClientMode::kRaw;
  bool must_exist = false;        // join only
  bool must_create = false;       // create only (ALREADY_EXISTS)
  uint64_t run_id = 0;            // a reconnect: the run it was in
  uint64_t durable_sequence = 0;  // a reconnect: what it was told is durable
};

// What one applied (or skipped) message leaves behind.
struct Applied {
  uint64_t acked_sequence = 0;
  uint64_t duplicates = 0;
  bool duplicate = false;
};

// A client's acknowledgement state, as its stream reports it.
struct Progress {
  uint64_t applied = 0;
  uint64_t durable = 0;
  uint64_t duplicates = 0;
  bool close_durable = false;  // a checkpoint (or the run's stored end) holds the close
  bool operator==(const Progress&) const = default;
};

// One client's share of a remote run (Query.GetClients).
struct ClientView {
  std::string id;
  std::string name;
  std::string clock;  // the client's timestamp clock and resolution; "": not reported
  ClientMode mode = ClientMode::kRaw;
  const char* state = "";  // "streaming", "detached", "closed", "gone"
  uint64_t acked_sequence = 0;
  uint64_t duplicates = 0;
  int64_t reports = 0;     // windows or batches applied
  int64_t timestamps = 0;  // raw: timestamps sent
  LatencyCounters counters;
  bool exact = false;  // the client's own distribution is kept (windows)
  int64_t last_report_unix_ms = 0;
  // When exact: the requested set (shared with the client's memo, never
  // written); null otherwise.
  std::shared_ptr<const LatencySnapshot> percentiles;
};

// Streams attached now and distinct clients that ever joined a run
// (SBK_Connections / SBK_Max_Connections).
struct Connections {
  int now = 0;
  int ever = 0;
};

}  // namespace perld::ingest
