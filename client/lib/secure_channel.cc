#include "client/lib/secure_channel.h"

#include <grpcpp/security/credentials.h>

#include <cstring>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/host_port.h"
#include "daemon/common/secret_file.h"

namespace perld::client {
namespace {

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
  absl::StatusOr<common::HostPort> split = common::SplitHostPort(target);
  return split.ok() ? split->host : "";
}

}  // namespace

std::optional<grpc_local_connect_type> LocalTarget(const std::string& target) {
  if (absl::StartsWith(target, "unix:") || absl::StartsWith(target, "unix-abstract:")) {
    return UDS;
  }
  return common::IsLoopbackHost(TargetHost(target)) ? std::optional(LOCAL_TCP) : std::nullopt;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(const std::string& target,
                                                           const ChannelSecurity& security) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::optional<grpc_local_connect_type> local;
  if (security.UsesTls()) {
    grpc::SslCredentialsOptions options;
    if (!security.ca_file.empty()) {
      absl::StatusOr<std::string> roots = common::ReadPemFile(security.ca_file, "CA file");
      if (!roots.ok()) return roots.status();
      options.pem_root_certs = std::move(*roots);
    }
    if (security.cert_file.empty() != security.key_file.empty()) {
      return absl::InvalidArgumentError(
          "a client certificate needs both a certificate file and a key file");
    }
    if (!security.cert_file.empty()) {
      absl::StatusOr<std::string> cert =
          common::ReadPemFile(security.cert_file, "certificate file");
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = common::ReadSecretFile(security.key_file, "key file");
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
  absl::StatusOr<std::string> token = common::ReadTokenFile(security.token_file, "token file");
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
