#include "daemon/config/input_limits.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace perld::config {
namespace {

int64_t Size(absl::string_view s) { return static_cast<int64_t>(s.size()); }

}  // namespace

std::string ShownInput(absl::string_view text) {
  constexpr size_t kShownBytes = 32;
  const std::string head = absl::CHexEscape(text.substr(0, std::min(text.size(), kShownBytes)));
  return text.size() > kShownBytes ? absl::StrCat(head, "...") : head;
}

absl::Status CheckName(absl::string_view field, absl::string_view name,
                       const LimitsConfig& limits) {
  if (Size(name) > limits.max_name_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", name.size(), " bytes, at most ",
                                                   limits.max_name_bytes,
                                                   " (limits.maxNameBytes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckLabel(absl::string_view field, int64_t count, absl::string_view key,
                        absl::string_view value, const LimitsConfig& limits) {
  if (count > limits.max_labels) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", count, " labels, at most ",
                                                   limits.max_labels, " (limits.maxLabels)"));
  }
  if (Size(key) > limits.max_label_key_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": the key \"", ShownInput(key), "\" has ", key.size(),
                     " bytes, at most ", limits.max_label_key_bytes, " (limits.maxLabelKeyBytes)"));
  }
  if (Size(value) > limits.max_label_value_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": the value of \"", ShownInput(key), "\" has ", value.size(), " bytes, at most ",
        limits.max_label_value_bytes, " (limits.maxLabelValueBytes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckPercentileCount(absl::string_view field, int64_t count,
                                  const LimitsConfig& limits) {
  if (count > limits.max_percentiles) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", count, " percentiles, at most ",
                                                   limits.max_percentiles,
                                                   " (limits.maxPercentiles)"));
  }
  return absl::OkStatus();
}

}  // namespace perld::config
