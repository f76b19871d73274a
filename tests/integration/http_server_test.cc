// HttpServer over real loopback sockets, with cpp-httplib as an independent
// client and raw sockets for what a library client never sends: port 0 reads
// the bound port back, exact-path routes (404 elsewhere), a port already
// listening is reported in use, Stop joins and closes the port; GET and HEAD
// (405 for others), 400 / 413 / 431 / 505 heads, keep-alive and pipelined
// requests, percent-decoded path and query, request headers, shared bodies;
// and the bounds of issue 24: a slow reader holds no handler thread, a full
// queue answers 503, idle and byte-dribbling clients are cut at the header
// deadline while others are served, the connection cap answers 503, and a
// TLS handshake that never completes blocks nobody.
#include "daemon/http/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace perld::http {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

httplib::Client LoopbackClient(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  client.set_keep_alive(false);
  return client;
}

// Waits (bounded) until `done` holds.
template <class Pred>
bool WaitFor(Pred done, milliseconds limit = milliseconds(5000)) {
  const auto deadline = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;
};

// A blocking loopback TCP client that writes exactly the bytes it is given.
class RawClient {
 public:
  explicit RawClient(int port, int receive_buffer = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (receive_buffer > 0) {
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  bool Send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // One response (its body by Content-Length unless `head_request`); nullopt
  // when the connection ends or 5 s pass first.
  std::optional<RawResponse> Read(bool head_request = false) {
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return std::nullopt;
    }
    RawResponse r;
    std::vector<std::string> lines = absl::StrSplit(buffer_.substr(0, end), "\r\n");
    buffer_.erase(0, end + 4);
    std::vector<std::string> status = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
    if (status.size() < 2 || !absl::SimpleAtoi(status[1], &r.status)) return std::nullopt;
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == std::string::npos) return std::nullopt;
      r.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
          std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    }
    size_t length = 0;
    if (!head_request && absl::SimpleAtoi(r.headers["content-length"], &length)) {
      while (buffer_.size() < length) {
        if (!Fill()) return std::nullopt;
      }
      r.body = buffer_.substr(0, length);
      buffer_.erase(0, length);
    }
    return r;
  }

  // True when the server closes the connection within `limit` (any bytes
  // it sends first are dropped).
  bool ClosedWithin(milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 1))) <= 0) continue;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
    }
    return false;
  }

 private:
  bool Fill() {
    char buf[65536];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    buffer_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

std::string Get(const std::string& target, const std::string& extra = "") {
  return absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: test\r\n", extra, "\r\n");
}

// A server whose routes answer what they were asked: /echo the method, path,
// parameters and headers; /text a fixed body.
absl::StatusOr<std::unique_ptr<HttpServer>> EchoServer(const HttpServerOptions& options = {}) {
  std::vector<HttpRoute> routes;
  routes.push_back({"/echo", [](const HttpRequest& r) {
                      std::string text = absl::StrCat(r.method, " ", r.path, "\n");
                      for (const auto& [k, v] : r.params)
                        absl::StrAppend(&text, "p ", k, "=", v, "\n");
                      for (const auto& [k, v] : r.headers) {
                        absl::StrAppend(&text, "h ", k, ": ", v, "\n");
                      }
                      absl::StrAppend(&text, "auth ", r.authorization, "\n");
                      return HttpResponse{200, text};
                    }});
  routes.push_back({"/text", [](const HttpRequest&) {
                      return HttpResponse{200, "hello\n", "text/x-test"};
                    }});
  routes.push_back({"/a b", [](const HttpRequest&) { return HttpResponse{200, "space\n"}; }});
  return HttpServer::Start(kDefaultMetricsHost, 0, std::move(routes), {}, options);
}

// --- the API as before ---------------------------------------------------------

TEST(HttpServerTest, ServesThePathOnAnEphemeralPort) {
  std::atomic<int> renders{0};
  auto server = HttpServer::Start(kDefaultMetricsHost, 0, "/metrics", [&renders] {
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

TEST(HttpServerTest, PathIsMatchedLiterallyAndGetsALeadingSlash) {
  auto server = HttpServer::Start(kDefaultMetricsHost, 0, "a.b", [] { return "x 1\n"; });
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

TEST(HttpServerTest, ReportsAPortInUse) {
  auto first = HttpServer::Start(kDefaultMetricsHost, 0, "/metrics", [] { return ""; });
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  auto second = HttpServer::Start(kDefaultMetricsHost, port, "/metrics", [] { return ""; });
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

TEST(HttpServerTest, RejectsBadArguments) {
  auto render = [] { return std::string(); };
  EXPECT_EQ(HttpServer::Start("", 0, "/m", render).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpServer::Start(kDefaultMetricsHost, -1, "/m", render).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpServer::Start(kDefaultMetricsHost, 65536, "/m", render).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpServer::Start(kDefaultMetricsHost, 0, "", render).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpServer::Start(kDefaultMetricsHost, 0, "/m", nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  HttpServerOptions no_threads;
  no_threads.handler_threads = 0;
  auto bad = HttpServer::Start(kDefaultMetricsHost, 0,
                               {{"/m", [](const HttpRequest&) { return HttpResponse{}; }}}, {},
                               no_threads);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("handler_threads"), std::string::npos) << bad.status();
}

TEST(HttpServerTest, StopClosesThePortAndIsIdempotent) {
  auto server = HttpServer::Start(kDefaultMetricsHost, 0, "/metrics", [] { return "x 1\n"; });
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  RawClient open_connection(port);  // closed by Stop
  ASSERT_TRUE(open_connection.connected());
  (*server)->Stop();
  (*server)->Stop();
  EXPECT_TRUE(open_connection.ClosedWithin(milliseconds(1000)));
  httplib::Result res = LoopbackClient(port).Get("/metrics");
  EXPECT_FALSE(res);
  // The port can be bound again right away.
  auto again = HttpServer::Start(kDefaultMetricsHost, port, "/metrics", [] { return "x 2\n"; });
  ASSERT_TRUE(again.ok()) << again.status();
  httplib::Result res2 = LoopbackClient(port).Get("/metrics");
  ASSERT_TRUE(res2);
  EXPECT_EQ(res2->body, "x 2\n");
}

TEST(HttpServerTest, StartThenImmediateDestroyDoesNotHang) {
  for (int i = 0; i < 20; ++i) {
    auto server = HttpServer::Start(kDefaultMetricsHost, 0, "/metrics", [] { return ""; });
    ASSERT_TRUE(server.ok()) << server.status();
  }
}

TEST(HttpServerTest, ServesIpv6Loopback) {
  auto server = HttpServer::Start("::1", 0, "/metrics", [] { return "v6\n"; });
  if (!server.ok()) GTEST_SKIP() << "no IPv6 loopback: " << server.status();
  EXPECT_EQ((*server)->Url(), absl::StrCat("http://[::1]:", (*server)->port(), "/metrics"));
  httplib::Client client("::1", (*server)->port());
  client.set_connection_timeout(2);
  httplib::Result res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->body, "v6\n");
}

// --- requests ---------------------------------------------------------------------

TEST(HttpServerTest, DecodesThePathAndTheQueryAndPassesTheHeaders) {
  auto server = EchoServer();
  ASSERT_TRUE(server.ok()) << server.status();
  RawClient c((*server)->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(Get("/%65cho?a=1&b=x%20y+z&a=2&flag&k%26=v%3D&&",
                         "Accept: text/plain;q=0.5\r\nAuthorization: Bearer t0k\r\n"
                         "X-Twice: 1\r\nx-twice: 2\r\n")));
  std::optional<RawResponse> r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body,
            "GET /echo\n"
            "p a=2\np b=x y z\np flag=\np k&=v=\n"
            "h accept: text/plain;q=0.5\nh authorization: Bearer t0k\nh host: test\n"
            "h x-twice: 1, 2\n"
            "auth Bearer t0k\n");
  EXPECT_EQ(r->headers["content-type"], "text/plain; charset=utf-8");
  EXPECT_FALSE(r->headers["date"].empty());
  ASSERT_TRUE(c.Send(Get("/a%20b")));
  r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "space\n");
}

TEST(HttpServerTest, KeepAliveServesRequestsInTurnOnOneConnection) {
  auto server = EchoServer();
  ASSERT_TRUE(server.ok()) << server.status();
  RawClient c((*server)->port());
  ASSERT_TRUE(c.connected());
  // Two requests one after the other, then three sent at once (pipelined).
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(c.Send(Get("/text")));
    std::optional<RawResponse> r = c.Read();
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "hello\n");
    EXPECT_EQ(r->headers.count("connection"), 0u);  // HTTP/1.1: stays open
  }
  ASSERT_TRUE(c.Send(Get("/text") + Get("/nope") + Get("/echo?x=3")));
  std::optional<RawResponse> r1 = c.Read();
  std::optional<RawResponse> r2 = c.Read();
  std::optional<RawResponse> r3 = c.Read();
  ASSERT_TRUE(r1 && r2 && r3);
  EXPECT_EQ(r1->body, "hello\n");
  EXPECT_EQ(r2->status, 404);
  EXPECT_EQ(r3->status, 200);
  EXPECT_NE(r3->body.find("p x=3\n"), std::string::npos) << r3->body;
  // Connection: close is honoured.
  ASSERT_TRUE(c.Send(Get("/text", "Connection: close\r\n")));
  std::optional<RawResponse> last = c.Read();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->headers["connection"], "close");
  EXPECT_TRUE(c.ClosedWithin(milliseconds(2000)));
  EXPECT_EQ((*server)->stats().responses(), 6u);

  // HTTP/1.0 (no Host needed) closes after its response.
  RawClient old((*server)->port());
  ASSERT_TRUE(old.Send("GET /text HTTP/1.0\r\n\r\n"));
  std::optional<RawResponse> r = old.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "hello\n");
  EXPECT_EQ(r->headers["connection"], "close");
  EXPECT_TRUE(old.ClosedWithin(milliseconds(2000)));
}

