#include "daemon/service/grpc_call_stats.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/http/prometheus_text.h"

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
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_[{std::move(method), code}];
}

std::string GrpcCallStats::Render() const {
  http::PrometheusText out;
  out.Family("perld_grpc_requests_total", http::MetricType::kCounter,
             "gRPC calls finished, by method and status code (errors: code != OK).");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, count] : calls_) {
    out.Sample(
        http::Labels()
            .Add("method", key.first)
            .Add("code", absl::StatusCodeToString(static_cast<absl::StatusCode>(key.second))),
        absl::StrCat(count));
  }
  return out.Take();
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
GrpcCallStats::InterceptorFactory() {
  return std::make_unique<CountingFactory>(this);
}

}  // namespace perld::service
