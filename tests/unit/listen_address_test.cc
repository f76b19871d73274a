// ListenAddress: HOST:PORT with IPv4, names and bracketed IPv6; exact refusals.
#include "daemon/config/listen_address.h"

#include <gtest/gtest.h>

#include <string>

namespace perld::config {
namespace {

std::string ErrorOf(const std::string& text) {
  absl::StatusOr<ListenAddress> address = ParseListenAddress(text);
  EXPECT_EQ(address.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(address.status().message());
}

TEST(ListenAddressTest, AcceptsIpv4NamesAndBracketedIpv6) {
  struct Case {
    const char* text;
    const char* host;
    int port;
    bool ipv6;
  };
  for (const Case& c :
       {Case{"127.0.0.1:9717", "127.0.0.1", 9717, false}, Case{"0.0.0.0:0", "0.0.0.0", 0, false},
        Case{"localhost:65535", "localhost", 65535, false},
        Case{"perld-1.example.com:80", "perld-1.example.com", 80, false},
        Case{"[::1]:9717", "::1", 9717, true}, Case{"[::]:1", "::", 1, true},
        Case{"[fe80::1:2]:443", "fe80::1:2", 443, true}}) {
    absl::StatusOr<ListenAddress> address = ParseListenAddress(c.text);
    ASSERT_TRUE(address.ok()) << c.text << ": " << address.status();
    EXPECT_EQ(address->host, c.host);
    EXPECT_EQ(address->port, c.port);
    EXPECT_EQ(address->ipv6, c.ipv6);
    EXPECT_EQ(address->ToString(), c.text);
  }
}

TEST(ListenAddressTest, RefusesWithTheReason) {
  EXPECT_EQ(ErrorOf(""), "'': expected HOST:PORT, e.g. 127.0.0.1:9717 or [::1]:9717");
  EXPECT_EQ(ErrorOf("9717"), "'9717': expected HOST:PORT, e.g. 127.0.0.1:9717 or [::1]:9717");
  EXPECT_EQ(ErrorOf("::1:9717"), "'::1:9717': an IPv6 host needs brackets, e.g. [::1]:9717");
  EXPECT_EQ(ErrorOf(":9717"),
            "':9717': missing HOST before ':' (0.0.0.0 listens on every IPv4 interface)");
  EXPECT_EQ(ErrorOf("[::1]"), "'[::1]': missing ':PORT' after the IPv6 host");
  EXPECT_EQ(ErrorOf("[::1]9717"), "'[::1]9717': missing ':PORT' after the IPv6 host");
  EXPECT_EQ(ErrorOf("[::1:9717"), "'[::1:9717': missing ']' after the IPv6 host");
  EXPECT_EQ(ErrorOf("[1.2.3.4]:1"), "'[1.2.3.4]:1': '1.2.3.4' is not an IPv6 address");
  EXPECT_EQ(ErrorOf("127.0.0.1:65536"), "'127.0.0.1:65536': port 65536 is outside [0, 65535]");
  EXPECT_EQ(ErrorOf("127.0.0.1:"), "'127.0.0.1:': port '' is not a number in [0, 65535]");
  EXPECT_EQ(ErrorOf("127.0.0.1:http"),
            "'127.0.0.1:http': port 'http' is not a number in [0, 65535]");
  EXPECT_EQ(ErrorOf("127.0.0.1:-1"), "'127.0.0.1:-1': port '-1' is not a number in [0, 65535]");
  EXPECT_EQ(ErrorOf("256.0.0.1:80"),
            "'256.0.0.1:80': '256.0.0.1' is not a host name or IP address");
  EXPECT_EQ(ErrorOf("bad_host:80"), "'bad_host:80': 'bad_host' is not a host name or IP address");
  EXPECT_EQ(ErrorOf("unix:/run/perld.sock"),
            "'unix:/run/perld.sock': unix sockets are reserved for a later release; use HOST:PORT");
}

}  // namespace
}  // namespace perld::config
