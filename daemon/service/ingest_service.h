// IngestService: perld.v1.Ingest on gRPC's callback API -- one bidirectional
// stream per client process (protocol: proto/perld/v1/ingest.proto), each a
// reactor, not a thread. The reactor decodes the client's messages in
// order and offers each to the ingest domain (ingest::RunTable, which
// applies it exactly once); it reads the next message only once the domain
// took this one, so a client over its share of queued memory simply stops
// being read (its message is parked, and the domain resumes the reactor when
// the recorder has made room). Acknowledgements are written when the
// client's progress changes -- a message applied, a checkpoint committed --
// one write in flight at a time, later changes coalesced into the next.
// Any error ends only this stream, with the status the protocol names, and
// is counted in IngestStats.
//
// Threads: reactions on gRPC's callback threads; progress notifications on
// whichever thread made the progress (a stream's, the state store's writer
// after a checkpoint); resumptions on the domain's RoomNotifier thread.
#pragma once

#include "daemon/config/current_config.h"
#include "daemon/ingest/ingest_stats.h"
#include "daemon/ingest/ingest_workers.h"
#include "daemon/ingest/run_table.h"
#include "daemon/service/call_auth.h"
#include "perld/v1/ingest.grpc.pb.h"

namespace perld::service {

class IngestService final : public v1::Ingest::WithRawCallbackMethod_Stream<v1::Ingest::Service> {
 public:
  // Every stream needs Access::kWrite from `auth` before its first read.
  IngestService(ingest::RunTable& runs, ingest::IngestStats& stats,
                const config::CurrentConfig& config, const CallAuth& auth,
                int worker_threads = ingest::IngestWorkers::DefaultThreads())
      : runs_(runs), stats_(stats), config_(config), auth_(auth), workers_(worker_threads) {}

  // Raw bytes: the message is parsed on a worker (IngestWorkers), not on
  // gRPC's callback thread.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Stream(
      grpc::CallbackServerContext* context) override;

 private:
  class Reactor;

  ingest::RunTable& runs_;
  ingest::IngestStats& stats_;
  const config::CurrentConfig& config_;
  const CallAuth& auth_;
  ingest::IngestWorkers workers_;  // last: stopped (joined) first, after the server stopped
};

}  // namespace perld::service
