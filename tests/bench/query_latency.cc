// query_latency: times perld.v1.Query calls against a running daemon, one
// at a time -- GetPercentiles (default) or GetClients -- and prints the
// distribution of the call latency (client send to response received,
// loopback). A benchmark command, not a test: see tests/bench/DAEMON.md for
// the protocol and results.
//
//   query_latency --target 127.0.0.1:9717 --run 3 --calls 5000 [--p 50,99,99.9]
//                 [--scope total|latest] [--slow-us US]
//                 [--method percentiles|clients] [--wait-ms MS] [--json true]
//                 [--arena true|false]
//
// GetClients asks the run's own percentiles unless --p is given.
//
// --arena (default true): each response is parsed onto a protobuf arena
// whose first block is one buffer reused by every call, as a client that
// asks often would; a 200-client GetClients answer is ~6,000 messages, and
// parsing them onto the heap (false, the stub's default) costs the client
// about as much as the daemon's whole answer (tests/bench/DAEMON.md).
//
// --wait-ms: retry the first call (untimed) until it succeeds, up to MS (the
// run may not exist yet). --json true: print the latencies of the calls, in
// ms, as one JSON list (tests/bench/stream_goals.py --probe).
#include <google/protobuf/arena.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "perld/v1/perld.grpc.pb.h"

int main(int argc, char** argv) {
  std::string target = "127.0.0.1:9717";
  std::string run = "1";
  std::string percents = "50,99,99.9,99.99";
  bool latest = false;
  bool percents_given = false;
  bool clients = false;
  bool json = false;
  bool arena = true;
  int wait_ms = 0;
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
      percents_given = true;
    } else if (flag == "--slow-us") {
      slow_us = std::atof(value.c_str());
    } else if (flag == "--scope") {
      latest = value == "latest";
    } else if (flag == "--method") {
      clients = value == "clients";
    } else if (flag == "--wait-ms") {
      wait_ms = std::atoi(value.c_str());
    } else if (flag == "--json") {
      json = value == "true";
    } else if (flag == "--arena") {
      arena = value == "true";
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
  if (clients && !percents_given) percents.clear();  // the run's own percentiles
  perld::v1::GetClientsRequest clients_request;
  clients_request.set_run(run);
  for (size_t pos = 0; pos < percents.size();) {
    const size_t comma = percents.find(',', pos);
    const double percent = std::atof(percents.substr(pos, comma - pos).c_str());
    request.add_percentiles(percent);
    clients_request.add_percentiles(percent);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  // One call; `distinct`: the run's valid records (GetPercentiles) or its
  // clients (GetClients).
  int64_t distinct = 0;
  std::vector<char> first_block(1 << 20);
  auto call = [&]() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    google::protobuf::ArenaOptions options;
    options.initial_block = first_block.data();
    options.initial_block_size = first_block.size();
    google::protobuf::Arena on_arena(options);  // unused with --arena false
    using google::protobuf::Arena;
    if (clients) {
      perld::v1::GetClientsResponse on_heap;
      auto* response =
          arena ? Arena::CreateMessage<perld::v1::GetClientsResponse>(&on_arena) : &on_heap;
      grpc::Status status = stub->GetClients(&context, clients_request, response);
      distinct = response->clients_size();
      return status;
    }
    perld::v1::GetPercentilesResponse on_heap;
    auto* response =
        arena ? Arena::CreateMessage<perld::v1::GetPercentilesResponse>(&on_arena) : &on_heap;
    grpc::Status status = stub->GetPercentiles(&context, request, response);
    distinct = response->valid_latency_records();
    return status;
  };
  const auto wait_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (wait_ms > 0 && !call().ok() && std::chrono::steady_clock::now() < wait_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<double> us;
  us.reserve(static_cast<size_t>(calls));
  int errors = 0;
  const auto first = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const grpc::Status status = call();
    const auto t1 = std::chrono::steady_clock::now();
    if (!status.ok()) {
      ++errors;
      if (errors == 1) std::fprintf(stderr, "error: %s\n", status.error_message().c_str());
      continue;
    }
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    if (slow_us > 0 && us.back() > slow_us) {
      std::fprintf(stderr, "slow call %d at %.3f ms: %.1f us\n", i,
                   std::chrono::duration<double, std::milli>(t0 - first).count(), us.back());
    }
  }
  if (json) {
    std::printf("[");
    for (size_t i = 0; i < us.size(); ++i) std::printf("%s%.4f", i > 0 ? ", " : "", us[i] / 1000);
    std::printf("]\n");
    return errors == 0 ? 0 : 1;
  }
  if (us.empty()) return 1;
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[std::min(us.size() - 1, static_cast<size_t>(q * static_cast<double>(us.size())))];
  };
  std::printf(
      "%s calls=%zu errors=%d %s=%lld  p50=%.1f us  p90=%.1f us  p99=%.1f us  p99.9=%.1f us  "
      "max=%.1f us\n",
      clients ? "GetClients" : "GetPercentiles", us.size(), errors,
      clients ? "clients" : "valid_records", static_cast<long long>(distinct), at(0.5), at(0.9),
      at(0.99), at(0.999), us.back());
  return errors == 0 ? 0 : 1;
}