TEST(HttpServerTest, HeadAnswersTheLengthWithoutTheBody) {
  auto server = EchoServer();
  ASSERT_TRUE(server.ok()) << server.status();
  RawClient c((*server)->port());
  ASSERT_TRUE(c.Send("HEAD /text HTTP/1.1\r\nHost: t\r\n\r\n"));
  std::optional<RawResponse> head = c.Read(/*head_request=*/true);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->headers["content-length"], "6");
  EXPECT_EQ(head->headers["content-type"], "text/x-test");
  // No body followed: the next response on the connection is the GET's.
  ASSERT_TRUE(c.Send(Get("/text")));
  std::optional<RawResponse> get = c.Read();
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 200);
  EXPECT_EQ(get->body, "hello\n");
}

TEST(HttpServerTest, RefusesWhatIsNotAGetOrHeadWithoutABody) {
  auto server = EchoServer();
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string big(20000, 'x');
  const struct {
    std::string request;
    int status;
  } cases[] = {
      {"POST /text HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", 405},
      {"DELETE /text HTTP/1.1\r\nHost: t\r\n\r\n", 405},
      {"GET /text HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello", 413},
      {"GET /text HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 413},
      {"GARBAGE\r\n\r\n", 400},
      {"GET  /text HTTP/1.1\r\nHost: t\r\n\r\n", 400},
      {"GET text HTTP/1.1\r\nHost: t\r\n\r\n", 400},
      {"GET /text HTTP/1.1\r\n\r\n", 400},  // no Host
      {"GET /text HTTP/1.1\r\nHost: t\r\nno colon\r\n\r\n", 400},
      {"GET /text HTTP/1.1\r\nHost: t\r\n folded\r\n\r\n", 400},
      {"GET /te%zzxt HTTP/1.1\r\nHost: t\r\n\r\n", 400},
      {"GET /text HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n", 400},
      {"GET /text HTTP/2.0\r\nHost: t\r\n\r\n", 505},
      {Get("/text", "X-Big: " + big + "\r\n"), 431},
      {"GET /" + big, 431},  // no end of head in sight
  };
  uint64_t refused = 0;
  for (const auto& [request, status] : cases) {
    RawClient c((*server)->port());
    ASSERT_TRUE(c.Send(request));
    std::optional<RawResponse> r = c.Read();
    ASSERT_TRUE(r) << request.substr(0, 60);
    EXPECT_EQ(r->status, status) << request.substr(0, 60) << "\n" << r->body;
    EXPECT_EQ(r->headers["connection"], "close") << request.substr(0, 60);
    if (status == 405) {
      EXPECT_EQ(r->headers["allow"], "GET, HEAD");
    }
    EXPECT_TRUE(c.ClosedWithin(milliseconds(2000))) << request.substr(0, 60);
    ++refused;
  }
  EXPECT_EQ((*server)->stats().refused(HttpServerStats::Refusal::kBadRequest), refused);
}

TEST(HttpServerTest, SendsASharedBodyWholeAndReleasesIt) {
  auto body = std::make_shared<std::string>(3 << 20, '\0');
  for (size_t i = 0; i < body->size(); ++i) (*body)[i] = static_cast<char>('a' + i % 26);
  std::vector<HttpRoute> routes;
  routes.push_back({"/big", [body](const HttpRequest&) {
                      HttpResponse r;
                      r.content_type = kExpositionContentType;
                      r.shared_body = body;
                      r.body = "ignored";
                      return r;
                    }});
  auto server = HttpServer::Start(kDefaultMetricsHost, 0, std::move(routes));
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client = LoopbackClient((*server)->port());
  for (int i = 0; i < 2; ++i) {
    httplib::Result res = client.Get("/big");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    EXPECT_TRUE(res->body == *body) << res->body.size();
  }
  // The route's lambda and this test hold it; the server no longer does.
  EXPECT_TRUE(WaitFor([&] { return body.use_count() == 2; })) << body.use_count();
}

// --- bounds (issue 24) ----------------------------------------------------------

TEST(HttpServerTest, ASlowReaderHoldsNoHandlerThreadAndIsCutAtTheWriteDeadline) {
  auto body = std::make_shared<const std::string>(32 << 20, 'x');
  std::vector<HttpRoute> routes;
  routes.push_back({"/big", [body](const HttpRequest&) {
                      HttpResponse r;
                      r.shared_body = body;
                      return r;
                    }});
  routes.push_back({"/small", [](const HttpRequest&) { return HttpResponse{200, "ok\n"}; }});
  HttpServerOptions options;
  options.handler_threads = 1;
  options.write_timeout_ms = 1500;
  auto server = HttpServer::Start(kDefaultMetricsHost, 0, std::move(routes), {}, options);
  ASSERT_TRUE(server.ok()) << server.status();
  RawClient slow((*server)->port(), /*receive_buffer=*/4096);
  ASSERT_TRUE(slow.Send(Get("/big")));  // and never reads
  ASSERT_TRUE(WaitFor([&] { return (*server)->stats().responses() == 1; }));
  httplib::Result res = LoopbackClient((*server)->port()).Get("/small");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->body, "ok\n");
  // The only handler thread was free: served while the slow response was
  // still pending (not once the write deadline had ended it).
  EXPECT_EQ((*server)->stats().refused(HttpServerStats::Refusal::kWriteTimeout), 0u);
  // Still not reading: reset at the write deadline, and the body released.
  EXPECT_TRUE(WaitFor(
      [&] { return (*server)->stats().refused(HttpServerStats::Refusal::kWriteTimeout) == 1; },
      milliseconds(5000)));
  EXPECT_TRUE(WaitFor([&] { return body.use_count() == 2; }));
  EXPECT_TRUE(slow.ClosedWithin(milliseconds(3000)));
}

