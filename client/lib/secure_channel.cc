#include "client/lib/secure_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/security/credentials.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace perld::client {
namespace {

// Reads at most `limit` bytes of `path`; `secret` also refuses a file that
// grants anything to others. Errors name the file and `what`, never content.
absl::StatusOr<std::string> ReadLimited(const std::string& path, const std::string& what,
                                        size_t limit, bool secret) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no file named"));
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(what, " ", path, ": cannot open"));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st = {};
  if (fstat(fd, &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(what, " ", path, ": cannot stat"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": not a regular file"));
  }
  if (secret && (st.st_mode & 0007) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s %s: mode %04o grants access to others; a secret file must not (chmod o-rwx %s)", what,
        path, st.st_mode & 07777, path));
  }
  if (static_cast<uint64_t>(st.st_size) > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": larger than ", limit, " bytes"));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat(what, " ", path, ": cannot read"));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

// Sends "authorization: Bearer <token>" with every call, as gRPC call
// credentials: gRPC attaches them only to a channel whose security level
// allows it (TLS; local credentials on a Unix socket or loopback).
class BearerToken final : public grpc::MetadataCredentialsPlugin {
 public:
  explicit BearerToken(const std::string& token) : header_(absl::StrCat("Bearer ", token)) {}
  bool IsBlocking() const override { return false; }
  const char* GetType() const override { return "perld.bearer"; }
  grpc::Status GetMetadata(grpc::string_ref /*service_url*/, grpc::string_ref /*method_name*/,
                           const grpc::AuthContext& /*channel_auth_context*/,
                           std::multimap<grpc::string, grpc::string>* metadata) override {
    metadata->insert({"authorization", header_});
    return grpc::Status::OK;
  }
  grpc::string DebugString() override { return "perld bearer token (not shown)"; }

 private:
  const std::string header_;
};

// "host" of a target HOST:PORT, [V6]:PORT, ipv4:/ipv6:/dns: forms.
std::string TargetHost(std::string target) {
  for (const char* scheme : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(target, scheme)) {
      target.erase(0, strlen(scheme));
      break;
    }
  }
  if (const size_t comma = target.find(','); comma != std::string::npos) return "";  // a list
  if (!target.empty() && target.front() == '[') {
    const size_t close = target.find(']');
    return close == std::string::npos ? "" : target.substr(1, close - 1);
  }
  const size_t colon = target.rfind(':');
  if (colon != std::string::npos && target.find(':') == colon) return target.substr(0, colon);
  return target;  // no port, or a bare IPv6 address
}

}  // namespace

std::optional<grpc_local_connect_type> LocalTarget(const std::string& target) {
  if (absl::StartsWith(target, "unix:") || absl::StartsWith(target, "unix-abstract:")) {
    return UDS;
  }
  const std::string host = absl::AsciiStrToLower(TargetHost(target));
  if (host == "localhost") return LOCAL_TCP;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127 ? std::optional(LOCAL_TCP) : std::nullopt;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6)) return LOCAL_TCP;
  return std::nullopt;
}

namespace {}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what) {
  return ReadLimited(path, what, kMaxSecretFileBytes, /*secret=*/true);
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what) {
  return ReadLimited(path, what, kMaxPemFileBytes, /*secret=*/false);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& what) {
  absl::StatusOr<std::string> text = ReadSecretFile(path, what);
  if (!text.ok()) return text.status();
  const std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": the file holds no token"));
  }
  for (const char c : token) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " ", path, ": a token is one word of printable ASCII (no spaces, no line breaks)"));
    }
  }
  return token;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(const std::string& target,
                                                           const ChannelSecurity& security) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::optional<grpc_local_connect_type> local;
  if (security.UsesTls()) {
    grpc::SslCredentialsOptions options;
    if (!security.ca_file.empty()) {
      absl::StatusOr<std::string> roots = ReadPemFile(security.ca_file, "CA file");
      if (!roots.ok()) return roots.status();
      options.pem_root_certs = std::move(*roots);
    }
    if (security.cert_file.empty() != security.key_file.empty()) {
      return absl::InvalidArgumentError(
          "a client certificate needs both a certificate file and a key file");
    }
    if (!security.cert_file.empty()) {
      absl::StatusOr<std::string> cert = ReadPemFile(security.cert_file, "certificate file");
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadSecretFile(security.key_file, "key file");
      if (!key.ok()) return key.status();
      options.pem_cert_chain = std::move(*cert);
      options.pem_private_key = std::move(*key);
    }
    credentials = grpc::SslCredentials(options);
  } else {
    if (!security.key_file.empty()) {
      return absl::InvalidArgumentError("a client key file is only used with TLS");
    }
    if (security.token_file.empty()) {
      credentials = grpc::InsecureChannelCredentials();
    } else {
      // A token travels only where nobody else can read it: this host.
      local = LocalTarget(target);
      if (!local) {
        return absl::FailedPreconditionError(absl::StrCat(
            "a token is never sent in clear text to another host, and ", target,
            " is neither loopback nor a unix: socket: use TLS (perlctl --tls or --ca-file; "
            "ClientOptions.tls; upstream.tls: true or upstream.caFile)"));
      }
      credentials = grpc::experimental::LocalCredentials(*local);
    }
  }
  if (security.token_file.empty()) return grpc::CreateChannel(target, credentials);
  absl::StatusOr<std::string> token = ReadTokenFile(security.token_file, "token file");
  if (!token.ok()) return token.status();
  // Local TCP has no transport security of its own (the kernel's loopback
  // keeps the token on this host); TLS and Unix sockets have gRPC's
  // highest level, which call credentials require by default.
  const grpc_security_level level =
      local == LOCAL_TCP ? GRPC_SECURITY_NONE : GRPC_PRIVACY_AND_INTEGRITY;
  std::shared_ptr<grpc::CallCredentials> call = grpc::experimental::MetadataCredentialsFromPlugin(
      std::make_unique<BearerToken>(*token), level);
  return grpc::CreateChannel(target, grpc::CompositeChannelCredentials(credentials, call));
}

}  // namespace perld::client
