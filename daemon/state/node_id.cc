#include "daemon/state/node_id.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/common/unique_fd.h"

namespace perld::state {
namespace {

constexpr size_t kMaxNodeIdBytes = 128;

bool ValidNodeId(const std::string& id) {
  if (id.empty() || id.size() > kMaxNodeIdBytes) return false;
  for (const char c : id) {
    if (c <= ' ' || c > '~' || c == '/') return false;
  }
  return true;
}

absl::Status WriteAll(int fd, const std::string& text, const std::string& path) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", path));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Writes `id` to `path` so that a crash leaves either no file or the whole one.
absl::Status WriteDurably(const std::string& dir, const std::string& path, const std::string& id) {
  const std::string temp = path + ".tmp";
  {
    common::UniqueFd fd(open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", temp));
    if (absl::Status s = WriteAll(fd.get(), id + "\n", temp); !s.ok()) return s;
    if (fsync(fd.get()) != 0)
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot fsync ", temp));
    if (close(fd.release()) != 0)
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot close ", temp));
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot rename ", temp, " to ", path));
  }
  common::UniqueFd directory(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (directory.get() < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", dir));
  if (fsync(directory.get()) != 0)
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot fsync ", dir));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> RandomUuid() {
  std::array<uint8_t, 16> b{};
  size_t done = 0;
  while (done < b.size()) {
    const ssize_t n = getrandom(b.data() + done, b.size() - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, "getrandom");
    done += static_cast<size_t>(n);
  }
  b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);  // variant RFC 4122
  return absl::StrFormat("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                         b[12], b[13], b[14], b[15]);
}

absl::StatusOr<std::string> StoredNodeId(const std::string& state_dir) {
  const std::string path = absl::StrCat(state_dir, "/", kNodeIdFile);
  common::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() >= 0) {
    std::string text(kMaxNodeIdBytes + 2, '\0');
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = read(fd.get(), text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", path));
      if (n == 0) break;
      done += static_cast<size_t>(n);
    }
    text.resize(done);
    const std::string id(absl::StripAsciiWhitespace(text));
    if (!ValidNodeId(id)) {
      return absl::DataLossError(absl::StrCat(
          path, " does not hold a node id (one line of 1..", kMaxNodeIdBytes,
          " printable characters, no '/'): restore it, or set upstream.nodeId (the parent "
          "knows this edge by its id)"));
    }
    return id;
  }
  if (errno != ENOENT) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  absl::StatusOr<std::string> id = RandomUuid();
  if (!id.ok()) return id.status();
  if (absl::Status s = WriteDurably(state_dir, path, *id); !s.ok()) return s;
  return id;
}

absl::StatusOr<std::string> ResolveNodeId(const std::string& configured, const char* env,
                                          const std::string& state_dir) {
  if (!configured.empty()) return configured;
  if (env != nullptr && env[0] != '\0') return std::string(env);
  return StoredNodeId(state_dir);
}

}  // namespace perld::state
