// libFuzzer target: the YAML configuration loader. Any text is refused with
// a message or loaded; a loaded configuration renders to text that loads
// back to the same configuration.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "daemon/config/config_loader.h"
#include "daemon/config/config_render.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<perld::config::DaemonConfig> config =
      perld::config::LoadConfigText(text, "fuzz.yaml");
  if (!config.ok()) {
    if (config.status().message().empty()) std::abort();  // every refusal says why
    return 0;
  }
  const std::string rendered = perld::config::RenderEffectiveConfig(*config);
  absl::StatusOr<perld::config::DaemonConfig> again =
      perld::config::LoadConfigText(rendered, "rendered.yaml");
  if (!again.ok() || !(*again == *config)) std::abort();
  return 0;
}
