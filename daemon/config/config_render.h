// RenderEffectiveConfig: the effective configuration as YAML, every key with
// its value, in the order of config/perld.yaml (what `perld --check-config`
// prints).
//
// Round trip: LoadConfigText(RenderEffectiveConfig(c), name) == c for every
// config the loader returns, and for any valid config whose percentiles are
// ascending (the loader sorts them) and whose channels.producer_idle_ns is the
// default (it is not a key). Strings are YAML double-quoted, so any state
// directory survives. Pure function; any thread.
#pragma once

#include <string>

#include "daemon/config/daemon_config.h"

namespace perld::config {

std::string RenderEffectiveConfig(const DaemonConfig& config);

}  // namespace perld::config
