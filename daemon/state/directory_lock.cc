#include "daemon/state/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace perld::state {

absl::StatusOr<std::unique_ptr<DirectoryLock>> DirectoryLock::Acquire(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kFileName);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("state directory lock '", path, "'"));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    std::string holder(32, '\0');
    const ssize_t n = ::pread(fd, holder.data(), holder.size(), 0);
    ::close(fd);
    if (error != EWOULDBLOCK) {
      return absl::ErrnoToStatus(error, absl::StrCat("locking '", path, "'"));
    }
    holder.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return absl::FailedPreconditionError(
        absl::StrCat("state directory '", dir, "' is in use by another perld (pid ",
                     holder.empty() ? "unknown" : absl::StripAsciiWhitespace(holder), ", lock ",
                     path, "); stop it or choose another --state-dir"));
  }
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int error = errno;
    ::close(fd);
    return absl::ErrnoToStatus(error, absl::StrCat("writing '", path, "'"));
  }
  return std::unique_ptr<DirectoryLock>(new DirectoryLock(fd));
}

DirectoryLock::~DirectoryLock() { ::close(fd_); }

}  // namespace perld::state
