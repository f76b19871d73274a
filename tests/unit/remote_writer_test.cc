// RemoteWriter's threads against a loopback cpp-httplib server that plays a
// receiver: 500 and 429 (Retry-After) answers retried until 200 with every
// sample delivered once and in order; 400 dropped and counted; a receiver
// that is down with a tiny queue: queue_full drops counted, collection never
// waits; the stop's last collection and bounded flush; bearer and basic
// auth headers; disabled: no thread, no request.
#include "daemon/remote_write/remote_writer.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <snappy.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prometheus/remote_write.pb.h"

namespace perld::remote_write {
namespace {

using namespace std::chrono_literals;

// A receiver: answers with `statuses` in turn (then 200), keeps what it got.
class Receiver {
 public:
  explicit Receiver(std::vector<int> statuses = {}) : statuses_(statuses.begin(), statuses.end()) {
    server_.Post("/api/v1/write", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      headers_.push_back(req.headers);
      const int status = statuses_.empty() ? 200 : statuses_.front();
      if (!statuses_.empty()) statuses_.pop_front();
      ++requests_;
      if (status == 429) res.set_header("Retry-After", "1");
      res.status = status;
      if (status == 200) {
        std::string raw;
        prometheus::WriteRequest request;
        if (snappy::Uncompress(req.body.data(), req.body.size(), &raw) &&
            request.ParseFromString(raw)) {
          for (const prometheus::TimeSeries& ts : request.timeseries()) {
            for (const prometheus::Sample& s : ts.samples()) {
              values_.push_back(s.value());
              timestamps_.push_back(s.timestamp());
            }
          }
        } else {
          res.status = 400;
        }
      } else {
        res.set_content("refused by the test", "text/plain");
      }
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // bind_to_any_port listens already: early connections wait in the backlog.
  }
  ~Receiver() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_, "/api/v1/write"); }
  int requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::vector<double> values() {
    std::lock_guard<std::mutex> lock(mu_);
    return values_;
  }
  httplib::Headers headers(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return headers_.at(i);
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::deque<int> statuses_;
  int requests_ = 0;
  std::vector<double> values_;
  std::vector<int64_t> timestamps_;
  std::vector<httplib::Headers> headers_;
};

// An exposition whose one sample counts the collections: 1, 2, 3, ...
struct Counting {
  std::atomic<int> collections{0};
  std::function<void(std::string*)> render() {
    return [this](std::string* text) {
      *text = absl::StrCat("# TYPE perld_test_total counter\nperld_test_total ",
                           collections.fetch_add(1) + 1, "\n");
    };
  }
};

config::RemoteWriteConfig Config(const std::string& url, int64_t interval_ms = 100) {
  config::RemoteWriteConfig c;
  c.url = url;
  c.interval_ms = interval_ms;
  c.timeout_ms = 2000;
  return c;
}

RemoteWriter::Options Fast(std::function<void(std::string*)> render) {
  RemoteWriter::Options o;
  o.render = std::move(render);
  o.min_backoff_ms = 20;
  o.max_backoff_ms = 200;
  return o;
}

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// A loopback port nothing listens on (bound, read back, closed).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 9;  // discard: nothing listens there either
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// 1, 2, ..., n: every collection delivered once, in order.
bool Consecutive(const std::vector<double>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != static_cast<double>(i + 1)) return false;
  }
  return !v.empty();
}

TEST(RemoteWriterTest, RetriesServerErrorsAndTooManyRequestsThenDeliversEverythingInOrder) {
  Receiver receiver({500, 503, 429, 200});
  Counting counting;
  auto writer = RemoteWriter::Create(Config(receiver.url()), Fast(counting.render()));
  ASSERT_TRUE(writer.ok()) << writer.status();
  (*writer)->Start();
  ASSERT_TRUE(WaitFor([&] { return receiver.values().size() >= 5; }));
  (*writer)->Stop(2000);
  const RemoteWriteStats& stats = (*writer)->stats();
  EXPECT_TRUE(Consecutive(receiver.values())) << ::testing::PrintToString(receiver.values());
  EXPECT_EQ(receiver.values().size(), static_cast<size_t>(counting.collections.load()));
  EXPECT_EQ(stats.sent(), receiver.values().size());
  EXPECT_EQ(stats.requests(500), 1u);
  EXPECT_EQ(stats.requests(503), 1u);
  EXPECT_EQ(stats.requests(429), 1u);
  EXPECT_EQ(stats.retries(), 3u);
  EXPECT_EQ(stats.dropped(DropReason::kQueueFull) + stats.dropped(DropReason::kRejected) +
                stats.dropped(DropReason::kShutdown),
            0u);
  EXPECT_EQ(stats.queued(), 0u);
  // The remote-write 1.0 headers.
  const httplib::Headers h = receiver.headers(0);
  EXPECT_EQ(h.find("Content-Encoding")->second, "snappy");
  EXPECT_EQ(h.find("Content-Type")->second, "application/x-protobuf");
  EXPECT_EQ(h.find("X-Prometheus-Remote-Write-Version")->second, "0.1.0");
}

TEST(RemoteWriterTest, RefusedRequestsAreDroppedAndCounted) {
  Receiver receiver({400, 400});
  Counting counting;
  config::RemoteWriteConfig c = Config(receiver.url(), 200);
  auto writer = RemoteWriter::Create(c, Fast(counting.render()));
  ASSERT_TRUE(writer.ok()) << writer.status();
  (*writer)->Start();
  ASSERT_TRUE(WaitFor([&] { return !receiver.values().empty(); }));
  (*writer)->Stop(2000);
  const RemoteWriteStats& stats = (*writer)->stats();
  EXPECT_EQ(stats.requests(400), 2u);
  EXPECT_EQ(stats.dropped(DropReason::kRejected), 2u);
  EXPECT_EQ(stats.retries(), 0u);
  EXPECT_EQ(stats.sent() + stats.dropped(DropReason::kRejected), stats.collected());
  EXPECT_EQ(receiver.values().front(), 3);  // 1 and 2 were refused
}

