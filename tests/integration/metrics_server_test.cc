// MetricsServer over real loopback sockets: port 0 reads the bound port back,
// GET the path (200, exposition content type, body), 404 elsewhere, a port
// already listening is reported in use, Stop joins and closes the port.
#include "daemon/http/metrics_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <string>

namespace perld::http {
namespace {

httplib::Client LoopbackClient(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  client.set_keep_alive(false);
  return client;
}

TEST(MetricsServerTest, ServesThePathOnAnEphemeralPort) {
  std::atomic<int> renders{0};
  auto server = MetricsServer::Start(kDefaultMetricsHost, 0, "/metrics", [&renders] {
    return "perld_up " + std::to_string(++renders) + "\n";
  });
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  ASSERT_GT(port, 0);
  EXPECT_EQ((*server)->Url(), "http://127.0.0.1:" + std::to_string(port) + "/metrics");

  httplib::Client client = LoopbackClient(port);
  for (int i = 1; i <= 2; ++i) {
    httplib::Result res = client.Get("/metrics");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_EQ(res->body, "perld_up " + std::to_string(i) + "\n");
  }

  for (const char* other : {"/", "/metrics/", "/metricsx", "/other"}) {
    httplib::Result res = client.Get(other);
    ASSERT_TRUE(res) << other;
    EXPECT_EQ(res->status, 404) << other;
  }
  EXPECT_EQ(renders.load(), 2);  // 404s never render
  (*server)->Stop();
}

TEST(MetricsServerTest, PathIsMatchedLiterallyAndGetsALeadingSlash) {
  auto server = MetricsServer::Start(kDefaultMetricsHost, 0, "a.b", [] { return "x 1\n"; });
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->path(), "/a.b");
  httplib::Client client = LoopbackClient((*server)->port());
  httplib::Result hit = client.Get("/a.b");
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->status, 200);
  httplib::Result regex_lookalike = client.Get("/aXb");
  ASSERT_TRUE(regex_lookalike);
  EXPECT_EQ(regex_lookalike->status, 404);
}

TEST(MetricsServerTest, ReportsAPortInUse) {
  auto first = MetricsServer::Start(kDefaultMetricsHost, 0, "/metrics", [] { return ""; });
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  auto second = MetricsServer::Start(kDefaultMetricsHost, port, "/metrics", [] { return ""; });
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << second.status();
  EXPECT_NE(second.status().message().find("in use"), std::string::npos) << second.status();
  // The first server is unaffected.
  httplib::Result res = LoopbackClient(port).Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST(MetricsServerTest, RejectsBadArguments) {
  auto render = [] { return std::string(); };
  EXPECT_EQ(MetricsServer::Start("", 0, "/m", render).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsServer::Start(kDefaultMetricsHost, -1, "/m", render).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsServer::Start(kDefaultMetricsHost, 65536, "/m", render).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsServer::Start(kDefaultMetricsHost, 0, "", render).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsServer::Start(kDefaultMetricsHost, 0, "/m", nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MetricsServerTest, StopClosesThePortAndIsIdempotent) {
  auto server = MetricsServer::Start(kDefaultMetricsHost, 0, "/metrics", [] { return "x 1\n"; });
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  (*server)->Stop();
  (*server)->Stop();
  httplib::Result res = LoopbackClient(port).Get("/metrics");
  EXPECT_FALSE(res);
  // The port can be bound again right away.
  auto again = MetricsServer::Start(kDefaultMetricsHost, port, "/metrics", [] { return "x 2\n"; });
  ASSERT_TRUE(again.ok()) << again.status();
  httplib::Result res2 = LoopbackClient(port).Get("/metrics");
  ASSERT_TRUE(res2);
  EXPECT_EQ(res2->body, "x 2\n");
}

TEST(MetricsServerTest, StartThenImmediateDestroyDoesNotHang) {
  for (int i = 0; i < 20; ++i) {
    auto server = MetricsServer::Start(kDefaultMetricsHost, 0, "/metrics", [] { return ""; });
    ASSERT_TRUE(server.ok()) << server.status();
  }
}

}  // namespace
}  // namespace perld::http
