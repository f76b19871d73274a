// GrpcCallStats: every finished gRPC call of the daemon counted by method and
// status code (perld_grpc_requests_total{method,code}; errors are the codes
// other than OK), through a server interceptor installed on the builder.
//
// A call is counted when the server sends its status (PRE_SEND_STATUS), so
// streams count once, at their end; a call the client abandoned before the
// server answered is counted with the status the handler returned.
//
// A prometheus::Collectable: DaemonMetrics collects the family at scrape time
// with the labels in the order method, code (a prometheus-cpp Family would
// sort them by name).
//
// Threads: Count from any gRPC thread, Collect from any thread; one mutex
// around a small map, taken once per call (negligible next to a gRPC call).
#pragma once

#include <grpcpp/support/server_interceptor.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/common/mutex.h"

namespace perld::service {

class GrpcCallStats final : public prometheus::Collectable {
 public:
  // method: the full name without the leading '/' ("perld.v1.Query/GetRun").
  void Count(std::string method, int code);
  // perld_grpc_requests_total (the family even before any call).
  std::vector<prometheus::MetricFamily> Collect() const override;
  // The interceptor factory to hand to grpc::ServerBuilder.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InterceptorFactory();

 private:
  mutable Mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace perld::service
