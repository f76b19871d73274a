#include "daemon/server/grpc_drain.h"

#include <grpc/grpc.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/time/clock.h"

namespace perld::server {

// One per counted call: created with the call, destroyed with it.
class CallCounter final : public grpc::experimental::Interceptor {
 public:
  explicit CallCounter(GrpcDrain* drain) : drain_(drain) { drain_->Begin(); }
  ~CallCounter() override { drain_->End(); }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    methods->Proceed();
  }

 private:
  GrpcDrain* drain_;
};

namespace {

class CallCounterFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CallCounterFactory(GrpcDrain* drain) : drain_(drain) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    const char* method = info->method();
    if (method != nullptr && std::strcmp(method, "/grpc.health.v1.Health/Watch") == 0) {
      return nullptr;  // never ends on its own: not waited for
    }
    return new CallCounter(drain_);
  }

 private:
  GrpcDrain* drain_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
GrpcDrain::InterceptorFactory() {
  return std::make_unique<CallCounterFactory>(this);
}

void GrpcDrain::Begin() {
  MutexLock lock(mu_);
  ++in_flight_;
}

void GrpcDrain::End() {
  MutexLock lock(mu_);
  if (--in_flight_ == 0) drained_.NotifyAll();
}

int64_t GrpcDrain::in_flight() const {
  MutexLock lock(mu_);
  return in_flight_;
}

int64_t GrpcDrain::Shutdown(grpc::Server& server, absl::Time deadline) {
  // No new calls from here on: every connection gets a GOAWAY, the
  // listeners close. The calls in flight go on.
  grpc_completion_queue* cq = grpc_completion_queue_create_for_pluck(nullptr);
  int tag = 0;
  grpc_server_shutdown_and_notify(server.c_server(), cq, &tag);

  int64_t left = 0;
  bool had_calls = false;
  {
    MutexLock lock(mu_);
    had_calls = in_flight_ > 0;
    const auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
    if (deadline == absl::InfiniteFuture()) {
      drained_.Wait(mu_, drained);
    } else {
      drained_.WaitUntil(mu_, absl::ToChronoTime(deadline), drained);
    }
    left = in_flight_;
  }
  // Every call handed its last message and status to the transport, which
  // is not the client having read them: closing a connection whose client
  // has not read everything (or whose last frames we have not read) resets
  // it, and the client loses what it had not read -- 166 of 200 watch
  // streams on one connection, with the close 1 s after the calls ended,
  // on a loaded 2-core host. So when calls were in flight, the stop is
  // graceful for up to kFlushGrace (within the deadline): gRPC closes each
  // connection once its client has acknowledged the GOAWAY and its streams
  // ended, and returns as soon as all are closed; idle connections whose
  // client does not answer are closed at the grace's end. With no call in
  // flight, every connection is closed at once.
  const absl::Time now = absl::Now();
  const absl::Time flushed = had_calls ? std::min(deadline, now + kFlushGrace) : now;
  server.Shutdown(absl::ToChronoTime(std::max(flushed, now)));

  // The server is shut down: our notification is in the queue.
  grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_REALTIME), nullptr);
  grpc_completion_queue_shutdown(cq);
  grpc_completion_queue_destroy(cq);
  return left;
}

}  // namespace perld::server
