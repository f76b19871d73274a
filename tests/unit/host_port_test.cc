// HOST:PORT splitting and joining (daemon/common/host_port.h): the forms of
// the listeners, `perld bench -context` and a client's target.
#include "daemon/common/host_port.h"

#include <gtest/gtest.h>

#include <string>

namespace perld::common {
namespace {

TEST(HostPortTest, SplitsEveryForm) {
  struct Case {
    const char* text;
    const char* host;
    const char* port;
    bool has_port;
    bool bracketed;
  };
  for (const Case& c : {
           Case{"127.0.0.1:9717", "127.0.0.1", "9717", true, false},
           Case{"localhost:0", "localhost", "0", true, false},
           Case{"[::1]:9717", "::1", "9717", true, true},
           Case{"[::]:80", "::", "80", true, true},
           Case{"[::1]", "::1", "", false, true},
           Case{"host", "host", "", false, false},
           Case{"9717", "9717", "", false, false},
           Case{"::1", "::1", "", false, false},            // a bare IPv6 address
           Case{"::1:9717", "::1:9717", "", false, false},  // ... never split
           Case{":9717", "", "9717", true, false},
           Case{"host:", "host", "", true, false},
           Case{"", "", "", false, false},
       }) {
    absl::StatusOr<HostPort> split = SplitHostPort(c.text);
    ASSERT_TRUE(split.ok()) << c.text << ": " << split.status();
    EXPECT_EQ(split->host, c.host) << c.text;
    EXPECT_EQ(split->port, c.port) << c.text;
    EXPECT_EQ(split->has_port, c.has_port) << c.text;
    EXPECT_EQ(split->bracketed, c.bracketed) << c.text;
  }
}

TEST(HostPortTest, RefusesBrokenBrackets) {
  EXPECT_EQ(SplitHostPort("[::1:9717").status().message(), "missing ']' after the IPv6 host");
  EXPECT_EQ(SplitHostPort("[::1]9717").status().message(), "missing ':PORT' after the IPv6 host");
}

TEST(HostPortTest, JoinsWithBracketsAroundIpv6) {
  EXPECT_EQ(JoinHostPort("127.0.0.1", 9717), "127.0.0.1:9717");
  EXPECT_EQ(JoinHostPort("localhost", 0), "localhost:0");
  EXPECT_EQ(JoinHostPort("::1", 9717), "[::1]:9717");
  for (const char* text : {"127.0.0.1:9717", "[::1]:9717", "[fe80::1]:1"}) {
    absl::StatusOr<HostPort> split = SplitHostPort(text);
    ASSERT_TRUE(split.ok());
    EXPECT_EQ(JoinHostPort(split->host, std::stoi(split->port)), text);
  }
}

TEST(HostPortTest, KnowsLoopback) {
  for (const char* host : {"localhost", "LocalHost", "127.0.0.1", "127.1.2.3", "::1"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"", "0.0.0.0", "10.0.0.1", "::", "example.com", "127.foo", "[::1]"}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

}  // namespace
}  // namespace perld::common
