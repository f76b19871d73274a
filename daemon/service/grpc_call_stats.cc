#include "daemon/service/grpc_call_stats.h"

#include <google/protobuf/descriptor.h>

#include <algorithm>

#include "absl/status/status.h"
#include "daemon/common/mutex.h"
#include "daemon/http/metric_families.h"

namespace perld::service {
namespace {

using grpc::experimental::InterceptionHookPoints;

class CountingInterceptor final : public grpc::experimental::Interceptor {
 public:
  CountingInterceptor(GrpcCallStats* stats, const char* method)
      : stats_(stats), method_(method != nullptr ? method : "") {
    if (!method_.empty() && method_.front() == '/') method_.erase(0, 1);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      stats_->Count(method_, methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  GrpcCallStats* stats_;
  std::string method_;
};

class CountingFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CountingFactory(GrpcCallStats* stats) : stats_(stats) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new CountingInterceptor(stats_, info->method());
  }

 private:
  GrpcCallStats* stats_;
};

}  // namespace

void GrpcCallStats::Count(std::string method, int code) {
  MutexLock lock(mu_);
  auto it = calls_.find({method, code});
  if (it != calls_.end()) {
    ++it->second;
    return;
  }
  // A method name is a label value: only methods the daemon's protos
  // define get their own series. Anything else a client calls (the generic
  // SBP service receives every unregistered name) is "other", so a caller
  // cannot grow /metrics without bound.
  std::string full = method;
  std::replace(full.begin(), full.end(), '/', '.');
  // gRPC's health service is not a generated protobuf service here.
  const bool health =
      method == "grpc.health.v1.Health/Check" || method == "grpc.health.v1.Health/Watch";
  if (!health &&
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(full) == nullptr) {
    method = "other";
  }
  ++calls_[{std::move(method), code}];
}

std::vector<prometheus::MetricFamily> GrpcCallStats::Collect() const {
  std::vector<prometheus::MetricFamily> families;
  prometheus::MetricFamily& family =
      http::AddFamily(&families, "perld_grpc_requests_total", prometheus::MetricType::Counter,
                      "gRPC calls finished, by method and status code (errors: code != OK).");
  MutexLock lock(mu_);
  for (const auto& [key, count] : calls_) {
    http::AddSample(
        family, static_cast<double>(count),
        {{"method", key.first},
         {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(key.second))}});
  }
  return families;
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
GrpcCallStats::InterceptorFactory() {
  return std::make_unique<CountingFactory>(this);
}

}  // namespace perld::service
