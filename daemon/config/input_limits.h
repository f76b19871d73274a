// InputLimits: the caps on what one request may carry, checked in one place
// for every service and domain that takes such input -- labels
// (limits.maxLabels, maxLabelKeyBytes, maxLabelValueBytes), run and client
// names and client ids (limits.maxNameBytes), percentile lists
// (limits.maxPercentiles).
//
// Contract: every Check* returns OK or INVALID_ARGUMENT with a message that
// names the field, the size given, the cap and its key, e.g.
// "open: labels: 40 labels, at most 32 (limits.maxLabels)". A request over a
// cap is refused whole; nothing is truncated. Counting the refusal is the
// caller's. Emptiness and syntax are not caps: callers check them.
//
// Threads: pure functions of their arguments; any thread.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "daemon/config/daemon_config.h"

namespace perld::config {

// Over-long input as a message quotes it: its first 32 bytes, C-escaped,
// and "..." when there is more.
std::string ShownInput(absl::string_view text);

// `field` names the input in the message ("open: run_name").
absl::Status CheckName(absl::string_view field, absl::string_view name, const LimitsConfig& limits);
absl::Status CheckPercentileCount(absl::string_view field, int64_t count,
                                  const LimitsConfig& limits);
// One label of a set of `count` labels (the count is checked with the first).
absl::Status CheckLabel(absl::string_view field, int64_t count, absl::string_view key,
                        absl::string_view value, const LimitsConfig& limits);

// Any map of string keys to string values (std::map, google::protobuf::Map).
template <typename LabelMap>
absl::Status CheckLabels(absl::string_view field, const LabelMap& labels,
                         const LimitsConfig& limits) {
  const auto count = static_cast<int64_t>(labels.size());
  if (count > limits.max_labels) return CheckLabel(field, count, "", "", limits);
  for (const auto& [key, value] : labels) {
    if (absl::Status s = CheckLabel(field, count, key, value, limits); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace perld::config
