// RemoteWriteEndpoint: one remote-write receiver as configured
// (remoteWrite.url and its credentials), and the POST of one compressed
// WriteRequest to it through cpp-httplib (Debian's libcpp-httplib, built
// with OpenSSL: https URLs verify the receiver's certificate against
// tls.caFile or the system's roots, and send tls.certFile/keyFile when given).
//
// Credentials are read when the endpoint is made (at start and at each
// SIGHUP): bearerTokenFile (a token file, README "Security": no access for
// others, one word) or basicAuth.passwordFile (a secret file; its trailing
// newline is not part of the password). A missing or unsafe file is an error
// naming the key and the file, never its content. The connection is kept
// alive between requests.
//
// Headers: Content-Encoding: snappy, Content-Type: application/x-protobuf,
// X-Prometheus-Remote-Write-Version: 0.1.0, User-Agent: perld/<version>.
//
// Threads: Send from one thread at a time (the sender's); Abort from any
// thread (it cuts the request in progress: the stop's deadline).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/common/http_url.h"
#include "daemon/config/daemon_config.h"

namespace httplib {
class Client;
}  // namespace httplib

namespace perld::remote_write {

struct SendResult {
  int status = 0;               // the HTTP status; 0: no answer (see error)
  std::string error;            // no answer: why; else the first bytes of the body
  int64_t retry_after_ms = -1;  // a Retry-After header in ms, -1: none
};

class RemoteWriteEndpoint {
 public:
  // REQUIRES: config.enabled() and the config passed the loader's checks.
  static absl::StatusOr<std::unique_ptr<RemoteWriteEndpoint>> Create(
      const config::RemoteWriteConfig& config);
  ~RemoteWriteEndpoint();
  RemoteWriteEndpoint(const RemoteWriteEndpoint&) = delete;
  RemoteWriteEndpoint& operator=(const RemoteWriteEndpoint&) = delete;

  // POSTs `body` (a snappy-compressed WriteRequest); blocks at most about
  // remoteWrite.timeoutMs (connect, send, answer).
  SendResult Send(const std::string& body);
  void Abort();

  const common::HttpUrl& url() const { return url_; }

 private:
  RemoteWriteEndpoint(common::HttpUrl url, std::unique_ptr<httplib::Client> client);
  const common::HttpUrl url_;
  const std::unique_ptr<httplib::Client> client_;
};

}  // namespace perld::remote_write
