// The runs' memory budget the daemon starts with: limits.maxMemoryBytes when
// set, else automatic -- 75% of the smaller of the machine's physical memory
// and the memory limit of the cgroup perld runs in (cgroup v2 memory.max or
// v1 memory.limit_in_bytes; "max" and v1's huge "no limit" value mean none).
// The rest is left to what no run reserves: gRPC and HTTP buffers, the
// snapshot store (retention.maxBytes), ingest queues (ingest.maxMemoryBytes).
//
// Threads: any thread; reads /proc and /sys on each call (startup, SIGHUP).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace perld::server {

inline constexpr int64_t kAutomaticMemoryPercent = 75;

struct MemoryBudget {
  int64_t bytes = 0;
  std::string source;  // for the log: "limits.maxMemoryBytes" or how it was derived
};

// A cgroup limit file's text ("max\n", "1073741824\n"): the limit, or
// nullopt for none, v1's "no limit" (>= 2^62) or text that is not a number.
std::optional<int64_t> ParseCgroupMemoryLimit(absl::string_view text);
// The memory limit of this process's cgroup, if any (v2, then v1).
std::optional<int64_t> CgroupMemoryLimit();
int64_t PhysicalMemoryBytes();

// `configured` > 0: that; 0: automatic from `physical` and `cgroup`.
MemoryBudget ResolveMemoryBudget(int64_t configured, int64_t physical,
                                 std::optional<int64_t> cgroup);
// The same from this machine.
MemoryBudget ResolveMemoryBudget(int64_t configured);

}  // namespace perld::server
