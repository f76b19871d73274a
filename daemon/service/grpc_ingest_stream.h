// GrpcIngestStream: a gRPC server call as an IngestStream (ingest_stream.h).
// It borrows the call's ServerContext: it lives on the handler's stack and
// must not outlive the call (IngestRuns drops it when the handler Leaves).
//
// Threads: as IngestStream; TryCancel and IsCancelled are thread-safe in gRPC.
#pragma once

#include <grpcpp/server_context.h>

#include "daemon/service/ingest_stream.h"

namespace perld::service {

class GrpcIngestStream final : public IngestStream {
 public:
  explicit GrpcIngestStream(grpc::ServerContext* context) : context_(context) {}
  bool IsCancelled() const override { return context_->IsCancelled(); }
  void Cancel() override { context_->TryCancel(); }

 private:
  grpc::ServerContext* const context_;
};

}  // namespace perld::service
