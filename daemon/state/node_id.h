// NodeId: the name a perld forwarding to a parent (upstream.target) gives
// itself there -- its clients are "<node id>/<run id>" in the parent's runs.
//
// In order: upstream.nodeId when set; else $PERLD_NODE_ID when set and not
// empty (a Kubernetes DaemonSet sets the node's name); else a random UUID
// (version 4, from getrandom) created once and kept in STATE_DIR/node-id.
// Never the host name: cloned VMs and containers share one, and two edges
// with the same id would drop each other's windows at the parent as
// duplicates. The file is written durably (a temporary file, fsync, rename,
// fsync of the directory), so a restarted edge keeps its id and continues
// its streams; a node-id file that is not one line of 1..128 printable
// characters without '/' is an error naming it (replacing it would give the
// edge a second identity at the parent).
//
// Threads: free functions; the state directory's lock (DirectoryLock) keeps
// a second daemon out.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace perld::state {

inline constexpr char kNodeIdFile[] = "node-id";

// `configured`: upstream.nodeId; `env`: getenv("PERLD_NODE_ID") (nullptr
// when unset); `state_dir` exists.
absl::StatusOr<std::string> ResolveNodeId(const std::string& configured, const char* env,
                                          const std::string& state_dir);

// STATE_DIR/node-id's id, created when the file does not exist.
absl::StatusOr<std::string> StoredNodeId(const std::string& state_dir);

// A new random UUID version 4 ("xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx").
absl::StatusOr<std::string> RandomUuid();

}  // namespace perld::state
