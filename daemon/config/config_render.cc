#include "daemon/config/config_render.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/config/config_schema.h"

namespace perld::config {

std::string RenderEffectiveConfig(const DaemonConfig& config) {
  std::string out =
      "# perld effective configuration: every key (config/perld.yaml documents them)\n";
  // The sections being written, outermost first; the schema lists a
  // section's keys together (a nested section's right after its parent's).
  std::vector<std::string> open;
  for (const internal::ConfigKey& key : internal::ConfigKeys()) {
    const std::vector<std::string> path = absl::StrSplit(key.name, '.');
    size_t same = 0;
    while (same < open.size() && same + 1 < path.size() && open[same] == path[same]) ++same;
    open.resize(same);
    for (size_t i = same; i + 1 < path.size(); ++i) {
      absl::StrAppend(&out, std::string(2 * i, ' '), path[i], ":\n");
      open.push_back(path[i]);
    }
    absl::StrAppend(&out, std::string(2 * open.size(), ' '), path.back(), ": ", key.render(config),
                    "\n");
  }
  return out;
}

}  // namespace perld::config
