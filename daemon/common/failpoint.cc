#include "daemon/common/failpoint.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>

namespace perld::failpoint {
namespace {

struct Point {
  std::string name;
  long at = 1;  // the hit that kills
  std::atomic<long> hits{0};
};

// Parsed once from the environment; never freed (a process-lifetime table).
std::deque<Point>* Points() {
  static std::deque<Point>* const points = [] {
    auto* out = new std::deque<Point>();  // never moves its elements (atomics)
    const char* spec = std::getenv("PERLD_FAILPOINT");
    if (spec == nullptr) return out;
    std::string all(spec);
    size_t start = 0;
    while (start <= all.size()) {
      size_t end = all.find(',', start);
      if (end == std::string::npos) end = all.size();
      std::string term = all.substr(start, end - start);
      start = end + 1;
      if (term.empty()) continue;
      Point& p = out->emplace_back();
      const size_t colon = term.find(':');
      p.name = term.substr(0, colon);
      if (colon != std::string::npos) {
        p.at = std::strtol(term.c_str() + colon + 1, nullptr, 10);
        if (p.at < 1) p.at = 1;
      }
    }
    return out;
  }();
  return points;
}

}  // namespace

bool Armed() {
  static const bool armed = std::getenv("PERLD_FAILPOINT") != nullptr;
  return armed;
}

void Hit(const char* name) {
  for (Point& p : *Points()) {
    if (p.name != name) continue;
    if (p.hits.fetch_add(1, std::memory_order_relaxed) + 1 != p.at) continue;
    char line[256];
    const int n =
        std::snprintf(line, sizeof(line),
                      "perld: failpoint %s reached (hit %ld): killing the process\n", name, p.at);
    if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
    kill(getpid(), SIGKILL);
    pause();
  }
}

}  // namespace perld::failpoint
