#include "daemon/common/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/common/unique_fd.h"

namespace perld::common {
namespace {

// Reads at most `limit` bytes of `path`; `secret` also refuses a file that
// grants anything to others. Errors name the file and `what`, never content.
absl::StatusOr<std::string> ReadLimited(const std::string& path, const std::string& what,
                                        size_t limit, bool secret) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no file named"));
  const UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return absl::ErrnoToStatus(errno, absl::StrCat(what, " ", path, ": cannot open"));
  }
  struct stat st = {};
  if (fstat(fd.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(what, " ", path, ": cannot stat"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": not a regular file"));
  }
  if (secret && (st.st_mode & 0007) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s %s: mode %04o grants access to others; a secret file must not (chmod o-rwx %s)", what,
        path, st.st_mode & 07777, path));
  }
  if (static_cast<uint64_t>(st.st_size) > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": larger than ", limit, " bytes"));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = read(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat(what, " ", path, ": cannot read"));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what) {
  return ReadLimited(path, what, kMaxSecretFileBytes, /*secret=*/true);
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what) {
  return ReadLimited(path, what, kMaxPemFileBytes, /*secret=*/false);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& what) {
  absl::StatusOr<std::string> text = ReadSecretFile(path, what);
  if (!text.ok()) return text.status();
  const std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": the file holds no token"));
  }
  for (const char c : token) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " ", path, ": a token is one word of printable ASCII (no spaces, no line breaks)"));
    }
  }
  return token;
}

}  // namespace perld::common
