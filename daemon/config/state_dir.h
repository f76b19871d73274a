// ResolveStateDir: the directory perld keeps its state in.
//
// Pure function; any thread.
#pragma once

#include <string>

#include "daemon/config/daemon_config.h"

namespace perld::config {

// In order: config.state_dir when set (stateDir in the file, or
// --state-dir); else the first non-empty entry of `state_directory_env`
// (systemd's $STATE_DIRECTORY from StateDirectory=, colon-separated when the
// unit lists several) when it is set and not empty; else "./perld-state".
// `state_directory_env` is getenv("STATE_DIRECTORY") (nullptr when unset),
// passed in so that tests need no environment.
std::string ResolveStateDir(const DaemonConfig& config, const char* state_directory_env);

// The gRPC Unix socket path: config.grpc_unix when set (grpcUnix, or
// --grpc-unix); else, under systemd, the first entry of `runtime_directory_env`
// ($RUNTIME_DIRECTORY from RuntimeDirectory=) + "/perld.sock"; else "" (off).
std::string ResolveGrpcUnix(const DaemonConfig& config, const char* runtime_directory_env);

}  // namespace perld::config
