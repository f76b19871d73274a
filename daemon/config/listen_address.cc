#include "daemon/config/listen_address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "daemon/common/host_port.h"

namespace perld::config {
namespace {

constexpr size_t kMaxHostName = 253;  // DNS limit

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("'", text, "': ", why));
}

bool IsIpv4(const std::string& host) {
  std::array<unsigned char, 4> buf{};
  return inet_pton(AF_INET, host.c_str(), buf.data()) == 1;
}

bool IsIpv6(const std::string& host) {
  std::array<unsigned char, 16> buf{};
  return inet_pton(AF_INET6, host.c_str(), buf.data()) == 1;
}

// A DNS name or an IPv4 address: letters, digits, '-' and '.', and an address
// when it is only digits and dots.
bool IsHostName(const std::string& host) {
  if (host.empty() || host.size() > kMaxHostName) return false;
  bool digits_and_dots = true;
  for (char c : host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') return false;
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '.') digits_and_dots = false;
  }
  return !digits_and_dots || IsIpv4(host);
}

}  // namespace

std::string ListenAddress::ToString() const { return common::JoinHostPort(host, port); }

absl::StatusOr<ListenAddress> ParseListenAddress(const std::string& given) {
  const absl::string_view text = given;
  constexpr absl::string_view kForm = "expected HOST:PORT, e.g. 127.0.0.1:9717 or [::1]:9717";
  if (text.empty()) return Bad(text, kForm);
  if (absl::StartsWith(text, "unix:")) {
    return Bad(text, "unix sockets are reserved for a later release; use HOST:PORT");
  }
  absl::StatusOr<common::HostPort> split = common::SplitHostPort(text);
  if (!split.ok()) return Bad(text, split.status().message());
  ListenAddress address;
  address.host = split->host;
  if (split->bracketed) {
    address.ipv6 = true;
    if (!IsIpv6(address.host)) {
      return Bad(text, absl::StrCat("'", address.host, "' is not an IPv6 address"));
    }
    if (!split->has_port) return Bad(text, "missing ':PORT' after the IPv6 host");
  } else {
    if (address.host.find(':') != std::string::npos) {
      return Bad(text, "an IPv6 host needs brackets, e.g. [::1]:9717");
    }
    if (!split->has_port) return Bad(text, kForm);
    if (address.host.empty()) {
      return Bad(text, "missing HOST before ':' (0.0.0.0 listens on every IPv4 interface)");
    }
    if (!IsHostName(address.host)) {
      return Bad(text, absl::StrCat("'", address.host, "' is not a host name or IP address"));
    }
  }
  const absl::string_view port_text = split->port;
  if (port_text.empty() || port_text.size() > 5 ||
      !std::all_of(port_text.begin(), port_text.end(),
                   [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); })) {
    return Bad(text, absl::StrCat("port '", port_text, "' is not a number in [0, 65535]"));
  }
  int port = 0;
  for (char c : port_text) port = port * 10 + (c - '0');
  if (port > 65535) return Bad(text, absl::StrCat("port ", port, " is outside [0, 65535]"));
  address.port = port;
  return address;
}

}  // namespace perld::config
