#include "daemon/http/http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <deque>
#include <exception>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "daemon/common/errno_text.h"
#include "daemon/common/host_port.h"
#include "daemon/common/log.h"
#include "daemon/common/mutex.h"
#include "daemon/core/clock.h"
#include "daemon/core/thread_name.h"
#include "daemon/http/http_request_parser.h"

namespace perld::http {
namespace {

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeId = 1;
constexpr uint64_t kFirstConnectionId = 2;
constexpr size_t kReadChunk = 16384;
constexpr size_t kTlsWriteChunk = size_t{1} << 20;
constexpr int kMaxAcceptsPerWake = 64;
constexpr int kMaxEvents = 256;
constexpr int64_t kAcceptPauseNs = 100'000'000;  // after EMFILE and the like
constexpr int64_t kNsPerMs = 1'000'000;

using common::ErrnoText;

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 300 ? "OK" : status < 500 ? "Client Error" : "Server Error";
  }
}

// RFC 9110 IMF-fixdate, independent of the locale.
std::string HttpDate() {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const time_t now = time(nullptr);
  tm t{};
  gmtime_r(&now, &t);
  char buf[64];
  snprintf(buf, sizeof(buf), "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[t.tm_wday % 7], t.tm_mday,
           kMonths[t.tm_mon % 12], t.tm_year + 1900, t.tm_hour, t.tm_min, t.tm_sec);
  return buf;
}

// A complete response with a small text body, sent best-effort by the event
// thread on a connection it is about to close (503 at the connection cap,
// 408 at the header deadline).
std::string CannedResponse(int status, absl::string_view text) {
  return absl::StrCat("HTTP/1.1 ", status, " ", ReasonPhrase(status), "\r\nDate: ", HttpDate(),
                      "\r\nContent-Type: ", kTextContentType, "\r\nContent-Length: ", text.size(),
                      status == 503 ? "\r\nRetry-After: 1" : "", "\r\nConnection: close\r\n\r\n",
                      text);
}

// The OpenSSL error queue as text (and cleared).
std::string OpenSslErrors() {
  std::string text;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    absl::StrAppend(&text, text.empty() ? "" : "; ", buf);
  }
  return text;
}

struct SslCtxFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;
struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
using SslPtr = std::unique_ptr<SSL, SslFree>;

absl::StatusOr<SslCtxPtr> MakeTlsContext(const HttpTls& tls) {
  ERR_clear_error();
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  const auto fail = [&tls](const std::string& detail) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HTTPS: cannot load the certificate ", tls.cert_file, ", its key ", tls.key_file,
        tls.client_ca_file.empty() ? "" : absl::StrCat(" or the client CA ", tls.client_ca_file),
        " (PEM files; the key must match the certificate)",
        detail.empty() ? "" : absl::StrCat(": ", detail)));
  };
  if (ctx == nullptr) return fail(OpenSslErrors());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Partial writes of large bodies, retried from a buffer that may differ in
  // address (the head and the body are separate buffers); idle connections
  // keep no record buffers.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                  SSL_MODE_RELEASE_BUFFERS);
  static constexpr unsigned char kSessionContext[] = "perld-http";
  SSL_CTX_set_session_id_context(ctx.get(), kSessionContext, sizeof(kSessionContext) - 1);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), tls.cert_file.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx.get(), tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx.get()) != 1) {
    return fail(OpenSslErrors());
  }
  if (!tls.client_ca_file.empty()) {
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(tls.client_ca_file.c_str());
    if (names == nullptr ||
        SSL_CTX_load_verify_locations(ctx.get(), tls.client_ca_file.c_str(), nullptr) != 1) {
      if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
      return fail(OpenSslErrors());
    }
    SSL_CTX_set_client_CA_list(ctx.get(), names);
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return ctx;
}