TEST(HttpServerTest, AFullQueueIsAnswered503ByTheEventThread) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> entered{0};
  std::vector<HttpRoute> routes;
  routes.push_back({"/block", [&entered, released](const HttpRequest&) {
                      entered.fetch_add(1);
                      released.wait_for(std::chrono::seconds(10));
                      return HttpResponse{200, "done\n"};
                    }});
  HttpServerOptions options;
  options.handler_threads = 1;
  options.max_queued_requests = 1;
  auto server = HttpServer::Start(kDefaultMetricsHost, 0, std::move(routes), {}, options);
  ASSERT_TRUE(server.ok()) << server.status();
  const HttpServerStats& stats = (*server)->stats();
  RawClient running((*server)->port());
  ASSERT_TRUE(running.Send(Get("/block")));
  ASSERT_TRUE(WaitFor([&] { return entered.load() == 1; }));  // the only thread is taken
  RawClient waiting((*server)->port());
  ASSERT_TRUE(waiting.Send(Get("/block")));
  ASSERT_TRUE(WaitFor([&] { return stats.queued() == 1; }));  // the queue is full
  RawClient refused((*server)->port());
  ASSERT_TRUE(refused.Send(Get("/block")));
  std::optional<RawResponse> busy = refused.Read();
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 503);
  EXPECT_EQ(busy->headers["retry-after"], "1");
  EXPECT_EQ(stats.refused(HttpServerStats::Refusal::kQueue), 1u);
  release.set_value();
  for (RawClient* c : {&running, &waiting}) {
    std::optional<RawResponse> r = c->Read();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "done\n");
  }
  EXPECT_EQ(entered.load(), 2);
  EXPECT_EQ(stats.queued(), 0);
}

