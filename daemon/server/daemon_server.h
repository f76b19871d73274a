// DaemonServer: the long-running perld service -- every component wired
// together and its lifecycle.
//
//   start:    state directory (SQLite history: finished runs come back) ->
//             run manager (the single recorder thread + dispatcher) ->
//             gRPC (Query, Control, Ingest, health, reflection; every call
//             counted by an interceptor) -> HTTP (/metrics, the live page /
//             with /api/runs and /api/run, /healthz, /readyz). Each listener
//             is bound before Start returns;
//             Listeners() names the addresses really bound (port 0 -> a free
//             port).
//   reload:   Reload(config) applies what can change safely (log level, run
//             defaults for new runs, retention, run limits) and logs what
//             needs a restart.
//   shutdown: Shutdown() stops accepting runs and streams, stops every running
//             run (its final total is reported and stored), lets open streams
//             finish within drainTimeoutMs, flushes the state and returns.
//
// Threads: Start/Reload/Shutdown from the main thread; everything else runs
// on the component threads.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/config/daemon_config.h"

namespace perld::server {

struct Listeners {
  std::string grpc;       // HOST:PORT actually bound
  std::string grpc_unix;  // Unix socket path ("" when off)
  std::string http;
};

class DaemonServer {
 public:
  // `state_dir` is the resolved state directory.
  static absl::StatusOr<std::unique_ptr<DaemonServer>> Start(const config::DaemonConfig& config,
                                                             const std::string& state_dir);
  ~DaemonServer();
  DaemonServer(const DaemonServer&) = delete;
  DaemonServer& operator=(const DaemonServer&) = delete;

  const Listeners& listeners() const;
  // The recorder thread's progress counter (SystemdNotifier's watchdog).
  uint64_t recorder_ticks() const;
  void Reload(const config::DaemonConfig& next);
  void Shutdown();

 private:
  struct Parts;
  explicit DaemonServer(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace perld::server
