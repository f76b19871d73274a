#include "daemon/common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace perld::log {
namespace {

std::atomic<Level> g_level{Level::kInfo};

int SyslogPriority(Level level) {
  switch (level) {
    case Level::kDebug:
      return 7;
    case Level::kInfo:
      return 6;
    case Level::kWarning:
      return 4;
    case Level::kError:
      return 3;
  }
  return 6;
}

bool UnderJournal() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read once; nothing in perld sets it
  static const bool journal = std::getenv("JOURNAL_STREAM") != nullptr;
  return journal;
}

}  // namespace

const char* LevelName(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarning:
      return "warning";
    case Level::kError:
      return "error";
  }
  return "info";
}

std::optional<Level> ParseLevel(std::string_view name) {
  for (Level level : {Level::kDebug, Level::kInfo, Level::kWarning, Level::kError}) {
    if (name == LevelName(level)) return level;
  }
  return std::nullopt;
}

void SetLevel(Level level) { g_level.store(level, std::memory_order_relaxed); }
Level GetLevel() { return g_level.load(std::memory_order_relaxed); }
bool Enabled(Level level) { return level >= GetLevel(); }

void Write(Level level, std::string_view message) {
  std::string line;
  if (UnderJournal()) {
    line = absl::StrCat("<", SyslogPriority(level), ">");
  } else {
    line = absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
                        " ", LevelName(level), " ");
  }
  for (char c : message) line.push_back(c == '\n' ? ' ' : c);
  line.push_back('\n');
  const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
  static_cast<void>(written);  // nowhere left to report a failed log write
}

}  // namespace perld::log
