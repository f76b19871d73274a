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
  // The calls in flight finish first, before any connection hears of the
  // stop (the application refuses new runs and streams by now; a short call
  // that still arrives is served).
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
  // Only now the GOAWAY: every connection gets one with a PING, the
  // listeners close, new calls are refused. A call that ended handed its
  // last message and status to the transport, which is not the client
  // having read them, and closing a connection whose client has frames in
  // flight to us resets it: the client loses what it had not read (1 of 200
  // watch streams on one connection ended UNAVAILABLE after receiving its
  // total when the GOAWAY went out before the calls ended and the
  // connection closed as its last stream did, under ASan on a loaded 2-core
  // host). Sent after the calls' last frames, the PING is answered only once
  // the client has read them, and gRPC closes each connection once its PING
  // is answered. So when calls were in flight, the stop is graceful for up
  // to kFlushGrace (within the deadline) and returns as soon as every
  // connection is closed; idle connections whose client does not answer are
  // closed at the grace's end. With no call in flight, every connection is
  // closed at once.
  grpc_completion_queue* cq = grpc_completion_queue_create_for_pluck(nullptr);
  int tag = 0;
  grpc_server_shutdown_and_notify(server.c_server(), cq, &tag);
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
