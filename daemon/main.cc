// perld: the exact-latency metrics daemon.
//
//   perld [--config FILE] [flags]   the long-running service (DaemonServer)
//   perld --check-config [FILE]     validate and print the effective config
//   perld bench [options]           one in-process PerlBench run, then exit
//
// Exit status: 0 on a clean stop (SIGTERM/SIGINT) or success; 2 for a usage or
// configuration error (nothing was started); 1 when the daemon cannot start
// (a listener cannot bind, the state directory is unusable) or a bench failed.
#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "daemon/bench/bench_options.h"
#include "daemon/common/log.h"
#include "daemon/config/config_loader.h"
#include "daemon/config/config_reload.h"
#include "daemon/config/config_render.h"
#include "daemon/config/daemon_flags.h"
#include "daemon/config/state_dir.h"
#include "daemon/jobs/bench_run.h"
#include "daemon/server/daemon_server.h"
#include "daemon/server/systemd_notifier.h"
#include "perld/version.h"

namespace {

std::atomic<bool> g_interrupted{false};

void OnSignal(int) { g_interrupted.store(true, std::memory_order_relaxed); }

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
  absl::StatusOr<perld::jobs::BenchResult> result =
      perld::jobs::RunBench(*options, std::cout, std::cerr, &g_interrupted);
  if (!result.ok()) {
    std::cerr << "perld bench: " << result.status().message() << "\n";
    return 2;
  }
  return result->exit_code;
}

// The configuration the daemon runs with: the file (if any), then the flags.
absl::StatusOr<perld::config::DaemonConfig> EffectiveConfig(
    const perld::config::DaemonFlags& flags) {
  perld::config::DaemonConfig config;
  if (flags.config_file) {
    absl::StatusOr<perld::config::DaemonConfig> loaded =
        perld::config::LoadConfigFile(*flags.config_file);
    if (!loaded.ok()) return loaded.status();
    config = *std::move(loaded);
  }
  if (absl::Status s = perld::config::ApplyFlags(flags, &config); !s.ok()) return s;
  return config;
}

int RunDaemon(const std::vector<std::string>& args) {
  absl::StatusOr<perld::config::DaemonFlags> flags = perld::config::ParseDaemonFlags(args);
  if (!flags.ok()) {
    std::cerr << "perld: " << flags.status().message() << "\n\n" << perld::config::DaemonUsage();
    return 2;
  }
  if (flags->help) {
    std::cout << perld::config::DaemonUsage();
    return 0;
  }
  if (flags->version) {
    std::cout << "perld " << PERLD_VERSION << "\n";
    return 0;
  }
  absl::StatusOr<perld::config::DaemonConfig> config = EffectiveConfig(*flags);
  if (!config.ok()) {
    std::cerr << config.status().message() << "\n";
    return 2;
  }
  if (flags->check_config) {
    std::cout << perld::config::RenderEffectiveConfig(*config);
    return 0;
  }

  // Signals are taken synchronously by this thread (sigwait): block them
  // before any other thread starts, so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const std::string state_dir = perld::config::ResolveStateDir(
      *config, std::getenv("STATE_DIRECTORY"));  // NOLINT(concurrency-mt-unsafe): before any thread
  config->grpc_unix = perld::config::ResolveGrpcUnix(
      *config, std::getenv("RUNTIME_DIRECTORY"));  // NOLINT(concurrency-mt-unsafe): as above
  absl::StatusOr<std::unique_ptr<perld::server::DaemonServer>> server =
      perld::server::DaemonServer::Start(*config, state_dir);
  if (!server.ok()) {
    std::cerr << "perld: cannot start: " << server.status().message() << "\n";
    return 1;
  }
  std::cout << "perld: gRPC listening on " << (*server)->listeners().grpc << "\n"
            << "perld: HTTP listening on " << (*server)->listeners().http << "\n"
            << ((*server)->listeners().grpc_unix.empty()
                    ? ""
                    : "perld: gRPC listening on unix:" + (*server)->listeners().grpc_unix + "\n")
            << std::flush;
  perld::log::Info("perld ", PERLD_VERSION, " ready (state directory ", state_dir, ")");
  perld::server::DaemonServer* const daemon = server->get();
  perld::server::SystemdNotifier systemd([daemon] { return daemon->recorder_ticks(); });
  systemd.Ready("gRPC on " + daemon->listeners().grpc + ", HTTP on " + daemon->listeners().http);

  perld::config::DaemonConfig running = *config;
  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig != SIGHUP) {
      perld::log::Info(sig == SIGTERM ? "SIGTERM" : "SIGINT", ": stopping");
      systemd.Stopping();
      break;
    }
    systemd.Reloading();
    absl::StatusOr<perld::config::DaemonConfig> reloaded = EffectiveConfig(*flags);
    if (!reloaded.ok()) {
      perld::log::Error("SIGHUP: configuration not reloaded: ", reloaded.status().message());
      systemd.Ready("reload refused: the configuration has errors (see the log)");
      continue;
    }
    reloaded->grpc_unix = perld::config::ResolveGrpcUnix(
        *reloaded,
        std::getenv("RUNTIME_DIRECTORY"));  // NOLINT(concurrency-mt-unsafe): env unchanged
    perld::config::ReloadDecision decision = perld::config::DecideReload(running, *reloaded);
    for (const std::string& change : decision.applied) perld::log::Info("SIGHUP: ", change);
    for (const std::string& change : decision.needs_restart) {
      perld::log::Warning("SIGHUP: needs a restart, not applied: ", change);
    }
    if (decision.applied.empty() && decision.needs_restart.empty()) {
      perld::log::Info("SIGHUP: configuration unchanged");
    }
    (*server)->Reload(decision.next);
    running = decision.next;
    systemd.Ready("reloaded");
  }
  (*server)->Shutdown();
  systemd.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "bench") return RunBenchCommand({args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "-version") {
    std::cout << "perld " << PERLD_VERSION << "\n";
    return 0;
  }
  if (!args.empty() && args[0] == "help") args[0] = "--help";
  if (!args.empty() && !args[0].empty() && args[0][0] != '-') {
    std::cerr << "perld: unknown command '" << args[0] << "'\n\n" << perld::config::DaemonUsage();
    return 2;
  }
  return RunDaemon(args);
}
