// ExpositionSamples: the samples of a Prometheus text 0.0.4 exposition (the
// daemon's /metrics text, DaemonMetrics::Render) as remote write sends them
// -- what a Prometheus scrape of the same text would store: one series per
// sample line, its labels plus __name__ = the line's name (a summary's
// quantiles keep their `quantile` label, `_sum` and `_count` are series of
// their own, counters keep `_total`), the value read as Prometheus reads it
// (correctly rounded decimal, NaN, +Inf, -Inf; prometheus-cpp's Nan and inf
// too), every sample stamped with the collection time. Line timestamps are
// ignored (perld writes none). Comments and blank lines are skipped; a line
// that is not a sample is skipped and counted.
//
// Series are interned: the encoded labels of a series (EncodeLabels) are
// built the first time its line is seen and shared by every later sample of
// it until a collection no longer has it, so a steady exposition costs a
// hash lookup per line.
//
// Threads: one thread at a time (the collector's).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/remote_write/sample_queue.h"

namespace perld::remote_write {

class ExpositionSamples {
 public:
  // Appends one sample per sample line of `text` to `out`, stamped
  // `timestamp_ms`; returns the lines skipped as malformed.
  int64_t Collect(std::string_view text, int64_t timestamp_ms, std::vector<QueuedSample>* out);

  // Series interned now (those of the latest Collect).
  size_t series() const { return interned_.size(); }

 private:
  struct Interned {
    std::shared_ptr<const std::string> labels;
    uint64_t generation = 0;
  };
  uint64_t generation_ = 0;
  // The line's series text (`name{labels}`) -> its encoded labels.
  absl::flat_hash_map<std::string, Interned> interned_;
};

// The value of a sample as Prometheus parses it (false: not a number).
bool ParseSampleValue(std::string_view text, double* value);

}  // namespace perld::remote_write
