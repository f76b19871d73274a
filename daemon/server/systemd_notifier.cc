#include "daemon/server/systemd_notifier.h"

#include <systemd/sd-daemon.h>

#include <chrono>
#include <cstdlib>
#include <utility>

#include "daemon/common/log.h"
#include "daemon/common/mutex.h"

namespace perld::server {

SystemdNotifier::SystemdNotifier(std::function<uint64_t()> ticks) : ticks_(std::move(ticks)) {
  const char* socket = std::getenv("NOTIFY_SOCKET");  // NOLINT(concurrency-mt-unsafe): read once
  enabled_ = socket != nullptr && socket[0] != '\0';
  uint64_t usec = 0;
  if (enabled_ && sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    watchdog_usec_ = static_cast<int64_t>(usec);
    watchdog_ = std::thread([this] { Watch(); });
  }
}

SystemdNotifier::~SystemdNotifier() { Stop(); }

void SystemdNotifier::Send(const std::string& state) {
  if (!enabled_) return;
  if (const int r = sd_notify(0, state.c_str()); r < 0) {
    log::Warning("systemd: sd_notify(", state, ") failed: error ", -r);
  }
}

void SystemdNotifier::Ready(const std::string& status) { Send("READY=1\nSTATUS=" + status); }
void SystemdNotifier::Status(const std::string& status) { Send("STATUS=" + status); }
void SystemdNotifier::Reloading() { Send("RELOADING=1"); }
void SystemdNotifier::Stopping() { Send("STOPPING=1\nSTATUS=stopping"); }

void SystemdNotifier::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (watchdog_.joinable()) watchdog_.join();
}

void SystemdNotifier::Watch() {
  const auto period = std::chrono::microseconds(watchdog_usec_ / 2);
  uint64_t last = ticks_();
  bool stalled = false;
  MutexLock lock(mu_);
  while (
      !cv_.WaitFor(mu_, period, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; })) {
    const uint64_t now = ticks_();
    if (now != last) {
      Send("WATCHDOG=1");
      if (stalled) log::Info("systemd watchdog: the recorder thread progresses again");
      stalled = false;
    } else if (!stalled) {
      log::Error("systemd watchdog: the recorder thread made no progress for ",
                 watchdog_usec_ / 2000, " ms: not pinging the watchdog");
      stalled = true;
    }
    last = now;
  }
}

}  // namespace perld::server
