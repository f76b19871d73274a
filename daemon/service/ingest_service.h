// IngestService: perld.v1.Ingest -- one bidirectional stream per client
// process (protocol: proto/perld/v1/ingest.proto). The handler reads the
// client's messages in order, hands each to IngestRuns (which applies it
// exactly once), and acknowledges the highest contiguous sequence applied
// after every message. Any error ends only this stream, with the status
// the protocol names, and is counted in IngestStats.
//
// Threads: gRPC's sync server threads, one per open stream.
#pragma once

#include "daemon/service/call_auth.h"
#include "daemon/service/current_config.h"
#include "daemon/service/ingest_runs.h"
#include "daemon/service/ingest_stats.h"
#include "perld/v1/ingest.grpc.pb.h"

namespace perld::service {

class IngestService final : public v1::Ingest::Service {
 public:
  // Every stream needs Access::kWrite from `auth` before its first read.
  IngestService(IngestRuns& runs, IngestStats& stats, const CurrentConfig& config,
                const CallAuth& auth)
      : runs_(runs), stats_(stats), config_(config), auth_(auth) {}

  grpc::Status Stream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::IngestResponse, v1::IngestRequest>* stream) override;

 private:
  // A client that closed its part already reconnected (its close's
  // acknowledgement was lost): it may only repeat that close, which is
  // acknowledged once durable.
  grpc::Status RepeatClose(const IngestRuns::Session& session,
                           grpc::ServerReaderWriter<v1::IngestResponse, v1::IngestRequest>* stream,
                           grpc::ServerContext* context);

  IngestRuns& runs_;
  IngestStats& stats_;
  const CurrentConfig& config_;
  const CallAuth& auth_;
};

}  // namespace perld::service
