// HttpServer: perld's small event-driven HTTP/1.1 server (plain or TLS,
// OpenSSL): the daemon's /metrics, live page, JSON API and probes, and
// `perld bench -context`'s exposition. Exact-path routes (GET and HEAD);
// every other path answers 404, every other method 405.
//
// Built so that no client can take it down (issue 24):
// - One event thread (epoll) owns every socket: it accepts, reads request
//   heads, runs TLS handshakes (non-blocking SSL_accept) and writes
//   responses, all non-blocking. A client that sends slowly, reads slowly or
//   never finishes its TLS handshake costs a file descriptor and a few
//   bytes, never a thread.
// - Deadlines: a connection's TLS handshake and first request head must be
//   complete within header_timeout_ms of its accept (a later request's head
//   within header_timeout_ms of its first byte); an idle keep-alive
//   connection is closed after idle_timeout_ms; a response must be taken by
//   the client within write_timeout_ms.
// - At most max_connections connections: beyond it a new one is answered
//   503 and closed (TLS: closed) at once.
// - A complete request is queued for handler_threads threads that only run
//   the route's handler; when max_queued_requests already wait, the event
//   thread answers 503 itself.
// - Request heads are at most max_header_bytes (431 beyond), strictly parsed
//   (http_request_parser.h); request bodies are refused (413).
// Every refusal is counted (HttpServerStats).
//
// Secure by default: callers bind 127.0.0.1 (kDefaultMetricsHost) unless the
// user names another interface; the listening socket sets SO_REUSEADDR only
// (never SO_REUSEPORT), so a port that is already listening is reported as
// in use instead of being silently shared.
//
// Threads: Start spawns the event thread and the handler threads. Route
// handlers run on the handler threads, concurrently with each other and the
// caller, so they must be thread-safe (see LatestMetrics). Stop() and the
// destructor may be called from any one thread (not from a handler); Stop
// closes the listener and every connection at once (it waits only for
// handlers already running) and joins every server thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/http/http_message.h"
#include "daemon/http/http_server_stats.h"

namespace perld::http {

// HTTPS (OpenSSL): PEM files; the caller has checked that the key file
// grants nothing to others. client_ca_file: mutual TLS.
struct HttpTls {
  std::string cert_file;  // "" serves plain HTTP
  std::string key_file;
  std::string client_ca_file;

  bool enabled() const { return !cert_file.empty(); }
};

// Resource bounds (the daemon's come from the config section http:).
struct HttpServerOptions {
  int max_connections = 1024;     // [1, 1000000]
  int handler_threads = 4;        // [1, 256]
  int max_queued_requests = 256;  // [1, 1000000]
  int header_timeout_ms = 1000;   // [1, 60000]
  int idle_timeout_ms = 5000;     // keep-alive, [1, 3600000]
  int write_timeout_ms = 10000;   // one response, [1, 3600000]
  int max_header_bytes = 16384;   // request line + headers, [256, 1048576]
  // Where the counters go; null: the server's own (stats()).
  HttpServerStats* stats = nullptr;

  // Bounds for `perld bench -context`: one scraper or a few.
  static HttpServerOptions Small();
};

class HttpServer {
 public:
  // Binds host:port (port 0: an ephemeral port, see port()) and starts
  // serving `path` ("/" is prepended if missing) with `render`, answered
  // 200 with Content-Type kExpositionContentType. HttpServerOptions::Small().
  // InvalidArgument: empty host or path, port outside [0, 65535], no render.
  // Unavailable: the address cannot be bound; the message names host:port
  // and the reason (e.g. "Address already in use").
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      std::string host, int port, std::string path, std::function<std::string()> render);
  // Serves several exact paths; Url() names the first route. With `tls`
  // enabled it serves HTTPS; InvalidArgument when the certificate, key or
  // client CA cannot be loaded, or an option is out of range.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      std::string host, int port, std::vector<HttpRoute> routes, const HttpTls& tls = {},
      const HttpServerOptions& options = {});

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();  // Stop()

  // Closes the listener and every connection and joins the server threads.
  // Idempotent.
  void Stop();

  const std::string& host() const { return host_; }
  int port() const { return port_; }  // the bound port, also when started with 0
  const std::string& path() const { return path_; }
  // "http://HOST:PORT/PATH" or "https://..." (IPv6 hosts in brackets).
  std::string Url() const;
  const HttpServerStats& stats() const;

 private:
  class Loop;  // the event loop, the handler pool and the TLS context

  HttpServer(std::unique_ptr<Loop> loop, std::string host, int port, std::string path, bool https);

  std::unique_ptr<Loop> loop_;
  std::string host_;
  int port_;
  std::string path_;
  bool https_;
  bool stopped_ = false;  // owner thread only
};

}  // namespace perld::http
