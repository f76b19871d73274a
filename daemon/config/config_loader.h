// ConfigLoader: reads a perld configuration file (YAML; config/perld.yaml
// documents every key, its default and its range) into a DaemonConfig.
//
// All or nothing: a file with any problem is refused whole with
// InvalidArgument whose message lists EVERY problem found, one per line,
// ordered by line, each "FILE:LINE: ..." and naming the key, e.g.
//   perld.yaml:3: key 'maxQs': expected an integer, got 'abc'
//   perld.yaml:7: unknown key 'reportingIntervallMs' (did you mean 'reportingIntervalMs'?)
// FILE is the name exactly as the caller gave it; LINE is 1-based. Refused:
// malformed YAML, a top level that is not a mapping, unknown and duplicate
// keys, wrong types (a string or a float for an integer, ...), values out of
// range, and inconsistent pairs (minLatency > maxLatency, ...). Keys the file
// does not give keep their defaults; maxLatency defaults to
// DefaultMaxLatency(timeUnit). An empty file (or only comments) is the
// defaults. The result is normalized (LatencyConfig::Normalize(): percentiles
// ascending).
//
// No exception escapes (yaml-cpp's are caught here). Threads: pure functions,
// any thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/config/daemon_config.h"

namespace perld::config {

// Reads and loads the file at `path`. An unreadable file is an error with the
// errno's code (NotFound, PermissionDenied, ...) naming `path`; a file over
// 1 MiB is refused (InvalidArgument) rather than read to the end.
absl::StatusOr<DaemonConfig> LoadConfigFile(const std::string& path);

// Loads YAML `text`; `display_name` is the FILE of every message.
absl::StatusOr<DaemonConfig> LoadConfigText(const std::string& text,
                                            const std::string& display_name);

// Every key the loader knows, dotted for sections ("retention.maxBytes"), in
// the order of config/perld.yaml.
std::vector<std::string> ConfigKeyNames();

}  // namespace perld::config
