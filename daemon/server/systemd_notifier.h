// SystemdNotifier: the sd_notify protocol for `Type=notify` units
// (deploy/perld.service), through libsystemd.
//
//   Ready(status)  READY=1 once every listener accepts (after DaemonServer::Start);
//   Status(text)   STATUS=... (shown by `systemctl status`);
//   Reloading()    RELOADING=1 while SIGHUP is applied, then READY=1 again;
//   Stopping()     STOPPING=1 when SIGTERM/SIGINT starts the shutdown.
// Watchdog: when the service manager set WATCHDOG_USEC (WatchdogSec=), a
// thread sends WATCHDOG=1 every half period, but only while the recorder
// thread is making progress (its tick counter moved since the previous
// check: it ticks every 10 ms, busy or idle). A stalled recorder stops the
// pings, so systemd restarts the daemon (Restart=on-failure).
//
// Without NOTIFY_SOCKET every call is a no-op: the daemon runs the same
// under systemd, in a container or in a terminal.
//
// Threads: the calls from the main thread; the watchdog thread reads the
// tick source (any thread) and stops in Stop()/the destructor.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "daemon/common/mutex.h"

namespace perld::server {

class SystemdNotifier {
 public:
  // `ticks` returns the recorder's progress counter.
  explicit SystemdNotifier(std::function<uint64_t()> ticks);
  ~SystemdNotifier();  // Stop()
  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;

  void Ready(const std::string& status);
  void Status(const std::string& status);
  void Reloading();
  void Stopping();
  // Ends the watchdog pings (before the last steps of a shutdown).
  void Stop();

  bool enabled() const { return enabled_; }
  int64_t watchdog_usec() const { return watchdog_usec_; }

 private:
  void Send(const std::string& state);
  void Watch();

  std::function<uint64_t()> ticks_;
  bool enabled_ = false;
  int64_t watchdog_usec_ = 0;
  Mutex mu_;
  CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watchdog_;
};

}  // namespace perld::server
