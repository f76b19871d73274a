#include "daemon/runs/window_rate.h"

#include <algorithm>

namespace perld::runs {

void WindowRate::Add(int32_t client, int64_t records, int64_t start_unix_ms, int64_t end_unix_ms) {
  if (client < 0 || records <= 0 || start_unix_ms <= 0 || end_unix_ms <= start_unix_ms) return;
  const auto index = static_cast<size_t>(client);
  if (index >= spans_.size()) spans_.resize(index + 1);
  Span& s = spans_[index];
  if (s.records == 0) {
    clients_.push_back(client);
    s.start_ms = start_unix_ms;
    s.end_ms = end_unix_ms;
  } else {
    s.start_ms = std::min(s.start_ms, start_unix_ms);
    s.end_ms = std::max(s.end_ms, end_unix_ms);
  }
  s.records += records;
  spanned_records_ += records;
}

double WindowRate::TakeRateSeconds(int64_t records, double seconds) {
  if (clients_.empty()) {
    spanned_records_ = 0;
    return seconds;  // every record was timed on the daemon's clock
  }
  double rate = 0;
  for (const int32_t client : clients_) {
    Span& s = spans_[static_cast<size_t>(client)];
    rate += static_cast<double>(s.records) * 1000.0 / static_cast<double>(s.end_ms - s.start_ms);
    s = Span{};
  }
  clients_.clear();
  const int64_t unspanned = std::max<int64_t>(0, records - spanned_records_);
  spanned_records_ = 0;
  if (seconds > 0) rate += static_cast<double>(unspanned) / seconds;
  if (records <= 0 || rate <= 0) return seconds;
  return static_cast<double>(records) / rate;
}

}  // namespace perld::runs
