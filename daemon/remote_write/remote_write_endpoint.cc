#include "daemon/remote_write/remote_write_endpoint.h"

#include <httplib.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/secret_file.h"
#include "daemon/remote_write/retry_policy.h"
#include "perld/version.h"

namespace perld::remote_write {
namespace {

// Keyed messages: "remoteWrite.bearerTokenFile: <the file's problem>".
absl::Status Keyed(const char* key, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(key, ": ", status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteWriteEndpoint>> RemoteWriteEndpoint::Create(
    const config::RemoteWriteConfig& config) {
  absl::StatusOr<common::HttpUrl> url = common::ParseHttpUrl(config.url);
  if (!url.ok()) return Keyed("remoteWrite.url", url.status());
  std::string token;
  if (!config.bearer_token_file.empty()) {
    absl::StatusOr<std::string> read =
        common::ReadTokenFile(config.bearer_token_file, "bearer token file");
    if (!read.ok()) return Keyed("remoteWrite.bearerTokenFile", read.status());
    token = *std::move(read);
  }
  std::string password;
  if (!config.basic_auth_password_file.empty()) {
    absl::StatusOr<std::string> read =
        common::ReadSecretFile(config.basic_auth_password_file, "password file");
    if (!read.ok()) return Keyed("remoteWrite.basicAuth.passwordFile", read.status());
    password = *std::move(read);
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
      password.pop_back();
    }
    if (password.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("remoteWrite.basicAuth.passwordFile: ", config.basic_auth_password_file,
                       ": the file holds no password"));
    }
  }
  if (!config.tls_ca_file.empty()) {
    if (absl::StatusOr<std::string> pem = common::ReadPemFile(config.tls_ca_file, "CA file");
        !pem.ok()) {
      return Keyed("remoteWrite.tls.caFile", pem.status());
    }
  }
  if (!config.tls_cert_file.empty()) {
    if (absl::StatusOr<std::string> pem =
            common::ReadPemFile(config.tls_cert_file, "certificate file");
        !pem.ok()) {
      return Keyed("remoteWrite.tls.certFile", pem.status());
    }
    if (absl::StatusOr<std::string> key = common::ReadSecretFile(config.tls_key_file, "key file");
        !key.ok()) {
      return Keyed("remoteWrite.tls.keyFile", key.status());
    }
  }
  auto client = config.tls_cert_file.empty()
                    ? std::make_unique<httplib::Client>(url->SchemeHostPort())
                    : std::make_unique<httplib::Client>(url->SchemeHostPort(), config.tls_cert_file,
                                                        config.tls_key_file);
  if (!client->is_valid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("remoteWrite: cannot set up a client for ", url->SchemeHostPort(),
                     url->https ? " (the TLS certificate or key does not load)" : ""));
  }
  const auto timeout = std::chrono::milliseconds(config.timeout_ms);
  client->set_connection_timeout(timeout);
  client->set_read_timeout(timeout);
  client->set_write_timeout(timeout);
  client->set_keep_alive(true);
  if (url->https) {
    client->enable_server_certificate_verification(true);
    if (!config.tls_ca_file.empty()) client->set_ca_cert_path(config.tls_ca_file);
  }
  if (!token.empty()) client->set_bearer_token_auth(token);
  if (!config.basic_auth_username.empty()) {
    client->set_basic_auth(config.basic_auth_username, password);
  }
  client->set_default_headers({{"Content-Encoding", "snappy"},
                               {"X-Prometheus-Remote-Write-Version", "0.1.0"},
                               {"User-Agent", "perld/" PERLD_VERSION}});
  return std::unique_ptr<RemoteWriteEndpoint>(
      new RemoteWriteEndpoint(*std::move(url), std::move(client)));
}

RemoteWriteEndpoint::RemoteWriteEndpoint(common::HttpUrl url,
                                         std::unique_ptr<httplib::Client> client)
    : url_(std::move(url)), client_(std::move(client)) {}

RemoteWriteEndpoint::~RemoteWriteEndpoint() = default;

SendResult RemoteWriteEndpoint::Send(const std::string& body) {
  SendResult result;
  httplib::Result res = client_->Post(url_.path, body, "application/x-protobuf");
  if (!res) {
    result.error = httplib::to_string(res.error());
    return result;
  }
  result.status = res->status;
  result.error = res->body.substr(0, 200);
  if (res->has_header("Retry-After")) {
    result.retry_after_ms = ParseRetryAfterMs(res->get_header_value("Retry-After"));
  }
  return result;
}

void RemoteWriteEndpoint::Abort() { client_->stop(); }

}  // namespace perld::remote_write
