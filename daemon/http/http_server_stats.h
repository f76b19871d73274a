// HttpServerStats: what HttpServer counts, for /metrics (the daemon renders
// them as perld_http_*): connections open and accepted, responses started,
// requests waiting for a handler thread, and refusals by reason.
//
// Threads: the server's threads write (relaxed atomics); any thread reads. The owner keeps it alive
// as long as the server that writes it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace perld::http {

class HttpServerStats {
 public:
  enum class Refusal {
    kConnections,    // over maxConnections: answered 503 (TLS: closed) at accept
    kQueue,          // every handler busy and maxQueuedRequests waiting: 503
    kHeaderTimeout,  // no complete request head (or TLS handshake) within headerTimeoutMs
    kBadRequest,     // malformed or refused head: 400, 405, 413, 431, 505
    kWriteTimeout,   // a response not taken by the client within the write timeout
    kTls,            // a TLS handshake that failed (wrong CA, no client certificate, not TLS)
  };
  static constexpr int kRefusals = 6;
  static constexpr const char* RefusalName(Refusal r) {
    constexpr const char* kNames[kRefusals] = {"connections", "queue",         "header_timeout",
                                               "bad_request", "write_timeout", "tls"};
    return kNames[static_cast<int>(r)];
  }

  void Refused(Refusal r) { refused_[static_cast<int>(r)].fetch_add(1, kRelaxed); }
  void Opened() {
    open_.fetch_add(1, kRelaxed);
    accepted_.fetch_add(1, kRelaxed);
  }
  void Closed() { open_.fetch_sub(1, kRelaxed); }
  void Answered() { responses_.fetch_add(1, kRelaxed); }
  void SetQueued(int64_t n) { queued_.store(n, kRelaxed); }

  uint64_t refused(Refusal r) const { return refused_[static_cast<int>(r)].load(kRelaxed); }
  int64_t connections_open() const { return open_.load(kRelaxed); }
  uint64_t connections_accepted() const { return accepted_.load(kRelaxed); }
  uint64_t responses() const { return responses_.load(kRelaxed); }
  int64_t queued() const { return queued_.load(kRelaxed); }

 private:
  static constexpr std::memory_order kRelaxed = std::memory_order_relaxed;
  std::array<std::atomic<uint64_t>, kRefusals> refused_{};
  std::atomic<int64_t> open_{0};
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> responses_{0};
  std::atomic<int64_t> queued_{0};
};

}  // namespace perld::http
