// DaemonServer's ordered lifecycle in process: a failure injected at every
// start step, and the real failures (a port in use, an unusable state
// directory, a missing token file), return the error naming the step and stop
// every step started before it exactly once, in reverse; then a daemon on the
// same state directory starts and stops cleanly (nothing was left holding
// it). Under AddressSanitizer this also checks that nothing leaks.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/server/daemon_server.h"

namespace perld::server {
namespace {

using ::testing::ElementsAreArray;

class DaemonServerLifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/perld-lifecycle-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    tmp_ = dir;
    config_.grpc_listen = "127.0.0.1:0";
    config_.http_listen = "127.0.0.1:0";
    config_.log_level = log::Level::kWarning;
  }
  void TearDown() override {
    ASSERT_EQ(std::system(("rm -rf " + tmp_).c_str()), 0);  // NOLINT(concurrency-mt-unsafe)
  }

  // Starts with `hooks` (trace added) into events_.
  absl::StatusOr<std::unique_ptr<DaemonServer>> Start(const config::DaemonConfig& config,
                                                      const std::string& fail = "") {
    events_.clear();
    LifecycleHooks hooks;
    hooks.fail_start = fail;
    hooks.trace = [this](std::string_view event, std::string_view step) {
      events_.push_back(std::string(event) + " " + std::string(step));
    };
    return DaemonServer::Start(config, tmp_ + "/state", std::move(hooks));
  }

  // The steps a clean start goes through, in order (and checks its Shutdown
  // stops them in reverse).
  std::vector<std::string> Steps() {
    absl::StatusOr<std::unique_ptr<DaemonServer>> server = Start(config_);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return {};
    (*server)->Shutdown();
    std::vector<std::string> steps;
    for (const std::string& e : events_) {
      if (absl::StartsWith(e, "start ")) steps.push_back(e.substr(6));
    }
    EXPECT_THAT(events_, ElementsAreArray(Expected(steps, steps.size())));
    return steps;
  }

  // "start" of steps [0, k), then "stop" of steps k-1 .. 0.
  static std::vector<std::string> Expected(const std::vector<std::string>& steps, size_t k) {
    std::vector<std::string> out;
    for (size_t i = 0; i < k; ++i) out.push_back("start " + steps[i]);
    for (size_t i = k; i > 0; --i) out.push_back("stop " + steps[i - 1]);
    return out;
  }

  // A failed start: the error names `step`, the steps before it stopped in
  // reverse, once.
  void ExpectFailedAt(const absl::StatusOr<std::unique_ptr<DaemonServer>>& server,
                      const std::vector<std::string>& steps, const std::string& step) {
    ASSERT_FALSE(server.ok()) << step;
    EXPECT_TRUE(absl::StartsWith(server.status().message(), step + ": ")) << server.status();
    const auto at = std::find(steps.begin(), steps.end(), step);
    ASSERT_NE(at, steps.end()) << step;
    EXPECT_THAT(events_, ElementsAreArray(Expected(steps, at - steps.begin())));
  }

  // A socket listening on 127.0.0.1:port (0: any free port).
  static int Listen(int* port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), len), 0);
    EXPECT_EQ(listen(fd, 1), 0);
    EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    *port = ntohs(addr.sin_port);
    return fd;
  }

  std::string tmp_;
  config::DaemonConfig config_;
  std::vector<std::string> events_;
};

TEST_F(DaemonServerLifecycle, FailureAtEveryStepStopsTheStartedStepsInReverseOnce) {
  const std::vector<std::string> steps = Steps();
  ASSERT_GE(steps.size(), 10u);
  for (const std::string& step : steps) {
    SCOPED_TRACE(step);
    absl::StatusOr<std::unique_ptr<DaemonServer>> server = Start(config_, step);
    ExpectFailedAt(server, steps, step);
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInternal);
  }
  // Nothing holds the state directory or a listener: a daemon starts again.
  EXPECT_EQ(Steps(), steps);
}

TEST_F(DaemonServerLifecycle, RealFailuresNameTheirStep) {
  const std::vector<std::string> steps = Steps();
  int port = 0;
  const int busy = Listen(&port);
  {
    config::DaemonConfig config = config_;
    config.grpc_listen = absl::StrCat("127.0.0.1:", port);
    ExpectFailedAt(Start(config), steps, "grpc");
  }
  {
    config::DaemonConfig config = config_;
    config.http_listen = absl::StrCat("127.0.0.1:", port);
    ExpectFailedAt(Start(config), steps, "http");
  }
  close(busy);
  {
    config::DaemonConfig config = config_;
    config.auth.ingest_token_file = tmp_ + "/no-such-token";
    ExpectFailedAt(Start(config), steps, "security");
  }
  {
    // Another daemon holds the state directory.
    absl::StatusOr<std::unique_ptr<DaemonServer>> first =
        DaemonServer::Start(config_, tmp_ + "/state", LifecycleHooks{});
    ASSERT_TRUE(first.ok()) << first.status();
    ExpectFailedAt(Start(config_), steps, "state");
  }
  {
    // A state directory that is a file.
    std::ofstream(tmp_ + "/file") << "x";
    events_.clear();
    LifecycleHooks hooks;
    hooks.trace = [this](std::string_view event, std::string_view step) {
      events_.push_back(std::string(event) + " " + std::string(step));
    };
    ExpectFailedAt(DaemonServer::Start(config_, tmp_ + "/file", std::move(hooks)), steps, "state");
  }
  EXPECT_EQ(Steps(), steps);
}

}  // namespace
}  // namespace perld::server