TEST(HttpServerTest, IdleAndDribblingClientsAreCutWhileOthersAreServed) {
  HttpServerOptions options;
  options.header_timeout_ms = 2000;
  options.handler_threads = 1;
  auto server = EchoServer(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  constexpr int kEach = 50;
  const auto start = Clock::now();
  std::vector<std::unique_ptr<RawClient>> idle, dribbling;
  for (int i = 0; i < kEach; ++i) {
    idle.push_back(std::make_unique<RawClient>(port));
    dribbling.push_back(std::make_unique<RawClient>(port));
    ASSERT_TRUE(idle.back()->connected() && dribbling.back()->connected());
  }
  // A byte every 100 ms from every dribbler, while fresh clients are served
  // with every attacker still connected (a server the attackers held would
  // answer only once they are cut).
  const std::string request = Get("/text");
  const HttpServerStats& stats = (*server)->stats();
  for (size_t byte = 0; byte < 5; ++byte) {
    for (auto& d : dribbling) d->Send(request.substr(byte, 1));
    httplib::Result res = LoopbackClient(port).Get("/text");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->body, "hello\n");
    EXPECT_EQ(stats.refused(HttpServerStats::Refusal::kHeaderTimeout), 0u);
    std::this_thread::sleep_for(milliseconds(100));
  }
  // Every attacker is closed at its header deadline (2 s after accept), the
  // dribblers (which started a request) after a 408.
  for (auto& c : idle) EXPECT_TRUE(c->ClosedWithin(milliseconds(5000)));
  for (auto& c : dribbling) EXPECT_TRUE(c->ClosedWithin(milliseconds(5000)));
  EXPECT_LT(Clock::now() - start, milliseconds(4500));  // not at an idle timeout (5 s)
  EXPECT_EQ(stats.refused(HttpServerStats::Refusal::kHeaderTimeout), 2u * kEach);
  EXPECT_TRUE(WaitFor([&] { return stats.connections_open() == 0; }));
}

