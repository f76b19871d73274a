#include "daemon/server/memory_budget.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace perld::server {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<int64_t> LimitIn(const std::string& path) {
  std::optional<std::string> text = ReadFile(path);
  if (!text) return std::nullopt;
  return ParseCgroupMemoryLimit(*text);
}

std::optional<int64_t> Smaller(std::optional<int64_t> a, std::optional<int64_t> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

}  // namespace

std::optional<int64_t> ParseCgroupMemoryLimit(absl::string_view text) {
  int64_t bytes = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &bytes)) return std::nullopt;
  if (bytes <= 0 || bytes >= (int64_t{1} << 62)) return std::nullopt;  // v1: no limit
  return bytes;
}

std::optional<int64_t> CgroupMemoryLimit() {
  // /proc/self/cgroup: "0::/path" (v2) and "N:memory:/path" (v1) lines. A
  // container sees its own cgroup at the mount's root, so the root's files
  // are read too; the smallest limit found wins.
  std::optional<int64_t> limit = Smaller(LimitIn("/sys/fs/cgroup/memory.max"),
                                         LimitIn("/sys/fs/cgroup/memory/memory.limit_in_bytes"));
  const std::optional<std::string> self = ReadFile("/proc/self/cgroup");
  if (!self) return limit;
  for (absl::string_view line : absl::StrSplit(*self, '\n', absl::SkipEmpty())) {
    const std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3 || f[2].empty() || f[2] == "/" || f[2].find("..") != std::string::npos) {
      continue;
    }
    if (f[0] == "0" && f[1].empty()) {
      limit = Smaller(limit, LimitIn(absl::StrCat("/sys/fs/cgroup", f[2], "/memory.max")));
    } else if (absl::StrContains(absl::StrCat(",", f[1], ","), ",memory,")) {
      limit = Smaller(
          limit, LimitIn(absl::StrCat("/sys/fs/cgroup/memory", f[2], "/memory.limit_in_bytes")));
    }
  }
  return limit;
}

int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<int64_t>(pages) * static_cast<int64_t>(page_size);
}

MemoryBudget ResolveMemoryBudget(int64_t configured, int64_t physical,
                                 std::optional<int64_t> cgroup) {
  if (configured > 0) return {configured, "limits.maxMemoryBytes"};
  const bool by_cgroup = cgroup && (physical <= 0 || *cgroup < physical);
  const int64_t base = by_cgroup ? *cgroup : physical;
  if (base <= 0) return {0, "automatic: memory size unknown, no budget"};
  const int64_t share =
      base / 100 * kAutomaticMemoryPercent + base % 100 * kAutomaticMemoryPercent / 100;
  return {share,
          absl::StrCat("automatic: ", kAutomaticMemoryPercent, "% of the ",
                       by_cgroup ? "cgroup memory limit " : "physical memory ", base, " bytes")};
}

MemoryBudget ResolveMemoryBudget(int64_t configured) {
  if (configured > 0) return {configured, "limits.maxMemoryBytes"};
  return ResolveMemoryBudget(configured, PhysicalMemoryBytes(), CgroupMemoryLimit());
}

}  // namespace perld::server
