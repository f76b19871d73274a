// MetricsServer: a small HTTP server (cpp-httplib) that serves a Prometheus
// text exposition at one path while a run lasts (`perld bench -context`), or
// a few exact routes (the daemon: /metrics, /healthz, /readyz).
//
// GET `path` answers 200 with `render()` and Content-Type
// "text/plain; version=0.0.4; charset=utf-8"; every other path answers 404.
// Secure by default: callers bind 127.0.0.1 (kDefaultMetricsHost) unless the
// user names another interface; the listening socket sets SO_REUSEADDR only
// (never httplib's default SO_REUSEPORT), so a port that is already listening
// is reported as in use instead of being silently shared.
//
// Threads: Start spawns one listener thread, which hands connections to a
// pool of kHandlerThreads; `render` runs on those pool threads, concurrently
// with the caller, so it must be thread-safe (see LatestMetrics). Stop() and
// the destructor may be called from any one thread (not from `render`); they
// close the listener and join every server thread. An idle keep-alive
// connection delays Stop by at most kKeepAliveSeconds.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace perld::http {

inline constexpr char kDefaultMetricsHost[] = "127.0.0.1";
inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

struct HttpResponse {
  HttpResponse() = default;
  HttpResponse(int status_code, std::string text, std::string type = "text/plain; charset=utf-8")
      : status(status_code), body(std::move(text)), content_type(std::move(type)) {}

  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
  // When set, the body is sent from this buffer without a copy (a large
  // body the handler renders into a reused buffer); `body` is ignored.
  std::shared_ptr<const std::string> shared_body;
};

struct HttpRequest {
  std::string path;
  std::map<std::string, std::string> params;  // query parameters (the last of repeated ones)
  std::string authorization;                  // the Authorization header ("" when absent)
};

// HTTPS (OpenSSL through cpp-httplib): PEM files; the caller has checked
// that the key file grants nothing to others. client_ca_file: mutual TLS.
struct HttpTls {
  std::string cert_file;  // "" serves plain HTTP
  std::string key_file;
  std::string client_ca_file;

  bool enabled() const { return !cert_file.empty(); }
};

// One exact path and its handler (run on a server pool thread).
struct HttpRoute {
  std::string path;  // starts with '/'
  std::function<HttpResponse(const HttpRequest&)> handler;
};

class MetricsServer {
 public:
  static constexpr int kHandlerThreads = 2;
  static constexpr int kKeepAliveSeconds = 1;

  // Binds host:port (port 0: an ephemeral port, see port()) and starts
  // serving `path` ("/" is prepended if missing) with `render`.
  // InvalidArgument: empty host or path, port outside [0, 65535], no render.
  // Unavailable: the address cannot be bound; the message names host:port
  // and the reason (e.g. "Address already in use").
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      std::string host, int port, std::string path, std::function<std::string()> render);
  // Serves several exact paths (GET); any other path answers 404. Url()
  // names the first route.
  // With `tls` enabled it serves HTTPS; InvalidArgument when the
  // certificate, key or client CA cannot be loaded.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      std::string host, int port, std::vector<HttpRoute> routes, const HttpTls& tls = {});

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  ~MetricsServer();  // Stop()

  // Stops listening and joins the server threads. Idempotent.
  void Stop();

  const std::string& host() const { return host_; }
  int port() const { return port_; }  // the bound port, also when started with 0
  const std::string& path() const { return path_; }
  // "http://HOST:PORT/PATH" or "https://..." (IPv6 hosts in brackets).
  std::string Url() const;

 private:
  MetricsServer(std::unique_ptr<httplib::Server> server, std::string host, int port,
                std::string path, bool https);

  std::unique_ptr<httplib::Server> server_;
  std::string host_;
  int port_;
  std::string path_;
  bool https_;
  std::thread listener_;
  std::atomic<bool> listener_done_{false};  // set by the listener thread as it returns
  bool stopped_ = false;                    // owner thread only
};

}  // namespace perld::http