TEST(HttpServerTest, TheConnectionCapAnswers503AndCountsIt) {
  HttpServerOptions options;
  options.max_connections = 3;
  auto server = EchoServer(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const HttpServerStats& stats = (*server)->stats();
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 3; ++i) held.push_back(std::make_unique<RawClient>((*server)->port()));
  ASSERT_TRUE(WaitFor([&] { return stats.connections_open() == 3; }));
  RawClient over((*server)->port());
  ASSERT_TRUE(over.connected());  // the kernel accepts; perld answers and closes
  over.Send(Get("/text"));
  std::optional<RawResponse> r = over.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_TRUE(over.ClosedWithin(milliseconds(2000)));
  EXPECT_EQ(stats.refused(HttpServerStats::Refusal::kConnections), 1u);
  // A held connection still works; once one closes, a new one is served.
  ASSERT_TRUE(held[0]->Send(Get("/text")));
  std::optional<RawResponse> ok = held[0]->Read();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  held[1]->Close();
  ASSERT_TRUE(WaitFor([&] { return stats.connections_open() == 2; }));
  RawClient fresh((*server)->port());
  ASSERT_TRUE(fresh.Send(Get("/text")));
  std::optional<RawResponse> served = fresh.Read();
  ASSERT_TRUE(served);
  EXPECT_EQ(served->status, 200);
}

