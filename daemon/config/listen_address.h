// ListenAddress: one listener address of the configuration (grpcListen,
// httpListen and their flags), HOST:PORT.
//
// HOST is a host name ("localhost"), an IPv4 address ("127.0.0.1", "0.0.0.0"
// for every IPv4 interface) or an IPv6 address in brackets ("[::1]", "[::]");
// PORT is decimal, 0..65535 (0: the kernel picks a free port). `unix:PATH` is
// reserved for a later release and refused with a message saying so.
//
// Pure functions; any thread.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace perld::config {

struct ListenAddress {
  std::string host;  // without brackets: "127.0.0.1", "::1", "localhost"
  int port = 0;
  bool ipv6 = false;  // `host` is an IPv6 literal

  // HOST:PORT with brackets around an IPv6 host ("[::1]:9717"), the form
  // gRPC's ServerBuilder takes.
  std::string ToString() const;
};

// The address in `text`, or InvalidArgument whose message quotes `text` and
// says what is wrong, e.g. "'::1:9717': an IPv6 host needs brackets, e.g.
// [::1]:9717". The message has no key or flag prefix: callers add theirs.
absl::StatusOr<ListenAddress> ParseListenAddress(const std::string& text);

}  // namespace perld::config
