// The files of `perlctl import` as a sequence of records: fio latency logs
// (fio_log.h) or a k6 JSON output (k6_json.h), each line parsed and its value
// scaled exactly to the run's unit (decimal_scale.h). ReadSamples reads
// every file in order; the import calls it twice, once to check everything
// before anything is sent and once to send (so memory stays bounded: files
// are read in 1 MiB blocks, no allocation per line).
//
// A record's end is the source's own time in the unit (fio: the log's ms
// since the job started; k6: the Point's UNIX time) and its latency the
// value; `stream` is fio's data direction (0 read, 1 write, 2 trim, 3 sync),
// 0 for k6.
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
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace perld::perlctl {

enum class ImportFormat { kFio, kK6 };

struct ImportSource {
  ImportFormat format = ImportFormat::kFio;
  std::vector<std::string> files;
  int64_t ns_per_unit = 1;                   // the run's unit: 1 (ns), 1000 (us), 10^6 (ms)
  std::string metric = "http_req_duration";  // k6
};

// One record.
struct ImportSample {
  int stream = 0;        // fio's data direction; 0 for k6
  int64_t end = 0;       // the source's time, in the unit
  int64_t latency = 0;   // in the unit
  int32_t bytes = 0;     // fio's block size; 0 for k6
  bool rounded = false;  // the value had more digits than the unit keeps
};

// Calls `each` for every record of `src`'s files, in order; stops early
// (OK) when `each` returns false. Blank lines are skipped. `k6_metrics`
// (optional) receives the metrics k6's Metric lines declared, as "name
// (type)", once each: for a message when --metric has no Point.
absl::Status ReadSamples(const ImportSource& src,
                         const std::function<bool(const ImportSample&)>& each,
                         std::vector<std::string>* k6_metrics = nullptr);

}  // namespace perld::perlctl
