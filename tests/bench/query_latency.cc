// query_latency: times perld.v1.Query/GetPercentiles calls against a running
// daemon, one at a time, and prints the distribution of the call latency
// (client send to response received, loopback). A benchmark command, not a
// test: see tests/bench/DAEMON.md for the protocol and results.
//
//   query_latency --target 127.0.0.1:9717 --run 3 --calls 5000 [--p 50,99,99.9]
//                 [--scope total|latest] [--slow-us US]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "perld/v1/perld.grpc.pb.h"

int main(int argc, char** argv) {
  std::string target = "127.0.0.1:9717";
  std::string run = "1";
  std::string percents = "50,99,99.9,99.99";
  bool latest = false;
  int calls = 5000;
  double slow_us = 0;  // > 0: print each call slower than this (ms since the first call)
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--target") {
      target = value;
    } else if (flag == "--run") {
      run = value;
    } else if (flag == "--calls") {
      calls = std::atoi(value.c_str());
    } else if (flag == "--p") {
      percents = value;
    } else if (flag == "--slow-us") {
      slow_us = std::atof(value.c_str());
    } else if (flag == "--scope") {
      latest = value == "latest";
    } else {
      std::fprintf(stderr, "query_latency: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  auto stub =
      perld::v1::Query::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  perld::v1::GetPercentilesRequest request;
  request.set_run(run);
  request.set_scope(latest ? perld::v1::GetPercentilesRequest::SCOPE_LATEST
                           : perld::v1::GetPercentilesRequest::SCOPE_TOTAL);
  for (size_t pos = 0; pos < percents.size();) {
    const size_t comma = percents.find(',', pos);
    request.add_percentiles(std::atof(percents.substr(pos, comma - pos).c_str()));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  std::vector<double> us;
  us.reserve(static_cast<size_t>(calls));
  int errors = 0;
  int64_t distinct = 0;
  const auto first = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    perld::v1::GetPercentilesResponse response;
    const auto t0 = std::chrono::steady_clock::now();
    const grpc::Status status = stub->GetPercentiles(&context, request, &response);
    const auto t1 = std::chrono::steady_clock::now();
    if (!status.ok()) {
      ++errors;
      if (errors == 1) std::fprintf(stderr, "error: %s\n", status.error_message().c_str());
      continue;
    }
    distinct = response.valid_latency_records();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    if (slow_us > 0 && us.back() > slow_us) {
      std::fprintf(stderr, "slow call %d at %.3f ms: %.1f us\n", i,
                   std::chrono::duration<double, std::milli>(t0 - first).count(), us.back());
    }
  }
  if (us.empty()) return 1;
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[std::min(us.size() - 1, static_cast<size_t>(q * static_cast<double>(us.size())))];
  };
  std::printf(
      "GetPercentiles calls=%zu errors=%d valid_records=%lld  p50=%.1f us  p90=%.1f us  "
      "p99=%.1f us  p99.9=%.1f us  max=%.1f us\n",
      us.size(), errors, static_cast<long long>(distinct), at(0.5), at(0.9), at(0.99), at(0.999),
      us.back());
  return errors == 0 ? 0 : 1;
}
