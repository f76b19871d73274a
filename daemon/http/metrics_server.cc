#include "daemon/http/metrics_server.h"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace perld::http {
namespace {

// strerror_r (GNU form): the thread-safe text of an errno value.
std::string ErrnoText(int err) {
  char buf[128];
  return strerror_r(err, buf, sizeof(buf));
}

// SO_REUSEADDR lets a restarted run rebind a port in TIME_WAIT; unlike
// httplib's default SO_REUSEPORT it never lets two listeners share a port.
void ListenerSocketOptions(socket_t sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

std::string HostPort(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port)
                                             : absl::StrCat(host, ":", port);
}

// httplib reports a failed bind as a bare false; redo the bind on a scratch
// socket to name the reason (errno) for the user.
std::string BindFailureReason(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &result); rc != 0) {
    return absl::StrCat("cannot resolve host: ", gai_strerror(rc));
  }
  std::string reason = "bind failed";
  for (addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) {
      reason = ErrnoText(errno);
      continue;
    }
    ListenerSocketOptions(fd);
    const bool bound = bind(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    if (!bound) reason = ErrnoText(errno);
    close(fd);
    if (bound) break;
  }
  freeaddrinfo(result);
  return reason;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    std::string host, int port, std::string path, std::function<std::string()> render) {
  if (path.empty()) return absl::InvalidArgumentError("metrics server: empty path");
  if (path[0] != '/') path = "/" + path;
  if (!render) return absl::InvalidArgumentError("metrics server: no render function");
  HttpRoute route;
  route.path = path;
  route.handler = [render = std::move(render)](const HttpRequest&) {
    return HttpResponse{200, render(), kExpositionContentType};
  };
  return Start(std::move(host), port, {std::move(route)});
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(std::string host, int port,
                                                                    std::vector<HttpRoute> routes,
                                                                    const HttpTls& tls) {
  if (host.empty()) return absl::InvalidArgumentError("metrics server: empty host");
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics server: port ", port, " is outside [0, 65535]"));
  }
  if (routes.empty()) return absl::InvalidArgumentError("metrics server: no routes");
  for (const HttpRoute& r : routes) {
    if (r.path.empty() || r.path[0] != '/' || !r.handler) {
      return absl::InvalidArgumentError(absl::StrCat("metrics server: bad route '", r.path, "'"));
    }
  }
  std::string first_path = routes.front().path;

  std::unique_ptr<httplib::Server> server;
  if (tls.enabled()) {
    auto https = std::make_unique<httplib::SSLServer>(
        tls.cert_file.c_str(), tls.key_file.c_str(),
        tls.client_ca_file.empty() ? nullptr : tls.client_ca_file.c_str());
    if (!https->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "HTTPS: cannot load the certificate ", tls.cert_file, ", its key ", tls.key_file,
          tls.client_ca_file.empty() ? "" : absl::StrCat(" or the client CA ", tls.client_ca_file),
          " (PEM files; the key must match the certificate)"));
    }
    server = std::move(https);
  } else {
    server = std::make_unique<httplib::Server>();
  }
  server->new_task_queue = [] { return new httplib::ThreadPool(kHandlerThreads); };
  server->set_socket_options(ListenerSocketOptions);
  server->set_keep_alive_timeout(kKeepAliveSeconds);
  // One catch-all route with exact path comparisons: httplib's patterns are
  // regular expressions, and a metrics path is not one.
  server->Get(
      ".*", [routes = std::move(routes)](const httplib::Request& req, httplib::Response& res) {
        for (const HttpRoute& route : routes) {
          if (req.path != route.path) continue;
          HttpRequest request{req.path, {}, req.get_header_value("Authorization")};
          for (const auto& [key, value] : req.params) request.params[key] = value;
          HttpResponse r = route.handler(request);
          res.status = r.status;
          if (r.shared_body) {
            std::shared_ptr<const std::string> body = std::move(r.shared_body);
            const size_t size = body->size();
            res.set_content_provider(size, r.content_type,
                                     [body](size_t offset, size_t length, httplib::DataSink& sink) {
                                       return sink.write(body->data() + offset, length);
                                     });
          } else {
            res.set_content(r.body, r.content_type);
          }
          return;
        }
        res.status = 404;
        res.set_content("404 page not found\n", "text/plain; charset=utf-8");
      });

  int bound_port = -1;
  if (port == 0) {
    bound_port = server->bind_to_any_port(host);
  } else if (server->bind_to_port(host, port)) {
    bound_port = port;
  }
  if (bound_port <= 0) {
    return absl::UnavailableError(absl::StrCat("metrics server: cannot listen on ",
                                               HostPort(host, port), ": ",
                                               BindFailureReason(host, port)));
  }

  std::unique_ptr<MetricsServer> metrics(new MetricsServer(
      std::move(server), std::move(host), bound_port, std::move(first_path), tls.enabled()));
  MetricsServer* self = metrics.get();
  self->listener_ = std::thread([self] {
    self->server_->listen_after_bind();
    self->listener_done_.store(true, std::memory_order_release);
  });
  return metrics;
}

MetricsServer::MetricsServer(std::unique_ptr<httplib::Server> server, std::string host, int port,
                             std::string path, bool https)
    : server_(std::move(server)),
      host_(std::move(host)),
      port_(port),
      path_(std::move(path)),
      https_(https) {}

MetricsServer::~MetricsServer() { Stop(); }

void MetricsServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // httplib's stop() is a no-op until the listener has marked itself running,
  // and must be called once: wait for either state, then stop once.
  while (!server_->is_running() && !listener_done_.load(std::memory_order_acquire)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!listener_done_.load(std::memory_order_acquire)) server_->stop();
  if (listener_.joinable()) listener_.join();
}

std::string MetricsServer::Url() const {
  return absl::StrCat(https_ ? "https://" : "http://", HostPort(host_, port_), path_);
}

}  // namespace perld::http
