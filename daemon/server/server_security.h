// The daemon's transport security, from its configuration (README
// "Security"): the gRPC TCP listener's credentials and the HTTP listener's
// TLS files (config section tls). The channel to an upstream parent is
// tiers::OpenParentChannel.
//
// Every file is read and checked before anything listens: PEM files must be
// readable, key files must grant nothing to others (refused otherwise, with
// the path and mode, never the content).
//
// Threads: free functions, called once at start.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/config/daemon_config.h"
#include "daemon/http/http_server.h"

namespace perld::server {

// TLS (optionally mutual) when tls.certFile is set, else plaintext.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(
    const config::TlsConfig& tls);

// The HTTPS files for HttpServer (checked as above; disabled without tls.certFile).
absl::StatusOr<http::HttpTls> HttpsFiles(const config::TlsConfig& tls);

}  // namespace perld::server
