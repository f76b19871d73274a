// DirectoryLock: one daemon per state directory. Holds an exclusive flock(2)
// on DIR/perld.lock for its lifetime; the file records the holder's pid so a
// refused second daemon can say who holds it. The kernel drops the lock when
// the holder exits, however it exits (kill -9 included), so a stale lock
// file never blocks a restart.
//
// Threads: create and destroy on one thread; nothing else to call.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace perld::state {

class DirectoryLock {
 public:
  static constexpr char kFileName[] = "perld.lock";

  // FailedPrecondition naming the directory and the holder's pid when
  // another process holds the lock; an errno-based error when the lock file
  // cannot be created.
  static absl::StatusOr<std::unique_ptr<DirectoryLock>> Acquire(const std::string& dir);

  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  explicit DirectoryLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace perld::state
