#include "daemon/server/server_security.h"

#include <utility>

#include "daemon/common/secret_file.h"

namespace perld::server {

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(
    const config::TlsConfig& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = common::ReadPemFile(tls.cert_file, "tls.certFile");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = common::ReadSecretFile(tls.key_file, "tls.keyFile");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({std::move(*key), std::move(*cert)});
  if (!tls.client_ca_file.empty()) {
    absl::StatusOr<std::string> roots = common::ReadPemFile(tls.client_ca_file, "tls.clientCaFile");
    if (!roots.ok()) return roots.status();
    options.pem_root_certs = std::move(*roots);
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<http::HttpTls> HttpsFiles(const config::TlsConfig& tls) {
  http::HttpTls files;
  if (!tls.enabled()) return files;
  // The same checks as for gRPC; HttpServer then loads the files itself.
  if (absl::StatusOr<std::string> key = common::ReadSecretFile(tls.key_file, "tls.keyFile");
      !key.ok()) {
    return key.status();
  }
  files.cert_file = tls.cert_file;
  files.key_file = tls.key_file;
  files.client_ca_file = tls.client_ca_file;
  return files;
}

}  // namespace perld::server
