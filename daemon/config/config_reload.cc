#include "daemon/config/config_reload.h"

#include "absl/strings/str_cat.h"
#include "daemon/config/config_schema.h"

namespace perld::config {

ReloadDecision DecideReload(const DaemonConfig& running, const DaemonConfig& reloaded) {
  ReloadDecision decision{reloaded, {}, {}};
  for (const internal::ConfigKey& key : internal::ConfigKeys()) {
    const std::string before = key.render(running);
    const std::string after = key.render(reloaded);
    if (before == after) continue;
    std::string change = absl::StrCat(key.name, ": ", before, " -> ", after);
    if (key.reload == internal::ReloadRule::kLive) {
      decision.applied.push_back(std::move(change));
    } else {
      decision.needs_restart.push_back(std::move(change));
      key.copy(running, &decision.next);
    }
  }
  return decision;
}

}  // namespace perld::config
