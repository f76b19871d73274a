// The request-head parser on its own: where a head ends (CRLF or LF, split
// anywhere), percent-decoding, and the statuses of refused heads.
#include "daemon/http/http_request_parser.h"

#include <gtest/gtest.h>

#include <string>

namespace perld::http {
namespace {

constexpr size_t kNpos = absl::string_view::npos;

TEST(HttpRequestParserTest, FindsTheEndOfTheHeadWhereverTheBytesSplit) {
  const std::string head = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_EQ(FindHeadEnd(head + "GET /next"), head.size());
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.0\n\n"), 16u);
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.0\nA: b\r\n\n"), 22u);
  // Fed one byte at a time, resuming from what was scanned, the end is
  // found exactly when the last byte arrives.
  size_t scanned = 0;
  for (size_t n = 1; n <= head.size(); ++n) {
    const size_t end = FindHeadEnd(absl::string_view(head).substr(0, n), scanned);
    EXPECT_EQ(end, n == head.size() ? head.size() : kNpos) << n;
    scanned = n;
  }
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\nHost: x\r\n\r"), kNpos);
  EXPECT_EQ(FindHeadEnd(""), kNpos);
}

TEST(HttpRequestParserTest, PercentDecodes) {
  std::string out;
  EXPECT_TRUE(PercentDecode("a%20b%2Fc+d", false, &out));
  EXPECT_EQ(out, "a b/c+d");
  EXPECT_TRUE(PercentDecode("a%20b+c%2B", true, &out));
  EXPECT_EQ(out, "a b c+");
  EXPECT_TRUE(PercentDecode("%e2%82%AC", false, &out));
  EXPECT_EQ(out, "\xe2\x82\xac");
  for (const char* bad : {"%", "%2", "%zz", "a%g1", "%00"}) {
    EXPECT_FALSE(PercentDecode(bad, true, &out)) << bad;
  }
}

TEST(HttpRequestParserTest, ParsesAGet) {
  ParsedHead p = ParseRequestHead(
      "GET /api/run?id=7&windows=10&id=8 HTTP/1.1\r\nHost: h\r\nACCEPT:  text/plain \r\n"
      "Connection: Keep-Alive, Close\r\n\r\n");
  ASSERT_EQ(p.status, 0) << p.message;
  EXPECT_EQ(p.request.method, "GET");
  EXPECT_EQ(p.request.path, "/api/run");
  EXPECT_EQ(p.request.params.at("id"), "8");
  EXPECT_EQ(p.request.params.at("windows"), "10");
  EXPECT_EQ(p.request.Header("accept"), "text/plain");
  EXPECT_EQ(p.request.Header("absent"), "");
  EXPECT_FALSE(p.keep_alive);  // "close" among the options

  p = ParseRequestHead("HEAD /x#frag HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(p.status, 0) << p.message;
  EXPECT_EQ(p.request.method, "HEAD");
  EXPECT_EQ(p.request.path, "/x");
  EXPECT_TRUE(p.keep_alive);
}

TEST(HttpRequestParserTest, RefusesWithTheRightStatus) {
  const struct {
    const char* head;
    int status;
  } cases[] = {
      {"\r\n\r\n", 400},
      {"GET / HTTP/1.1 extra\r\nHost: h\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"GET http://h/ HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"GET /\x80 HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"GET / HTTP/1.x\r\nHost: h\r\n\r\n", 400},
      {"GET / HTTP/3.0\r\nHost: h\r\n\r\n", 505},
      {"GET / HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: h\x01\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\n", 413},
      {"PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\n", 405},
      {"GET /?a=%zz HTTP/1.1\r\nHost: h\r\n\r\n", 400},
  };
  for (const auto& [head, status] : cases) {
    ParsedHead p = ParseRequestHead(head);
    EXPECT_EQ(p.status, status) << head << " -> " << p.message;
    EXPECT_FALSE(p.message.empty()) << head;
  }
  std::string many = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (int i = 0; i < kMaxHeaderFields; ++i) many += "X: y\r\n";
  EXPECT_EQ(ParseRequestHead(many + "\r\n").status, 431);
}

}  // namespace
}  // namespace perld::http
