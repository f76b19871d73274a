// DaemonFlags: the command line of the daemon (`perld` with no subcommand).
// Flags override the configuration file; each is `--flag VALUE` or
// `--flag=VALUE`:
//   --config FILE            the YAML configuration (none: the defaults)
//   --grpc-listen HOST:PORT  --http-listen HOST:PORT  --state-dir DIR
//   --log-level LEVEL        debug | info | warning | error
//   --check-config [FILE]    validate, print the effective configuration, exit
//   --version  --help
//
// Pure functions; any thread. The caller maps an error to exit status 2.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/config/daemon_config.h"

namespace perld::config {

struct DaemonFlags {
  std::optional<std::string> config_file;  // --config FILE, or the FILE of --check-config
  std::optional<std::string> grpc_listen;  // --grpc-listen
  std::optional<std::string> http_listen;  // --http-listen
  std::optional<std::string> grpc_unix;    // --grpc-unix
  std::optional<std::string> state_dir;    // --state-dir
  std::optional<log::Level> log_level;     // --log-level
  bool check_config = false;               // --check-config
  bool version = false;                    // --version
  bool help = false;                       // --help
};

// Parses `args` (without the program name). `--check-config` takes an
// optional FILE: `--check-config=FILE`, or the next argument when it does not
// start with '-'; it sets config_file (and conflicts with a different
// --config). A value given as a separate argument may not start with '-'
// (write --state-dir=-odd for that). A repeated flag keeps its last value.
// InvalidArgument naming the flag for an unknown flag (with a "did you mean"
// hint when one is close), a missing or unexpected value, a bad --log-level,
// or a positional argument.
absl::StatusOr<DaemonFlags> ParseDaemonFlags(const std::vector<std::string>& args);

// The --help text: every flag with its default, and the other commands
// (`perld bench [options]`, `perld --check-config`).
std::string DaemonUsage();

// Overrides `config` with the flags that were given. Validates the listen
// addresses first (InvalidArgument "flag --grpc-listen: '...': ..."); on error
// `config` is unchanged.
absl::Status ApplyFlags(const DaemonFlags& flags, DaemonConfig* config);

}  // namespace perld::config
