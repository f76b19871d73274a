// The files of `perlctl import` as a sequence of records: fio latency logs
// (fio_log.h), a k6 JSON output (k6_json.h) or HdrHistogram interval logs
// (hlog_log_reader.h), each line parsed and its value scaled exactly to the
// run's unit (decimal_scale.h; an hlog value converted exactly, or refused). ReadSamples reads
// every file in order; the import calls it twice, once to check everything
// before anything is sent and once to send (so memory stays bounded: files
// are read in 1 MiB blocks, no allocation per line).
//
// A record's end is the source's own time in the unit (fio: the log's ms
// since the job started; k6: the Point's UNIX time) and its latency the
// value; `stream` is fio's data direction (0 read, 1 write, 2 trim, 3 sync),
// 0 for k6 and hlog. An hlog interval gives one sample per bucket: its
// highest equivalent value with `records` its count, `end` the interval's
// end (StartTimestamp + BaseTime + Interval_Length, in the unit since the
// epoch), the interval's last sample marked interval_end.
//
// Errors name FILE:LINE (1-based) and keep the parser's code:
// FailedPrecondition for a k6 metric that is not a trend of time,
// InvalidArgument for a malformed line, NotFound for a file that cannot be
// opened.
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace perld::perlctl {

enum class ImportFormat { kFio, kK6, kHlog };

struct ImportSource {
  ImportFormat format = ImportFormat::kFio;
  std::vector<std::string> files;
  int64_t ns_per_unit = 1;                   // the run's unit: 1 (ns), 1000 (us), 10^6 (ms)
  std::string metric = "http_req_duration";  // k6
  int64_t hlog_ns_per_value = 1;             // hlog: the log's values' unit, in ns
  std::optional<std::string> hlog_tag;       // hlog: nullopt the untagged intervals
};

// One record.
struct ImportSample {
  int stream = 0;             // fio's data direction; 0 for k6
  int64_t end = 0;            // the source's time, in the unit
  int64_t latency = 0;        // in the unit
  int32_t bytes = 0;          // fio's block size; 0 for k6
  bool rounded = false;       // the value had more digits than the unit keeps
  int64_t records = 1;        // hlog: the bucket's count (>= 1)
  bool interval_end = false;  // hlog: the interval's last sample
};

// What the hlog files held, for the run's bucketed reason and messages.
struct HlogFacts {
  int64_t intervals = 0;               // selected intervals (empty ones too)
  int64_t other_tag_lines = 0;         // intervals of other tags, skipped
  std::vector<std::string> tags_seen;  // "" for untagged
  // Over the selected histograms: the coarsest relative bucket width
  // (1/2^relative_bits) and the lowest exact_below (values below it are
  // exact; 0: none is, lowestDiscernibleValue > 1).
  int relative_bits = 63;
  int64_t exact_below = INT64_MAX;
};

// Calls `each` for every record of `src`'s files, in order; stops early
// (OK) when `each` returns false. Blank lines are skipped. `k6_metrics`
// (optional) receives the metrics k6's Metric lines declared, as "name
// (type)", once each: for a message when --metric has no Point.
// `hlog` (optional) receives the HlogFacts of hlog files (reset first).
absl::Status ReadSamples(const ImportSource& src,
                         const std::function<bool(const ImportSample&)>& each,
                         std::vector<std::string>* k6_metrics = nullptr, HlogFacts* hlog = nullptr);

}  // namespace perld::perlctl
