// Transitional: CurrentConfig lives in daemon/config/current_config.h (the
// ingest domain below the services reads it too). Removed once every
// service includes it from there.
#pragma once

#include "daemon/config/current_config.h"

namespace perld::service {
using CurrentConfig = config::CurrentConfig;
}  // namespace perld::service
