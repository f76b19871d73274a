#include "daemon/remote_write/retry_policy.h"

#include <algorithm>
#include <charconv>

#include "absl/strings/ascii.h"
#include "daemon/core/contract.h"

namespace perld::remote_write {

Outcome Classify(int status) {
  if (status >= 200 && status < 300) return Outcome::kSent;
  if (status == 0 || status == 429 || (status >= 500 && status < 600)) return Outcome::kRetry;
  return Outcome::kDrop;
}

int64_t ParseRetryAfterMs(std::string_view header) {
  const absl::string_view text =
      absl::StripAsciiWhitespace(absl::string_view(header.data(), header.size()));
  int64_t seconds = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || seconds < 0) {
    return -1;
  }
  return std::min<int64_t>(seconds, kMaxRetryAfterMs / 1000) * 1000;
}

RetryBackoff::RetryBackoff(int64_t min_ms, int64_t max_ms, uint64_t seed)
    : min_ms_(min_ms), max_ms_(max_ms), random_(seed) {
  PERLD_CONTRACT(min_ms >= 1 && min_ms <= max_ms, "RetryBackoff: 1 <= min <= max");
}

int64_t RetryBackoff::NextDelayMs(int64_t retry_after_ms) {
  ++failures_;
  int64_t delay = min_ms_;
  for (int i = 1; i < failures_ && delay < max_ms_; ++i) delay *= 2;
  delay = std::min(delay, max_ms_);
  std::uniform_int_distribution<int64_t> jitter(delay / 2, delay);
  delay = jitter(random_);
  if (retry_after_ms >= 0) delay = std::max(delay, std::min(retry_after_ms, kMaxRetryAfterMs));
  return delay;
}

}  // namespace perld::remote_write