// A listening socket on host:port: SO_REUSEADDR (a restarted run rebinds a
// port in TIME_WAIT) and never SO_REUSEPORT (two listeners never share a
// port). The first address of `host` that binds wins.
absl::StatusOr<int> Listen(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  const auto unavailable = [&](const std::string& reason) {
    return absl::UnavailableError(absl::StrCat("http server: cannot listen on ",
                                               common::JoinHostPort(host, port), ": ", reason));
  };
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &result); rc != 0) {
    return unavailable(absl::StrCat("cannot resolve host: ", gai_strerror(rc)));
  }
  std::string reason = "no address";
  int fd = -1;
  for (addrinfo* ai = result; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      reason = ErrnoText(errno);
      continue;
    }
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      reason = ErrnoText(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(result);
  if (fd < 0) return unavailable(reason);
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return -1;
}

absl::Status CheckRange(const char* name, int value, int lo, int hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("http server: ", name, " ", value, " is outside [", lo, ", ", hi, "]"));
}

absl::Status CheckOptions(const HttpServerOptions& o) {
  for (absl::Status s : {CheckRange("max_connections", o.max_connections, 1, 1'000'000),
                         CheckRange("handler_threads", o.handler_threads, 1, 256),
                         CheckRange("max_queued_requests", o.max_queued_requests, 1, 1'000'000),
                         CheckRange("header_timeout_ms", o.header_timeout_ms, 1, 60'000),
                         CheckRange("idle_timeout_ms", o.idle_timeout_ms, 1, 3'600'000),
                         CheckRange("write_timeout_ms", o.write_timeout_ms, 1, 3'600'000),
                         CheckRange("max_header_bytes", o.max_header_bytes, 256, 1 << 20)}) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

HttpServerOptions HttpServerOptions::Small() {
  HttpServerOptions o;
  o.max_connections = 64;
  o.handler_threads = 1;
  o.max_queued_requests = 16;
  return o;
}

// The event loop (one thread, every socket), the handler pool and the TLS
// context. Connections, the timer set and the listener belong to the event
// thread; `jobs_` (to the handlers) and `done_` (back) are guarded by their
// mutexes; a handler wakes the event thread through the eventfd.
class HttpServer::Loop {
 public:
  Loop(std::vector<HttpRoute> routes, SslCtxPtr tls, const HttpServerOptions& options,
       int listen_fd)
      : routes_(std::move(routes)),
        tls_(std::move(tls)),
        options_(options),
        stats_(options.stats != nullptr ? options.stats : &own_stats_),
        listen_fd_(listen_fd) {}

  ~Loop() {
    Stop();
    if (listen_fd_ >= 0) close(listen_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
    if (epoll_fd_ >= 0) close(epoll_fd_);
  }

  absl::Status Start() {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) return absl::InternalError("http server: epoll: " + ErrnoText(errno));
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) return absl::InternalError("http server: eventfd: " + ErrnoText(errno));
    if (!Watch(listen_fd_, kListenerId, EPOLLIN) || !Watch(wake_fd_, kWakeId, EPOLLIN)) {
      return absl::InternalError("http server: epoll_ctl: " + ErrnoText(errno));
    }
    for (int i = 0; i < options_.handler_threads; ++i) {
      handlers_.emplace_back([this, i] { HandlerThread(i); });
    }
    event_thread_ = std::thread([this] { EventThread(); });
    return absl::OkStatus();
  }

  void Stop() {
    stop_.store(true, std::memory_order_release);
    Wake();
    if (event_thread_.joinable()) event_thread_.join();
    {
      MutexLock lock(jobs_mu_);
      handlers_stop_ = true;
      jobs_.clear();
    }
    jobs_cv_.NotifyAll();
    for (std::thread& t : handlers_) {
      if (t.joinable()) t.join();
    }
    handlers_.clear();
    stats_->SetQueued(0);
  }

  const HttpServerStats& stats() const { return *stats_; }

 private:
  enum class State {
    kHandshake,  // TLS handshake under the header deadline
    kReading,    // reading a request head (or idle between keep-alive requests)
    kQueued,     // the request waits for, or runs on, a handler thread
    kWriting,    // writing a response under the write deadline
    kLingering,  // response written, write side shut: draining until the peer closes
  };

  struct Connection {
    uint64_t id = 0;
    int fd = -1;
    SslPtr ssl;  // null: plain HTTP
    State state = State::kReading;
    std::string in;       // bytes read and not yet consumed
    size_t scanned = 0;   // FindHeadEnd progress in `in`
    bool served = false;  // a response was written (later heads time from their first byte)
    bool idle = false;    // between keep-alive requests, no byte of the next one yet
    std::string out;      // the response head (and a small body)
    std::shared_ptr<const std::string> body;  // a shared body, after `out`
    size_t sent = 0;                          // bytes of out + body written
    bool close_after = false;
    bool head_only = false;  // the queued request is a HEAD
    bool keep_alive = false;
    int64_t deadline = 0;  // 0: none
    uint32_t events = 0;   // the epoll interest registered
    uint32_t want = 0;     // the interest the last operation asked for
  };

  struct Job {
    uint64_t id;
    const HttpRoute* route;
    HttpRequest request;
  };

  struct Done {
    uint64_t id;
    HttpResponse response;
  };

  bool Watch(int fd, uint64_t id, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = id;
    return epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) == 0;
  }

  void Wake() {
    if (wake_fd_ < 0) return;
    const uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof(one));
    (void)ignored;
  }

  // --- handler threads ---------------------------------------------------

  void HandlerThread(int index) {
    NameThisThread(absl::StrCat("perld-http-", index));
    while (true) {
      Job job;
      {
        MutexLock lock(jobs_mu_);
        jobs_cv_.Wait(jobs_mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(jobs_mu_) {
          return handlers_stop_ || !jobs_.empty();
        });
        if (handlers_stop_) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
        stats_->SetQueued(static_cast<int64_t>(jobs_.size()));
      }
      Done done{job.id, {}};
      // A handler that throws (allocation failure, a library's exception)
      // answers 500 instead of ending the process.
      try {
        done.response = job.route->handler(job.request);
      } catch (const std::exception& e) {
        done.response = HttpResponse{500, "internal error\n"};
        log::Error("http: handler for ", job.route->path, " threw: ", e.what());
      } catch (...) {
        done.response = HttpResponse{500, "internal error\n"};
        log::Error("http: handler for ", job.route->path, " threw");
      }
      {
        MutexLock lock(done_mu_);
        done_.push_back(std::move(done));
      }
      Wake();
    }
  }

  // --- the event thread --------------------------------------------------

  void EventThread() {
    NameThisThread("perld-http");
    // OpenSSL writes with write(2): a peer that closed must not raise
    // SIGPIPE in the process. Blocked here, it stays pending on this thread.
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);

    epoll_event events[kMaxEvents];
    while (!stop_.load(std::memory_order_acquire)) {
      const int n = epoll_wait(epoll_fd_, events, kMaxEvents, TimeoutMs());
      if (n < 0 && errno != EINTR) {
        log::Error("http: epoll_wait: ", ErrnoText(errno));
        break;
      }
      for (int i = 0; i < n; ++i) {
        const uint64_t id = events[i].data.u64;
        if (id == kListenerId) {
          Accept();
        } else if (id == kWakeId) {
          uint64_t count;
          ssize_t ignored = read(wake_fd_, &count, sizeof(count));
          (void)ignored;
          TakeDone();
        } else {
          OnEvent(id, events[i].events);
        }
      }
      RunReady();
      Expire();
    }
    // Stop: the listener and every connection close now.
    if (listen_fd_ >= 0) {
      close(listen_fd_);
      listen_fd_ = -1;
    }
    while (!conns_.empty()) Close(*conns_.begin()->second);
  }

  int TimeoutMs() const {
    int64_t next = timers_.empty() ? 0 : timers_.begin()->first;
    if (accept_resume_ns_ != 0 && (next == 0 || accept_resume_ns_ < next)) {
      next = accept_resume_ns_;
    }
    if (next == 0) return -1;
    const int64_t wait = next - MonotonicNanos();
    if (wait <= 0) return 0;
    return static_cast<int>(std::min<int64_t>((wait + kNsPerMs - 1) / kNsPerMs, 3'600'000));
  }

  Connection* Find(uint64_t id) {
    auto it = conns_.find(id);
    return it == conns_.end() ? nullptr : it->second.get();
  }

  void SetDeadline(Connection& c, int64_t deadline) {
    if (c.deadline != 0) timers_.erase({c.deadline, c.id});
    c.deadline = deadline;
    if (deadline != 0) timers_.insert({deadline, c.id});
  }

  void UpdateInterest(Connection& c) {
    if (c.want == c.events) return;
    epoll_event ev{};
    ev.events = c.want;
    ev.data.u64 = c.id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev) == 0) c.events = c.want;
  }

  void Close(Connection& c) {
    SetDeadline(c, 0);
    c.ssl.reset();
    close(c.fd);  // also leaves the epoll set
    stats_->Closed();
    conns_.erase(c.id);  // destroys c
  }

  void Accept() {
    if (accept_resume_ns_ != 0) return;
    for (int i = 0; i < kMaxAcceptsPerWake; ++i) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        const int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK) return;
        if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
        // Out of descriptors or memory: the listener stays readable, so
        // leave it alone a while instead of spinning on it.
        log::Warning("http: accept: ", ErrnoText(err), "; not accepting for 100 ms");
        accept_resume_ns_ = MonotonicNanos() + kAcceptPauseNs;
        epoll_event ev{};
        ev.data.u64 = kListenerId;
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
        return;
      }
      if (conns_.size() >= static_cast<size_t>(options_.max_connections)) {
        Refuse(fd);
        continue;
      }
      const int yes = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
      const uint64_t id = next_id_++;
      if (!Watch(fd, id, EPOLLIN)) {
        close(fd);
        continue;
      }
      auto owned = std::make_unique<Connection>();
      Connection& c = *owned;
      c.id = id;
      c.fd = fd;
      c.events = c.want = EPOLLIN;
      if (tls_ != nullptr) {
        c.ssl.reset(SSL_new(tls_.get()));
        if (c.ssl == nullptr || SSL_set_fd(c.ssl.get(), fd) != 1) {
          log::Error("http: SSL_new: ", OpenSslErrors());
          close(fd);
          continue;
        }
        SSL_set_accept_state(c.ssl.get());
        c.state = State::kHandshake;
      }
      conns_.emplace(id, std::move(owned));
      stats_->Opened();
      SetDeadline(c, MonotonicNanos() + options_.header_timeout_ms * kNsPerMs);
    }
  }

  // Over max_connections: 503 (plain HTTP; a TLS client cannot read it
  // before a handshake) and close. What the client already sent is read
  // first, so the close is a FIN, not a reset that could discard the 503.
  void Refuse(int fd) {
    stats_->Refused(HttpServerStats::Refusal::kConnections);
    if (tls_ == nullptr) {
      static const std::string* const kBusy =
          new std::string(CannedResponse(503, "too many connections\n"));
      char sink[4096];
      while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
      }
      ssize_t ignored = send(fd, kBusy->data(), kBusy->size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      (void)ignored;
    }
    close(fd);
  }

  void OnEvent(uint64_t id, uint32_t events) {
    Connection* c = Find(id);
    if (c == nullptr) return;
    if ((events & EPOLLERR) != 0 || ((events & EPOLLHUP) != 0 && c->state == State::kQueued)) {
      Close(*c);
      return;
    }
    Drive(*c);
  }

  // Runs whatever the connection's state needs next.
  void Drive(Connection& c) {
    switch (c.state) {
      case State::kHandshake:
        Handshake(c);
        return;
      case State::kReading:
        Read(c);
        return;
      case State::kWriting:
        Write(c);
        return;
      case State::kLingering:
        Linger(c);
        return;
      case State::kQueued:
        return;
    }
  }

  // Connections to drive again once the current events are handled (a
  // keep-alive connection after its response: its next request may already
  // be buffered). A queue, not a call, so pipelined requests never recurse.
  void RunReady() {
    while (!ready_.empty()) {
      const uint64_t id = ready_.front();
      ready_.pop_front();
      if (Connection* c = Find(id)) Drive(*c);
    }
  }

  // Sets c.want from an OpenSSL result that did not complete; false: the
  // connection failed.
  static bool SslWants(Connection& c, int result) {
    switch (SSL_get_error(c.ssl.get(), result)) {
      case SSL_ERROR_WANT_READ:
        c.want = EPOLLIN;
        return true;
      case SSL_ERROR_WANT_WRITE:
        c.want = EPOLLOUT;
        return true;
      default:
        return false;
    }
  }

  void Handshake(Connection& c) {
    ERR_clear_error();
    const int r = SSL_accept(c.ssl.get());
    if (r == 1) {
      c.state = State::kReading;
      Read(c);
      return;
    }
    const int error = SSL_get_error(c.ssl.get(), r);
    if (SslWants(c, r)) {
      UpdateInterest(c);
      return;
    }
    // A peer that just went away is not a refusal; a failed handshake is.
    const unsigned long e = ERR_peek_error();
    const bool eof =
        error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN ||
        (ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING);
    if (!eof) {
      stats_->Refused(HttpServerStats::Refusal::kTls);
      log::Debug("http: TLS handshake failed: ", OpenSslErrors());
    }
    ERR_clear_error();
    Close(c);
  }

  // Reads into c.in: > 0 bytes read, 0 the peer closed or failed, -1 nothing
  // more now (c.want set).
  ssize_t Receive(Connection& c, char* buf, size_t size) {
    if (c.ssl != nullptr) {
      ERR_clear_error();
      const int r = SSL_read(c.ssl.get(), buf, static_cast<int>(size));
      if (r > 0) return r;
      if (SslWants(c, r)) return -1;
      ERR_clear_error();
      return 0;
    }
    while (true) {
      const ssize_t r = recv(c.fd, buf, size, 0);
      if (r > 0) return r;
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        c.want = EPOLLIN;
        return -1;
      }
      return 0;
    }
  }

  void Read(Connection& c) {
    char buf[kReadChunk];
    const size_t cap = static_cast<size_t>(options_.max_header_bytes);
    while (c.in.size() <= cap && FindHeadEnd(c.in, c.scanned) == absl::string_view::npos) {
      c.scanned = c.in.size();
      const ssize_t n = Receive(c, buf, sizeof(buf));
      if (n == 0) {
        Close(c);
        return;
      }
      if (n < 0) break;
      if (c.idle) {  // the first byte of a later request: its head's deadline
        c.idle = false;
        SetDeadline(c, MonotonicNanos() + options_.header_timeout_ms * kNsPerMs);
      }
      c.in.append(buf, static_cast<size_t>(n));
    }
    Process(c);
  }

  // Acts on c.in: a complete head is answered or queued; an incomplete one
  // waits for more bytes (or is too large).
  void Process(Connection& c) {
    const size_t cap = static_cast<size_t>(options_.max_header_bytes);
    const size_t end = FindHeadEnd(c.in, c.scanned);
    if (end == absl::string_view::npos || end > cap) {
      if (c.in.size() > cap) {
        stats_->Refused(HttpServerStats::Refusal::kBadRequest);
        Respond(c, HttpResponse{431, absl::StrCat("request head over ", cap, " bytes\n")}, false,
                false, "");
        return;
      }
      c.scanned = c.in.size();
      if (c.ssl == nullptr) c.want = EPOLLIN;
      UpdateInterest(c);
      return;
    }
    ParsedHead head = ParseRequestHead(absl::string_view(c.in).substr(0, end));
    c.in.erase(0, end);
    c.scanned = 0;
    if (head.status != 0) {
      stats_->Refused(HttpServerStats::Refusal::kBadRequest);
      Respond(c, HttpResponse{head.status, head.message + "\n"}, false, false,
              head.status == 405 ? "Allow: GET, HEAD\r\n" : "");
      return;
    }
    const bool head_only = head.request.method == "HEAD";
    const HttpRoute* route = nullptr;
    for (const HttpRoute& r : routes_) {
      if (r.path == head.request.path) {
        route = &r;
        break;
      }
    }
    if (route == nullptr) {
      Respond(c, HttpResponse{404, "404 page not found\n"}, head_only, head.keep_alive, "");
      return;
    }
    {
      MutexLock lock(jobs_mu_);
      if (jobs_.size() < static_cast<size_t>(options_.max_queued_requests)) {
        jobs_.push_back(Job{c.id, route, std::move(head.request)});
        stats_->SetQueued(static_cast<int64_t>(jobs_.size()));
        route = nullptr;  // queued
      }
    }
    if (route != nullptr) {
      stats_->Refused(HttpServerStats::Refusal::kQueue);
      Respond(c, HttpResponse{503, "busy: every HTTP handler thread is taken, try again\n"},
              head_only, false, "Retry-After: 1\r\n");
      return;
    }
    jobs_cv_.NotifyOne();
    c.state = State::kQueued;
    c.head_only = head_only;
    c.keep_alive = head.keep_alive;
    SetDeadline(c, 0);
    c.want = 0;
    UpdateInterest(c);
  }

  // Handler results: each becomes its connection's response (a connection
  // that closed meanwhile is gone, and so is its result).
  void TakeDone() {
    std::vector<Done> done;
    {
      MutexLock lock(done_mu_);
      done.swap(done_);
    }
    for (Done& d : done) {
      Connection* c = Find(d.id);
      if (c == nullptr || c->state != State::kQueued) continue;
      Respond(*c, std::move(d.response), c->head_only, c->keep_alive, "");
    }
  }

  // Starts writing `r` (the head; the body unless `head_only`).
  void Respond(Connection& c, HttpResponse r, bool head_only, bool keep_alive,
               absl::string_view extra_headers) {
    const size_t length = r.shared_body ? r.shared_body->size() : r.body.size();
    c.out =
        absl::StrCat("HTTP/1.1 ", r.status, " ", ReasonPhrase(r.status), "\r\nDate: ", HttpDate(),
                     "\r\nContent-Type: ", r.content_type, "\r\nContent-Length: ", length, "\r\n",
                     extra_headers, keep_alive ? "" : "Connection: close\r\n", "\r\n");
    c.body.reset();
    if (!head_only) {
      if (r.shared_body) {
        c.body = std::move(r.shared_body);
      } else {
        c.out.append(r.body);
      }
    }
    c.sent = 0;
    c.close_after = !keep_alive;
    c.state = State::kWriting;
    stats_->Answered();
    SetDeadline(c, MonotonicNanos() + options_.write_timeout_ms * kNsPerMs);
    Write(c);
  }

  void Write(Connection& c) {
    const size_t total = c.out.size() + (c.body ? c.body->size() : 0);
    while (c.sent < total) {
      ssize_t n;
      if (c.ssl != nullptr) {
        const char* data;
        size_t size;
        if (c.sent < c.out.size()) {
          data = c.out.data() + c.sent;
          size = c.out.size() - c.sent;
        } else {
          data = c.body->data() + (c.sent - c.out.size());
          size = total - c.sent;
        }
        ERR_clear_error();
        const int r =
            SSL_write(c.ssl.get(), data, static_cast<int>(std::min(size, kTlsWriteChunk)));
        if (r <= 0) {
          if (SslWants(c, r)) break;
          ERR_clear_error();
          Close(c);
          return;
        }
        n = r;
      } else {
        iovec iov[2];
        int count = 0;
        if (c.sent < c.out.size()) {
          iov[count++] = {c.out.data() + c.sent, c.out.size() - c.sent};
          if (c.body && !c.body->empty()) {
            iov[count++] = {const_cast<char*>(c.body->data()), c.body->size()};
          }
        } else {
          const size_t at = c.sent - c.out.size();
          iov[count++] = {const_cast<char*>(c.body->data()) + at, c.body->size() - at};
        }
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = static_cast<size_t>(count);
        n = sendmsg(c.fd, &msg, MSG_NOSIGNAL);
        if (n < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) {
            c.want = EPOLLOUT;
            break;
          }
          Close(c);
          return;
        }
      }
      c.sent += static_cast<size_t>(n);
    }
    if (c.sent < total) {
      UpdateInterest(c);
      return;
    }
    // Written.
    c.out.clear();
    c.body.reset();
    c.sent = 0;
    c.served = true;
    if (c.close_after) {
      StartLinger(c);
      return;
    }
    c.state = State::kReading;
    c.idle = c.in.empty();
    SetDeadline(c, MonotonicNanos() +
                       (c.idle ? options_.idle_timeout_ms : options_.header_timeout_ms) * kNsPerMs);
    c.want = EPOLLIN;
    UpdateInterest(c);
    ready_.push_back(c.id);  // a pipelined request may be buffered already
  }

  // After a response that closes the connection: the write side is shut
  // (a TLS close_notify first) and what the peer still sends is read and
  // dropped until it closes, so the close never resets the response away.
  void StartLinger(Connection& c) {
    if (c.ssl != nullptr) {
      ERR_clear_error();
      SSL_shutdown(c.ssl.get());
      ERR_clear_error();
    }
    shutdown(c.fd, SHUT_WR);
    c.state = State::kLingering;
    c.in.clear();
    c.in.shrink_to_fit();
    SetDeadline(c, MonotonicNanos() + options_.header_timeout_ms * kNsPerMs);
    c.want = EPOLLIN;
    UpdateInterest(c);
    Linger(c);
  }

  void Linger(Connection& c) {
    char buf[kReadChunk];
    while (true) {
      const ssize_t r = recv(c.fd, buf, sizeof(buf), 0);
      if (r > 0) continue;
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      Close(c);
      return;
    }
  }

  void Expire() {
    const int64_t now = MonotonicNanos();
    if (accept_resume_ns_ != 0 && accept_resume_ns_ <= now) {
      accept_resume_ns_ = 0;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kListenerId;
      epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
    }
    while (!timers_.empty() && timers_.begin()->first <= now) {
      Connection* c = Find(timers_.begin()->second);
      if (c == nullptr) {  // cannot happen: Close clears the deadline
        timers_.erase(timers_.begin());
        continue;
      }
      switch (c->state) {
        case State::kHandshake:
          stats_->Refused(HttpServerStats::Refusal::kHeaderTimeout);
          break;
        case State::kReading:
          if (c->idle) break;  // an idle keep-alive connection: not a refusal
          stats_->Refused(HttpServerStats::Refusal::kHeaderTimeout);
          if (c->ssl == nullptr && !c->in.empty()) {  // best effort: the client started one
            static const std::string* const kTimeout =
                new std::string(CannedResponse(408, "request head not complete in time\n"));
            ssize_t ignored =
                send(c->fd, kTimeout->data(), kTimeout->size(), MSG_DONTWAIT | MSG_NOSIGNAL);
            (void)ignored;
          }
          break;
        case State::kWriting: {
          // A reset, not a FIN behind the unsent bytes: the kernel frees
          // the response's send buffer at once.
          stats_->Refused(HttpServerStats::Refusal::kWriteTimeout);
          const linger reset{1, 0};
          setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
          break;
        }
        case State::kLingering:
        case State::kQueued:
          break;
      }
      Close(*c);
    }
  }

  const std::vector<HttpRoute> routes_;
  const SslCtxPtr tls_;  // null: plain HTTP
  const HttpServerOptions options_;
  HttpServerStats own_stats_;
  HttpServerStats* const stats_;
  int listen_fd_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};

  // Event thread only.
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> conns_;
  std::set<std::pair<int64_t, uint64_t>> timers_;  // (deadline, connection id)
  std::deque<uint64_t> ready_;
  uint64_t next_id_ = kFirstConnectionId;
  int64_t accept_resume_ns_ = 0;  // != 0: accepting paused until then

  Mutex jobs_mu_;
  CondVar jobs_cv_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(jobs_mu_);
  bool handlers_stop_ ABSL_GUARDED_BY(jobs_mu_) = false;
  Mutex done_mu_;
  std::vector<Done> done_ ABSL_GUARDED_BY(done_mu_);

  std::vector<std::thread> handlers_;
  std::thread event_thread_;
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(std::string host, int port,
                                                              std::string path,
                                                              std::function<std::string()> render) {
  if (path.empty()) return absl::InvalidArgumentError("http server: empty path");
  if (path[0] != '/') path = "/" + path;
  if (!render) return absl::InvalidArgumentError("http server: no render function");
  HttpRoute route;
  route.path = path;
  route.handler = [render = std::move(render)](const HttpRequest&) {
    return HttpResponse{200, render(), kExpositionContentType};
  };
  return Start(std::move(host), port, {std::move(route)}, HttpTls{}, HttpServerOptions::Small());
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(std::string host, int port,
                                                              std::vector<HttpRoute> routes,
                                                              const HttpTls& tls,
                                                              const HttpServerOptions& options) {
  if (host.empty()) return absl::InvalidArgumentError("http server: empty host");
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("http server: port ", port, " is outside [0, 65535]"));
  }
  if (routes.empty()) return absl::InvalidArgumentError("http server: no routes");
  for (const HttpRoute& r : routes) {
    if (r.path.empty() || r.path[0] != '/' || !r.handler) {
      return absl::InvalidArgumentError(absl::StrCat("http server: bad route '", r.path, "'"));
    }
  }
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  std::string first_path = routes.front().path;

  SslCtxPtr ctx;
  if (tls.enabled()) {
    absl::StatusOr<SslCtxPtr> made = MakeTlsContext(tls);
    if (!made.ok()) return made.status();
    ctx = std::move(*made);
  }
  absl::StatusOr<int> fd = Listen(host, port);
  if (!fd.ok()) return fd.status();
  const int bound_port = BoundPort(*fd);
  auto loop = std::make_unique<Loop>(std::move(routes), std::move(ctx), options, *fd);
  if (bound_port <= 0) {
    return absl::InternalError("http server: getsockname: " + ErrnoText(errno));
  }
  if (absl::Status s = loop->Start(); !s.ok()) return s;
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(loop), std::move(host), bound_port,
                                                    std::move(first_path), tls.enabled()));
}

HttpServer::HttpServer(std::unique_ptr<Loop> loop, std::string host, int port, std::string path,
                       bool https)
    : loop_(std::move(loop)),
      host_(std::move(host)),
      port_(port),
      path_(std::move(path)),
      https_(https) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  loop_->Stop();
}

std::string HttpServer::Url() const {
  return absl::StrCat(https_ ? "https://" : "http://", common::JoinHostPort(host_, port_), path_);
}

const HttpServerStats& HttpServer::stats() const { return loop_->stats(); }

}  // namespace perld::http
