#include "daemon/common/host_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace perld::common {

absl::StatusOr<HostPort> SplitHostPort(absl::string_view text) {
  HostPort out;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError("missing ']' after the IPv6 host");
    }
    out.host = std::string(text.substr(1, close - 1));
    out.bracketed = true;
    const absl::string_view rest = text.substr(close + 1);
    if (rest.empty()) return out;
    if (rest.front() != ':') {
      return absl::InvalidArgumentError("missing ':PORT' after the IPv6 host");
    }
    out.port = std::string(rest.substr(1));
    out.has_port = true;
    return out;
  }
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos || text.find(':') != colon) {
    out.host = std::string(text);  // no port, or a bare IPv6 address
    return out;
  }
  out.host = std::string(text.substr(0, colon));
  out.port = std::string(text.substr(colon + 1));
  out.has_port = true;
  return out;
}

std::string JoinHostPort(absl::string_view host, int port) {
  return host.find(':') != absl::string_view::npos ? absl::StrCat("[", host, "]:", port)
                                                   : absl::StrCat(host, ":", port);
}

bool IsLoopbackHost(absl::string_view host) {
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  const std::string text(host);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, text.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace perld::common
