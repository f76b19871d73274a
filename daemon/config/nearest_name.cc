#include "daemon/config/nearest_name.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"

namespace perld::config {
namespace {

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string NearestName(const std::string& name, const std::vector<std::string>& known,
                        int max_distance) {
  const std::string lower = absl::AsciiStrToLower(name);
  std::string best;
  size_t best_distance = static_cast<size_t>(std::max(max_distance, 0)) + 1;
  for (const std::string& candidate : known) {
    const size_t d = EditDistance(lower, absl::AsciiStrToLower(candidate));
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

}  // namespace perld::config
