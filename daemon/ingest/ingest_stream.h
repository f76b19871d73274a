// IngestStream: what the ingest domain (RunTable, ClientSession) needs of one client's
// stream, and nothing of its transport: to see that it was cancelled (a
// newer stream of the client took over, the run was stopped, the peer went
// away) and to cancel it. The gRPC services adapt a grpc::ServerContext to
// it (GrpcIngestStream, grpc_ingest_stream.h); tests use a flag.
//
// Threads: IsCancelled and Cancel from any thread, concurrently.
#pragma once

#include <atomic>

namespace perld::ingest {

class IngestStream {
 public:
  virtual ~IngestStream() = default;
  virtual bool IsCancelled() const = 0;
  virtual void Cancel() = 0;
};

// A stream that is only a cancellation flag (tests, internal callers).
class FlagIngestStream final : public IngestStream {
 public:
  bool IsCancelled() const override { return cancelled_.load(std::memory_order_acquire); }
  void Cancel() override { cancelled_.store(true, std::memory_order_release); }

 private:
  std::atomic<bool> cancelled_{false};
};

}  // namespace perld::ingest
