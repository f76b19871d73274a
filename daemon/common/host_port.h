// HOST:PORT text: the one splitter and joiner of addresses in perld --
// listeners (config::ParseListenAddress validates on top of it), the daemon's
// and `perld bench`'s printed addresses, the host of a client's target.
//
// A host that holds a ':' (an IPv6 address) is written in brackets when a
// port follows: "[::1]:9717". Splitting takes brackets off.
//
// Pure functions; any thread.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace perld::common {

struct HostPort {
  std::string host;        // brackets removed: "127.0.0.1", "::1", "localhost", ""
  std::string port;        // the text after the port's ':', unchecked ("" too)
  bool has_port = false;   // a ':' announced a port (perhaps an empty one: "host:")
  bool bracketed = false;  // the host was written in brackets ("[::1]:9717", "[::1]")
};

// Splits `text`, one of
//   HOST:PORT      the last ':' separates the port (exactly one ':' in text)
//   [HOST]:PORT    the host in brackets, a port after "]:"
//   [HOST]         a bracketed host, no port
//   HOST           no ':' at all: a host, no port
//   a bare IPv6 address (two or more ':', no brackets): all host, no port.
// InvalidArgument, with a message that does not quote `text` (callers add
// their own prefix): a '[' without its ']' ("missing ']' after the IPv6
// host"), or anything but ":PORT" after ']' ("missing ':PORT' after the IPv6
// host").
absl::StatusOr<HostPort> SplitHostPort(absl::string_view text);

// "HOST:PORT", in brackets when `host` holds a ':' ("[::1]:9717").
std::string JoinHostPort(absl::string_view host, int port);

// True for "localhost" (any case), an IPv4 address in 127.0.0.0/8 and the
// IPv6 loopback ::1 (no brackets).
bool IsLoopbackHost(absl::string_view host);

}  // namespace perld::common
