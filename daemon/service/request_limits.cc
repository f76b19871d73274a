#include "daemon/service/request_limits.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace perld::service {

absl::Status CheckStartBench(const v1::StartBenchRequest& request,
                             const config::LimitsConfig& limits) {
  if (absl::Status s = config::CheckName("name", request.name(), limits); !s.ok()) return s;
  if (absl::Status s = config::CheckName("slo.expression", request.slo().expression(), limits);
      !s.ok()) {
    return s;
  }
  return config::CheckLabels("labels", request.labels(), limits);
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
      return absl::InvalidArgumentError(absl::StrCat("page_token: \"",
                                                     config::ShownInput(page_token),
                                                     "\" is not a next_page_token of ListRuns"));
    }
  }
  return page;
}

std::string ListPageToken(runs::RunId last) { return absl::StrCat(last); }

}  // namespace perld::service
