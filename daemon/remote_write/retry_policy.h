// Remote write's retry policy: which answers are retried, and how long to
// wait before the next attempt.
//
// Classify: 2xx sent; 429, 5xx and no answer at all (connection refused or
// reset, timeout, TLS failure) are retried with the same batch; every other
// status (4xx: the receiver refuses the data, 3xx: a URL that redirects) drops
// the batch, as Prometheus' own remote write does.
//
// RetryBackoff: after the n-th consecutive failure the wait is
// min(max, min_delay * 2^(n-1)) with "equal jitter" -- uniform in [d/2, d] --
// so many perlds behind one receiver do not retry in step. A Retry-After the
// receiver sent (429/503, in seconds) is honoured: the wait is at least that,
// capped at kMaxRetryAfterMs. Reset() after a success.
//
// Threads: a RetryBackoff belongs to one thread (the sender's).
#pragma once

#include <cstdint>
#include <random>
#include <string_view>

namespace perld::remote_write {

enum class Outcome { kSent, kRetry, kDrop };

// `status`: the HTTP status, 0 when no answer came.
Outcome Classify(int status);

// The Retry-After header's delay in ms: delta-seconds only ("120"); -1 when
// absent or not that (an HTTP date is ignored: the backoff applies).
int64_t ParseRetryAfterMs(std::string_view header);

inline constexpr int64_t kMaxRetryAfterMs = int64_t{5} * 60 * 1000;

class RetryBackoff {
 public:
  // REQUIRES: 1 <= min_ms <= max_ms.
  RetryBackoff(int64_t min_ms, int64_t max_ms, uint64_t seed = std::random_device{}());

  // The wait before the next attempt after one more failure; `retry_after_ms`
  // is the receiver's Retry-After (-1: none).
  int64_t NextDelayMs(int64_t retry_after_ms = -1);
  void Reset() { failures_ = 0; }
  int failures() const { return failures_; }

 private:
  const int64_t min_ms_;
  const int64_t max_ms_;
  int failures_ = 0;
  std::mt19937_64 random_;
};

}  // namespace perld::remote_write
