#include "daemon/service/request_limits.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace perld::service {
namespace {

constexpr size_t kShownBytes = 32;  // of an over-long key, quoted in a message

std::string Shown(absl::string_view text) {
  const std::string head = absl::CHexEscape(text.substr(0, std::min(text.size(), kShownBytes)));
  return text.size() > kShownBytes ? absl::StrCat(head, "...") : head;
}

int64_t Size(absl::string_view s) { return static_cast<int64_t>(s.size()); }

}  // namespace

absl::Status CheckName(absl::string_view field, absl::string_view name,
                       const config::LimitsConfig& limits) {
  if (Size(name) > limits.max_name_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", name.size(), " bytes, at most ",
                                                   limits.max_name_bytes,
                                                   " (limits.maxNameBytes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckLabels(absl::string_view field, const LabelMap& labels,
                         const config::LimitsConfig& limits) {
  if (static_cast<int64_t>(labels.size()) > limits.max_labels) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", labels.size(), " labels, at most ",
                                                   limits.max_labels, " (limits.maxLabels)"));
  }
  for (const auto& [key, value] : labels) {
    if (Size(key) > limits.max_label_key_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": the key \"", Shown(key), "\" has ", key.size(), " bytes, at most ",
                       limits.max_label_key_bytes, " (limits.maxLabelKeyBytes)"));
    }
    if (Size(value) > limits.max_label_value_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": the value of \"", Shown(key), "\" has ", value.size(), " bytes, at most ",
          limits.max_label_value_bytes, " (limits.maxLabelValueBytes)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPercentileCount(absl::string_view field, int64_t count,
                                  const config::LimitsConfig& limits) {
  if (count > limits.max_percentiles) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", count, " percentiles, at most ",
                                                   limits.max_percentiles,
                                                   " (limits.maxPercentiles)"));
  }
  return absl::OkStatus();
}

absl::Status CheckIngestOpen(const v1::IngestOpen& open, const config::LimitsConfig& limits) {
  if (absl::Status s = CheckName("open: run_name", open.run_name(), limits); !s.ok()) return s;
  if (absl::Status s = CheckName("open: client_id", open.client_id(), limits); !s.ok()) return s;
  if (absl::Status s = CheckName("open: client_name", open.client_name(), limits); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckLabels("open: labels", open.labels(), limits); !s.ok()) return s;
  return CheckPercentileCount("open: percentiles", open.percentiles_size(), limits);
}

absl::Status CheckStartBench(const v1::StartBenchRequest& request,
                             const config::LimitsConfig& limits) {
  if (absl::Status s = CheckName("name", request.name(), limits); !s.ok()) return s;
  return CheckLabels("labels", request.labels(), limits);
}

absl::StatusOr<ListPage> ParseListPage(int64_t page_size, const std::string& page_token) {
  if (page_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("page_size: ", page_size,
                                                   " is negative (0: ", kDefaultListPageSize,
                                                   " runs, at most ", kMaxListPageSize, ")"));
  }
  ListPage page;
  page.size = page_size == 0 ? kDefaultListPageSize
                             : static_cast<size_t>(std::min<int64_t>(page_size, kMaxListPageSize));
  if (!page_token.empty()) {
    const bool digits = std::all_of(page_token.begin(), page_token.end(),
                                    [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || !absl::SimpleAtoi(page_token, &page.after)) {
      return absl::InvalidArgumentError(absl::StrCat("page_token: \"", Shown(page_token),
                                                     "\" is not a next_page_token of ListRuns"));
    }
  }
  return page;
}

std::string ListPageToken(runs::RunId last) { return absl::StrCat(last); }

}  // namespace perld::service
