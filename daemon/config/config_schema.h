// ConfigSchema: the one table of configuration keys. Each entry is one key of
// config/perld.yaml: its dotted name ("retention.maxBytes" is maxBytes under
// the retention: section), what SIGHUP does with it, how to read it from a
// YAML value, and how to write it back. The loader, RenderEffectiveConfig and
// DecideReload all walk this table, so a key is in all three or in none.
//
// Cross-key rules (minLatency <= maxLatency, the default maxLatency for the
// time unit, ...) are the loader's; entries check one value each.
//
// Internal to perld_config. Threads: the table is built on first use (a
// function-local static) and immutable after; any thread may read it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "daemon/config/daemon_config.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace perld::config::internal {

enum class ReloadRule {
  kLive,     // SIGHUP applies the new value (run defaults: to runs started after it)
  kRestart,  // SIGHUP keeps the running value and reports the change
};

// Why a value was refused. `reason` has no file, line or key prefix, e.g.
// "0 is outside [10, 86400000]"; `line` is a more precise 1-based line (a
// sequence element), or 0 for the key's own line.
struct ValueError {
  std::string reason;
  int line = 0;
};

struct ConfigKey {
  std::string name;  // dotted: "reportingIntervalMs", "retention.maxBytes"
  ReloadRule reload = ReloadRule::kLive;
  // Reads `value` into `config`; nullopt when accepted. Never throws.
  std::function<std::optional<ValueError>(const YAML::Node& value, DaemonConfig* config)> parse;
  // The key's value in `config` as a YAML flow value that `parse` reads back
  // to the same value.
  std::function<std::string(const DaemonConfig& config)> render;
  // Copies the key's value from `from` into `to`.
  std::function<void(const DaemonConfig& from, DaemonConfig* to)> copy;
};

// Every key, in the order of config/perld.yaml (top-level keys, then the
// retention and limits sections).
const std::vector<ConfigKey>& ConfigKeys();

// The entry named `name` (dotted), or nullptr.
const ConfigKey* FindConfigKey(absl::string_view name);

// True for a section name (SectionNames()). Sections nest one level
// ("remoteWrite.tls": caFile under tls: under remoteWrite:).
bool IsSection(absl::string_view name);
// The sections ("retention", "limits", ...): the one list.
const std::vector<std::string>& SectionNames();

// How a value is named in a message after "got ": 'abc' (plain scalar),
// the string "10" (quoted), a sequence, a mapping, an empty value.
std::string Describe(const YAML::Node& value);

// `text` for a message: C-escaped, cut to 64 characters.
std::string Shown(absl::string_view text);

// A 1-based line for a YAML mark line (0-based; -1 when unknown -> 1).
int LineOf(int mark_line);

}  // namespace perld::config::internal
