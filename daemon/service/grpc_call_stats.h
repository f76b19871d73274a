// GrpcCallStats: every finished gRPC call of the daemon counted by method and
// status code (perld_grpc_requests_total{method,code}; errors are the codes
// other than OK), through a server interceptor installed on the builder.
//
// A call is counted when the server sends its status (PRE_SEND_STATUS), so
// streams count once, at their end; a call the client abandoned before the
// server answered is counted with the status the handler returned.
//
// Threads: Count from any gRPC thread, Render from any thread; one mutex
// around a small map, taken once per call (negligible next to a gRPC call).
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace perld::service {

class GrpcCallStats {
 public:
  // method: the full name without the leading '/' ("perld.v1.Query/GetRun").
  void Count(std::string method, int code);
  // perld_grpc_requests_total as exposition text (HELP/TYPE always present).
  std::string Render() const;
  // The interceptor factory to hand to grpc::ServerBuilder.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InterceptorFactory();

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> calls_;  // guarded by mu_
};

}  // namespace perld::service
