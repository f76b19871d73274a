// The daemon's log: one event per line on stderr, with a level. The level
// is also the configuration's logLevel (config::DaemonConfig::log_level).
//
// Format: "2026-12-03T07:57:00.123Z info <message>" on a terminal or a file;
// under systemd's journal (JOURNAL_STREAM is set) "<6><message>": the syslog
// priority as a prefix, no timestamp (journald adds its own). Messages never
// contain a newline (replaced by a space), so every event is one greppable
// line.
//
// Threads: thread-safe; a line is written with one write(2).
#pragma once

#include <optional>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace perld::log {

enum class Level { kDebug, kInfo, kWarning, kError };
const char* LevelName(Level level);  // "debug", "info", "warning", "error"
// The level named `name` (exactly one of LevelName's spellings), or nullopt.
std::optional<Level> ParseLevel(std::string_view name);

void SetLevel(Level level);
Level GetLevel();
bool Enabled(Level level);
void Write(Level level, std::string_view message);

template <typename... Args>
void Debug(const Args&... args) {
  if (Enabled(Level::kDebug)) Write(Level::kDebug, absl::StrCat(args...));
}
template <typename... Args>
void Info(const Args&... args) {
  if (Enabled(Level::kInfo)) Write(Level::kInfo, absl::StrCat(args...));
}
template <typename... Args>
void Warning(const Args&... args) {
  if (Enabled(Level::kWarning)) Write(Level::kWarning, absl::StrCat(args...));
}
template <typename... Args>
void Error(const Args&... args) {
  Write(Level::kError, absl::StrCat(args...));
}

}  // namespace perld::log
