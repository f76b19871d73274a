// DaemonServer: the long-running perld service -- every component wired
// together and its lifecycle.
//
//   start:    the components are an ordered list of steps (Lifecycle, see
//             lifecycle.h; the list is in DaemonServer::Start):
//               security  tokens, TLS files, the upstream channel
//               state     the state directory (SQLite history: finished runs
//                         come back; ingest runs to resume)
//               runs      the run manager (not running yet)
//               upstream  the forwarder to a parent (upstream.target only)
//               ingest    ingest runs and their checkpointer
//               recorder  the recorder thread and dispatcher
//               services  Query, Control, Ingest, SBP, bench jobs, metrics
//               http      /metrics, the live page, /healthz, /readyz
//               resume    stored ingest runs resume; restored upstream streams
//               grpc      Query, Control, Ingest, SBP, health, reflection;
//                         every call counted by interceptors
//               serve     ready (/readyz 200)
//             A failed step stops the steps started before it in reverse,
//             once, and Start returns its error prefixed by the step's name
//             ("http: ..."); nothing is left running or listening, and the
//             state directory is as a crash would leave it (ingest runs
//             stay resumable). Each listener is bound before Start returns;
//             Listeners() names the addresses really bound (port 0 -> a
//             free port).
//   reload:   Reload(config) applies what can change safely (log level, run
//             defaults for new runs, retention, run limits) and logs what
//             needs a restart.
//   shutdown: Shutdown() stops the steps in reverse: serve (no new runs or
//             streams, /readyz 503, health NOT_SERVING, every running bench
//             run stopped: its final total is reported and stored), grpc
//             (calls in flight finish within drainTimeoutMs, the rest are
//             cancelled; idle connections never delay it; then the ingest
//             runs end), resume (the upstream sends the last windows and
//             closes), http, services (watches cancelled), recorder, state
//             (flushed), and returns.
//
// Threads: Start/Reload/Shutdown from the main thread; everything else runs
// on the component threads.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/config/daemon_config.h"
#include "daemon/server/lifecycle.h"

namespace perld::server {

struct Listeners {
  std::string grpc;       // HOST:PORT actually bound
  std::string grpc_unix;  // Unix socket path ("" when off)
  std::string http;
};

class DaemonServer {
 public:
  // `state_dir` is the resolved state directory. `hooks`: tests only (a
  // step made to fail, a trace of the steps started and stopped).
  static absl::StatusOr<std::unique_ptr<DaemonServer>> Start(const config::DaemonConfig& config,
                                                             const std::string& state_dir,
                                                             LifecycleHooks hooks = {});
  ~DaemonServer();
  DaemonServer(const DaemonServer&) = delete;
  DaemonServer& operator=(const DaemonServer&) = delete;

  const Listeners& listeners() const;
  // The recorder thread's progress counter (SystemdNotifier's watchdog).
  uint64_t recorder_ticks() const;
  void Reload(const config::DaemonConfig& next);
  // Stops every step in reverse (see above). Idempotent; the destructor
  // calls it.
  void Shutdown();

  struct Parts;  // the components (daemon_server.cc)

 private:
  explicit DaemonServer(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace perld::server
