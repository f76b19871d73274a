// perld: the exact-latency metrics daemon. This executable hosts the
// sub-commands; today `perld bench` (an in-process PerlBench run) and
// `perld --version`.
#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include "daemon/bench/bench_options.h"
#include "daemon/bench/bench_run.h"
#include "perld/version.h"

namespace {

std::atomic<bool> g_interrupted{false};

void OnSignal(int) { g_interrupted.store(true, std::memory_order_relaxed); }

int Usage(std::ostream& os, int code) {
  os << "usage: perld bench [options]     in-process PerlBench run (perld bench -help)\n"
        "       perld --version\n";
  return code;
}

int RunBenchCommand(const std::vector<std::string>& args) {
  absl::StatusOr<perld::bench::BenchOptions> options = perld::bench::ParseBenchArgs(args);
  if (!options.ok()) {
    std::cerr << "perld bench: " << options.status().message() << "\n\n"
              << perld::bench::BenchUsage();
    return 2;
  }
  if (options->help) {
    std::cout << perld::bench::BenchUsage();
    return 0;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  absl::StatusOr<perld::bench::BenchResult> result =
      perld::bench::RunBench(*options, std::cout, std::cerr, &g_interrupted);
  if (!result.ok()) {
    std::cerr << "perld bench: " << result.status().message() << "\n";
    return 2;
  }
  return result->exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return Usage(std::cerr, 2);
  if (args[0] == "--version" || args[0] == "-version") {
    std::cout << "perld " << PERLD_VERSION << "\n";
    return 0;
  }
  if (args[0] == "--help" || args[0] == "-help" || args[0] == "help") return Usage(std::cout, 0);
  if (args[0] == "bench") return RunBenchCommand({args.begin() + 1, args.end()});
  std::cerr << "perld: unknown command '" << args[0] << "'\n";
  return Usage(std::cerr, 2);
}
