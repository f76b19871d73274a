// GrpcDrain: stops a grpc::Server once its calls have finished (or at the
// drain deadline) without waiting for idle connections.
//
// Why: grpc::Server::Shutdown(deadline) returns when every call has finished
// AND every connection has closed. On shutdown the server sends each
// connection a graceful GOAWAY with a PING and closes it only once the PING
// is answered (or after gRPC's own 20 s). A client that is not reading its
// socket right then does not answer: an idle grpcio channel is read only by
// gRPC's client backup poller (every 5 s), a stopped or busy process not at
// all. So an idle connection, with no call in flight, held the stop for up
// to the whole deadline (drainTimeoutMs).
//
// How: an interceptor counts the calls in flight (created with the call,
// destroyed with it). Shutdown() first waits until no call is in flight or
// the deadline passed (the application refuses new runs and streams by
// then); only then stops the server from taking calls
// (grpc_server_shutdown_and_notify: GOAWAY and a PING on every connection,
// listeners closed, new calls refused), so the PING follows every finished
// call's last frames; then, when calls were in flight, lets the connections
// close gracefully (their clients read the last messages and answer the
// PING) for at most kFlushGrace within the deadline; then ends the rest
// (grpc::Server::Shutdown at that deadline: calls still open are cancelled,
// every connection is closed, idle ones included).
//
// Not counted: grpc.health.v1.Health/Watch, a stream that never ends on its
// own (after the health service's Shutdown it has sent NOT_SERVING and stays
// open); it is cancelled with the connections.
//
// A call the server had accepted but not yet handed to a handler when the
// count fell to zero is cancelled too (the client sees CANCELLED or
// UNAVAILABLE, as for a call that arrives after the listener closed).
//
// Threads: the interceptor runs on gRPC threads; Shutdown on the owner's
// thread. The GrpcDrain must outlive the server it counts (declare it
// before the grpc::Server that uses its factory).
#pragma once

#include <grpcpp/server.h>
#include <grpcpp/support/server_interceptor.h>

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "daemon/common/mutex.h"

namespace perld::server {

class GrpcDrain {
 public:
  // How long connections may take to close gracefully (their clients
  // reading the finished calls' last messages) when calls were in flight.
  static constexpr absl::Duration kFlushGrace = absl::Seconds(1);

  // The interceptor factory to hand to grpc::ServerBuilder.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InterceptorFactory();

  // Calls in flight now (health watches excluded).
  int64_t in_flight() const;

  // Stops `server` as described above; returns the number of calls still in
  // flight at the deadline (cancelled). REQUIRES: `server` was built with
  // InterceptorFactory(); called once.
  int64_t Shutdown(grpc::Server& server, absl::Time deadline);

 private:
  friend class CallCounter;
  void Begin();
  void End();

  mutable Mutex mu_;
  CondVar drained_;  // in_flight_ reached 0 (Shutdown waits for it)
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace perld::server