// --- HTTPS ---------------------------------------------------------------------------

// A self-signed P-256 certificate for 127.0.0.1 and its key, as PEM files in
// a fresh directory.
struct TestCertificate {
  std::string dir, cert, key;

  TestCertificate() {
    std::string tmpl = ::testing::TempDir() + "/perld-https-XXXXXX";
    dir = mkdtemp(tmpl.data()) ? tmpl : "";
    cert = dir + "/cert.pem";
    key = dir + "/key.pem";
    EVP_PKEY* pkey = EVP_EC_gen("P-256");
    X509* x = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, pkey);
    X509_NAME* name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
    X509_set_issuer_name(x, name);
    X509_sign(x, pkey, EVP_sha256());
    FILE* f = fopen(cert.c_str(), "w");
    PEM_write_X509(f, x);
    fclose(f);
    f = fopen(key.c_str(), "w");
    PEM_write_PrivateKey(f, pkey, nullptr, nullptr, 0, nullptr, nullptr);
    fclose(f);
    X509_free(x);
    EVP_PKEY_free(pkey);
  }
  ~TestCertificate() {
    unlink(cert.c_str());
    unlink(key.c_str());
    rmdir(dir.c_str());
  }
};

TEST(HttpServerTest, HttpsServesWhileHandshakesStallAndRefusesPlainText) {
  TestCertificate pem;
  ASSERT_FALSE(pem.dir.empty());
  HttpTls tls;
  tls.cert_file = pem.cert;
  tls.key_file = pem.key;
  HttpServerOptions options;
  options.header_timeout_ms = 2000;
  options.handler_threads = 1;
  std::vector<HttpRoute> routes;
  routes.push_back({"/m", [](const HttpRequest&) { return HttpResponse{200, "secure\n"}; }});
  auto server = HttpServer::Start(kDefaultMetricsHost, 0, std::move(routes), tls, options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  EXPECT_EQ((*server)->Url(), absl::StrCat("https://127.0.0.1:", port, "/m"));

  // Connections that never start the handshake, and ones that dribble the
  // first bytes of a ClientHello.
  const auto start = Clock::now();
  std::vector<std::unique_ptr<RawClient>> stalled;
  for (int i = 0; i < 20; ++i) {
    stalled.push_back(std::make_unique<RawClient>(port));
    if (i % 2 == 1) stalled.back()->Send(std::string("\x16\x03\x01", 3));
  }
  httplib::SSLClient client("127.0.0.1", port);
  client.enable_server_certificate_verification(false);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  for (int i = 0; i < 2; ++i) {  // keep-alive over TLS
    httplib::Result res = client.Get("/m");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, "secure\n");
    // Served while every stalled handshake still holds its connection.
    EXPECT_EQ((*server)->stats().refused(HttpServerStats::Refusal::kHeaderTimeout), 0u);
  }
  for (auto& c : stalled) EXPECT_TRUE(c->ClosedWithin(milliseconds(5000)));
  EXPECT_LT(Clock::now() - start, milliseconds(4500));
  EXPECT_EQ((*server)->stats().refused(HttpServerStats::Refusal::kHeaderTimeout), 20u);

  // Plain HTTP on the HTTPS port: no answer, closed, counted as a failed handshake.
  RawClient plain(port);
  ASSERT_TRUE(plain.Send(Get("/m")));
  EXPECT_FALSE(plain.Read());
  EXPECT_EQ((*server)->stats().refused(HttpServerStats::Refusal::kTls), 1u);
}

TEST(HttpServerTest, HttpsNamesFilesThatDoNotLoad) {
  TestCertificate pem;
  HttpTls tls;
  tls.cert_file = pem.cert;
  tls.key_file = pem.dir + "/missing.key";
  auto server = HttpServer::Start(kDefaultMetricsHost, 0,
                                  {{"/m", [](const HttpRequest&) { return HttpResponse{}; }}}, tls);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("missing.key"), std::string::npos) << server.status();
}

}  // namespace
}  // namespace perld::http
