#include "daemon/config/state_dir.h"

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace perld::config {

std::string ResolveStateDir(const DaemonConfig& config, const char* state_directory_env) {
  if (!config.state_dir.empty()) return config.state_dir;
  if (state_directory_env != nullptr) {
    for (absl::string_view dir : absl::StrSplit(state_directory_env, ':', absl::SkipEmpty())) {
      return std::string(dir);
    }
  }
  return "./perld-state";
}

}  // namespace perld::config
