// RequestLimits: the caps of daemon/config/input_limits.h applied to the
// gRPC requests that carry such input (Control.StartBench; Query's
// percentile lists), and the paging of Query.ListRuns. Ingest's open is
// checked by the ingest domain (RunTable::Join) on its decoded form.
//
// Contract: every Check* returns OK or INVALID_ARGUMENT with a message that
// names the field, the size given, the cap and its key, e.g.
// "open: labels: 40 labels, at most 32 (limits.maxLabels)". A request over a
// cap is refused whole; nothing is truncated. Counting the refusal is the
// caller's (perld_ingest_refused_total{reason="input_limit"},
// perld_runs_refused_total{reason="input_limit"}). Emptiness and syntax are
// not caps: callers check them where they did before.
//
// Threads: pure functions of their arguments; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/config/daemon_config.h"
#include "daemon/config/input_limits.h"
#include "daemon/runs/run_info.h"
#include "perld/v1/perld.pb.h"

namespace perld::service {

using config::CheckLabels;
using config::CheckName;
using config::CheckPercentileCount;

// Control.StartBench: name and labels (a bench run takes the configured
// percentiles, which the config loader keeps within limits.maxPercentiles).
absl::Status CheckStartBench(const v1::StartBenchRequest& request,
                             const config::LimitsConfig& limits);

// ListRuns paging: runs in ascending id; a page holds at most its size
// (page_size 0: kDefaultListPageSize; above kMaxListPageSize: that) and stops
// early rather than pass kMaxListPageBytes, so a response stays well within
// a client's default 4 MiB receive limit. The token is the last id returned,
// in decimal ("" : from the first run).
inline constexpr int kDefaultListPageSize = 100;
inline constexpr int kMaxListPageSize = 1000;
inline constexpr size_t kMaxListPageBytes = size_t{2} << 20;

struct ListPage {
  runs::RunId after = 0;  // list ids above this one
  size_t size = kDefaultListPageSize;
};
// INVALID_ARGUMENT for a negative page_size or a token that is not one of
// ListPageToken's.
absl::StatusOr<ListPage> ParseListPage(int64_t page_size, const std::string& page_token);
std::string ListPageToken(runs::RunId last);

}  // namespace perld::service
