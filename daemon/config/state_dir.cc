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

std::string ResolveGrpcUnix(const DaemonConfig& config, const char* runtime_directory_env) {
  if (!config.grpc_unix.empty()) return config.grpc_unix;
  if (runtime_directory_env != nullptr) {
    for (absl::string_view dir : absl::StrSplit(runtime_directory_env, ':', absl::SkipEmpty())) {
      return std::string(dir) + "/perld.sock";
    }
  }
  return "";
}

}  // namespace perld::config
