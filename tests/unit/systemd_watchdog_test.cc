// SystemdNotifier's watchdog against a NOTIFY_SOCKET this test reads: it
// pings WATCHDOG=1 while the recorder's tick counter advances, stops pinging
// while the counter stalls (so systemd would restart the daemon), and pings
// again once it moves.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "daemon/server/systemd_notifier.h"

namespace perld::server {
namespace {

class NotifySocket {
 public:
  NotifySocket() {
    path_ = "/tmp/perld-notify-" + std::to_string(getpid());
    unlink(path_.c_str());
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    timeval timeout = {0, 20'000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~NotifySocket() {
    close(fd_);
    unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }
  // WATCHDOG=1 datagrams received within `window`.
  int Pings(std::chrono::milliseconds window) {
    int pings = 0;
    const auto end = std::chrono::steady_clock::now() + window;
    char buf[256];
    while (std::chrono::steady_clock::now() < end) {
      const ssize_t n = recv(fd_, buf, sizeof(buf) - 1, 0);
      if (n <= 0) continue;
      buf[n] = '\0';
      if (std::strstr(buf, "WATCHDOG=1") != nullptr) ++pings;
    }
    return pings;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

TEST(SystemdWatchdogTest, PingsOnlyWhileTheRecorderProgresses) {
  NotifySocket notify;
  // NOLINTBEGIN(concurrency-mt-unsafe): before the notifier's thread starts
  setenv("NOTIFY_SOCKET", notify.path().c_str(), 1);
  setenv("WATCHDOG_USEC", "40000", 1);  // a ping every 20 ms while healthy
  unsetenv("WATCHDOG_PID");
  // NOLINTEND(concurrency-mt-unsafe)
  std::atomic<uint64_t> ticks{0};
  std::atomic<bool> advancing{true};
  std::atomic<bool> done{false};
  std::thread recorder([&] {
    while (!done.load()) {
      if (advancing.load()) ticks.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  SystemdNotifier notifier([&] { return ticks.load(); });
  ASSERT_TRUE(notifier.enabled());
  EXPECT_EQ(notifier.watchdog_usec(), 40000);

  EXPECT_GT(notify.Pings(std::chrono::milliseconds(500)), 3) << "healthy: pings";
  advancing.store(false);                        // the recorder stalls
  notify.Pings(std::chrono::milliseconds(100));  // at most one ping already in flight
  EXPECT_EQ(notify.Pings(std::chrono::milliseconds(500)), 0) << "stalled: no ping";
  advancing.store(true);
  EXPECT_GT(notify.Pings(std::chrono::milliseconds(500)), 3) << "progressing again: pings";

  notifier.Stop();
  done.store(true);
  recorder.join();
  // NOLINTNEXTLINE(concurrency-mt-unsafe): the notifier's thread has stopped
  unsetenv("NOTIFY_SOCKET");
}

}  // namespace
}  // namespace perld::server
