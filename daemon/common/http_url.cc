#include "daemon/common/http_url.h"

#include <charconv>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/host_port.h"

namespace perld::common {

std::string HttpUrl::SchemeHostPort() const {
  return absl::StrCat(https ? "https://" : "http://", JoinHostPort(host, port));
}

absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view text) {
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) {
      return absl::InvalidArgumentError("a URL holds no spaces or control characters");
    }
  }
  HttpUrl url;
  const size_t scheme_end = text.find("://");
  if (scheme_end == absl::string_view::npos) {
    return absl::InvalidArgumentError("expected http://HOST[:PORT]/PATH or https://...");
  }
  const std::string scheme = absl::AsciiStrToLower(text.substr(0, scheme_end));
  if (scheme == "https") {
    url.https = true;
  } else if (scheme != "http") {
    return absl::InvalidArgumentError(
        absl::StrCat("the scheme must be http or https, not '", scheme, "'"));
  }
  absl::string_view rest = text.substr(scheme_end + 3);
  if (rest.find('#') != absl::string_view::npos) {
    return absl::InvalidArgumentError("a URL to send to has no fragment ('#')");
  }
  const size_t path_start = rest.find_first_of("/?");
  absl::string_view authority = rest.substr(0, path_start);
  url.path = path_start == absl::string_view::npos ? "/" : std::string(rest.substr(path_start));
  if (absl::StartsWith(url.path, "?")) url.path = absl::StrCat("/", url.path);
  if (authority.find('@') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        "no user information in the URL (credentials belong in files: bearerTokenFile, "
        "basicAuth.passwordFile)");
  }
  absl::StatusOr<HostPort> split = SplitHostPort(authority);
  if (!split.ok()) return split.status();
  if (split->host.empty()) return absl::InvalidArgumentError("the URL has no host");
  url.host = split->host;
  if (!split->bracketed && url.host.find(':') != std::string::npos) {
    return absl::InvalidArgumentError("an IPv6 host is written in brackets: http://[::1]:9090/");
  }
  url.port = url.https ? 443 : 80;
  if (split->has_port) {
    int port = 0;
    const std::string& p = split->port;
    const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
    if (p.empty() || ec != std::errc() || end != p.data() + p.size() || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("the port must be 1..65535, not '", p.substr(0, 16), "'"));
    }
    url.port = port;
  }
  return url;
}

}  // namespace perld::common
