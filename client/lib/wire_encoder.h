// The client side of the ingest wire format (proto/perld/v1/ingest.proto):
// BatchEncoder packs timestamps into a TimestampBatch (latency deltas as
// zigzag varints; the records and bytes columns sent once when constant), and
// EncodeWindowParts turns a closed local window into WindowReports. The daemon's
// decoders (daemon/service/ingest_codec.h) are their inverse.
//
// Threads: single owner (the client's recorder thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "daemon/core/periodic_and_total_windows.h"
#include "daemon/core/time_stamp.h"
#include "perld/v1/ingest.pb.h"

namespace perld::client {

class BatchEncoder {
 public:
  // `paced`: a rate-controlled run's encoder -- every batch carries the
  // start-lag column (TimestampBatch.start_lag_delta).
  explicit BatchEncoder(bool paced = false) : paced_(paced) {}
  // `start_lag`: start - intended start (paced encoders only; else ignored).
  void Add(const TimeStamp& ts, int64_t start_lag = 0) {
    latencies_.push_back(ts.end - ts.start);
    records_.push_back(static_cast<uint32_t>(ts.records));
    bytes_.push_back(static_cast<uint32_t>(ts.bytes));
    if (paced_) lags_.push_back(start_lag);
  }
  size_t size() const { return latencies_.size(); }
  // Moves the pending timestamps into `out` (cleared) and starts empty;
  // `skipped`: slots dropped since the previous batch (paced only).
  void Take(uint64_t sequence, v1::TimestampBatch* out, int64_t skipped = 0);

 private:
  const bool paced_;
  std::vector<int64_t> lags_;
  std::vector<int64_t> latencies_;
  std::vector<uint32_t> records_;
  std::vector<uint32_t> bytes_;
};

// A closed window (counters `s`, ascending `distribution`) as WindowReports
// of at most `max_pairs` pairs each, with consecutive sequences from
// `first_sequence`. Every part but the last carries only its pairs (records
// = valid = their counts, their latency sum, min and max); the last carries
// the rest of the counters, so the parts merged are the window exactly.
// REQUIRES: max_pairs >= 1.
std::vector<v1::WindowReport> EncodeWindowParts(const LatencySnapshot& s,
                                                std::span<const LatencyBucket> distribution,
                                                int64_t max_pairs, uint64_t first_sequence,
                                                int64_t start_unix_ms, int64_t end_unix_ms);

}  // namespace perld::client
