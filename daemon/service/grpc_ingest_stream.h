// GrpcIngestStream: a gRPC server call as an IngestStream (ingest_stream.h).
// It borrows the call's context (synchronous or callback API): it lives as
// long as the handler or reactor and must not outlive the call (the RunTable
// drops it when the handler Leaves).
//
// Threads: as IngestStream; TryCancel and IsCancelled are thread-safe in gRPC.
#pragma once

#include <grpcpp/server_context.h>

#include "daemon/ingest/ingest_stream.h"

namespace perld::service {

class GrpcIngestStream final : public ingest::IngestStream {
 public:
  explicit GrpcIngestStream(grpc::ServerContextBase* context) : context_(context) {}
  bool IsCancelled() const override { return context_->IsCancelled(); }
  void Cancel() override { context_->TryCancel(); }

 private:
  grpc::ServerContextBase* const context_;
};

}  // namespace perld::service