TEST(RemoteWriterTest, ReceiverDownFillsTheBoundedQueueAndCountsTheDrops) {
  // A port nothing listens on: connection refused, retried.
  const int port = FreePort();
  Counting counting;
  config::RemoteWriteConfig c =
      Config(absl::StrCat("http://127.0.0.1:", port, "/api/v1/write"), 50);
  c.max_queued_samples = 5;
  auto writer = RemoteWriter::Create(c, Fast(counting.render()));
  ASSERT_TRUE(writer.ok()) << writer.status();
  (*writer)->Start();
  const RemoteWriteStats& stats = (*writer)->stats();
  ASSERT_TRUE(WaitFor([&] { return stats.collected() >= 12; }));  // collection never waits
  EXPECT_GE(stats.dropped(DropReason::kQueueFull), stats.collected() - 5 - 1);
  EXPECT_LE(stats.queued(), 5u);
  EXPECT_GE(stats.requests(0), 1u);
  (*writer)->Stop(100);
  // Everything collected is accounted for.
  EXPECT_EQ(stats.collected(), stats.sent() + stats.dropped(DropReason::kQueueFull) +
                                   stats.dropped(DropReason::kShutdown));
  EXPECT_GE(stats.dropped(DropReason::kShutdown), 1u);
}

TEST(RemoteWriterTest, StopCollectsOnceMoreAndFlushes) {
  Receiver receiver;
  Counting counting;
  auto writer = RemoteWriter::Create(Config(receiver.url(), 3'600'000), Fast(counting.render()));
  ASSERT_TRUE(writer.ok()) << writer.status();
  (*writer)->Start();
  (*writer)->Stop(5000);  // before any interval passed
  EXPECT_EQ(counting.collections.load(), 1);
  EXPECT_THAT(receiver.values(), ::testing::ElementsAre(1));
  EXPECT_FALSE((*writer)->running());
}

TEST(RemoteWriterTest, DisabledSendsNothingAndStartsNoThread) {
  Counting counting;
  auto writer = RemoteWriter::Create(config::RemoteWriteConfig{}, Fast(counting.render()));
  ASSERT_TRUE(writer.ok()) << writer.status();
  (*writer)->Start();
  EXPECT_FALSE((*writer)->running());
  std::this_thread::sleep_for(100ms);
  (*writer)->Stop(1000);
  EXPECT_EQ(counting.collections.load(), 0);
  EXPECT_EQ((*writer)->stats().collections(), 0u);
}

std::string SecretFile(const std::string& name, const std::string& content) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << content;
  chmod(path.c_str(), 0600);
  return path;
}

TEST(RemoteWriterTest, SendsBearerTokenOrBasicAuthAndReloadsThem) {
  Receiver receiver;
  Counting counting;
  config::RemoteWriteConfig c = Config(receiver.url(), 50);
  c.bearer_token_file = SecretFile("rw.token", "s3cret-token\n");
  auto writer = RemoteWriter::Create(c, Fast(counting.render()));
  ASSERT_TRUE(writer.ok()) << writer.status();
  (*writer)->Start();
  ASSERT_TRUE(WaitFor([&] { return receiver.requests() >= 1; }));
  EXPECT_EQ(receiver.headers(0).find("Authorization")->second, "Bearer s3cret-token");
  // SIGHUP: basic auth now.
  c.bearer_token_file.clear();
  c.basic_auth_username = "perld";
  c.basic_auth_password_file = SecretFile("rw.password", "pa ss\n");
  ASSERT_TRUE((*writer)->Reconfigure(c).ok());
  const int before = receiver.requests();
  ASSERT_TRUE(WaitFor([&] { return receiver.requests() >= before + 2; }));
  // "perld:pa ss" in base64.
  EXPECT_EQ(receiver.headers(static_cast<size_t>(before + 1)).find("Authorization")->second,
            "Basic cGVybGQ6cGEgc3M=");
  // A reload with a missing file keeps the running settings.
  c.basic_auth_password_file = ::testing::TempDir() + "/missing.password";
  const absl::Status refused = (*writer)->Reconfigure(c);
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("remoteWrite.basicAuth.passwordFile"));
  EXPECT_TRUE((*writer)->running());
  // Turned off by a reload: the threads stop.
  ASSERT_TRUE((*writer)->Reconfigure(config::RemoteWriteConfig{}).ok());
  EXPECT_FALSE((*writer)->running());
}

TEST(RemoteWriterTest, UnsafeOrMissingCredentialFilesStopTheStart) {
  config::RemoteWriteConfig c = Config("http://127.0.0.1:9/api/v1/write");
  c.bearer_token_file = ::testing::TempDir() + "/nope.token";
  Counting counting;
  auto missing = RemoteWriter::Create(c, Fast(counting.render()));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), ::testing::HasSubstr("remoteWrite.bearerTokenFile"));
  c.bearer_token_file = SecretFile("open.token", "tok\n");
  chmod(c.bearer_token_file.c_str(), 0644);
  auto open = RemoteWriter::Create(c, Fast(counting.render()));
  ASSERT_FALSE(open.ok());
  EXPECT_THAT(open.status().message(), ::testing::HasSubstr("remoteWrite.bearerTokenFile"));
}

}  // namespace
}  // namespace perld::remote_write
