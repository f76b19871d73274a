// Secure channels for perld's clients (the client library, perlctl, a
// daemon forwarding upstream): TLS (server verification, optional client
// certificate for mutual TLS) and a bearer token attached to every call.
//
// A token never travels in clear text beyond this host: it rides as gRPC
// call credentials composed with the channel's credentials -- TLS, or, on a
// plaintext channel, gRPC's local credentials, which connect only to a Unix
// socket (UDS) or a loopback address (LOCAL_TCP). A token for a plaintext
// target on another host is refused by OpenChannel (FailedPrecondition
// naming the fix: TLS). A perld listening in plaintext accepts local
// credentials' connections as any other (nothing extra on the wire).
//
// The token, the key and the certificates are read by
// daemon/common/secret_file.h (a token or key file must grant nothing to
// others).
//
// Threads: free functions, no shared state; the returned channel is
// thread-safe as every grpc::Channel.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace perld::client {

struct ChannelSecurity {
  bool tls = false;        // TLS even without the files below (system roots)
  std::string ca_file;     // PEM roots that sign the server's certificate; "" system roots
  std::string cert_file;   // PEM client certificate (mutual TLS), with key_file
  std::string key_file;    // PEM private key of cert_file (a secret file)
  std::string token_file;  // bearer token sent as "authorization: Bearer <token>"

  bool UsesTls() const { return tls || !ca_file.empty() || !cert_file.empty(); }
};

// A channel to `target` (HOST:PORT or unix:PATH) with `security`; the
// token, when given, rides on every call made through the channel.
// FailedPrecondition: a token without TLS for a target LocalTarget does not
// know as local.
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(const std::string& target,
                                                           const ChannelSecurity& security);

// How gRPC's local credentials reach `target`: UDS for unix:PATH (and
// unix-abstract:), LOCAL_TCP for localhost, 127.0.0.0/8 and ::1 (also in
// the ipv4:/ipv6:/dns: forms); nullopt for anything else.
std::optional<grpc_local_connect_type> LocalTarget(const std::string& target);

}  // namespace perld::client
