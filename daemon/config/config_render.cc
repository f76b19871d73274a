#include "daemon/config/config_render.h"

#include "absl/strings/str_cat.h"
#include "daemon/config/config_schema.h"

namespace perld::config {

std::string RenderEffectiveConfig(const DaemonConfig& config) {
  std::string out =
      "# perld effective configuration: every key (config/perld.yaml documents them)\n";
  std::string section;  // the section being written; the schema lists top-level keys first
  for (const internal::ConfigKey& key : internal::ConfigKeys()) {
    const size_t dot = key.name.find('.');
    const std::string key_section = dot == std::string::npos ? "" : key.name.substr(0, dot);
    if (key_section != section && !key_section.empty()) absl::StrAppend(&out, key_section, ":\n");
    section = key_section;
    const std::string leaf = dot == std::string::npos ? key.name : key.name.substr(dot + 1);
    absl::StrAppend(&out, section.empty() ? "" : "  ", leaf, ": ", key.render(config), "\n");
  }
  return out;
}

}  // namespace perld::config
