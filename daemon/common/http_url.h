// HttpUrl: an http:// or https:// URL split into what an HTTP client needs
// (scheme, host, port, path with query), for URLs perld sends to -- the
// Prometheus remote-write endpoint (remoteWrite.url). Parsed once, when the
// configuration is loaded, so a malformed URL is a configuration error that
// names the key.
//
// Accepted: SCHEME://HOST[:PORT][/PATH][?QUERY], SCHEME http or https (any
// case), HOST a name, an IPv4 address or a bracketed IPv6 address, PORT
// 1..65535 (default 80 / 443), no user information ("user:pass@": secrets
// belong in files), no fragment, no whitespace or control characters. An
// empty path is "/".
//
// Pure functions; any thread.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace perld::common {

struct HttpUrl {
  bool https = false;
  std::string host;  // brackets removed: "127.0.0.1", "::1", "prom.example"
  int port = 0;      // explicit or the scheme's default
  std::string path;  // "/api/v1/write", with "?query" when given; never empty
  // "http://HOST:PORT" (brackets around an IPv6 host): what httplib::Client takes.
  std::string SchemeHostPort() const;
};

// InvalidArgument with a reason that does not repeat the URL (callers name
// the key), e.g. "the scheme must be http or https".
absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view text);

}  // namespace perld::common
