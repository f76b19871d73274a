// powercut_preload: an LD_PRELOAD library for power-loss tests. For every
// regular file under $PERLD_POWERCUT_WATCH it keeps the file's content as
// of its last successful fsync/fdatasync, as a copy under
// $PERLD_POWERCUT_SHADOW (the same relative path). After the process is
// killed, a test rebuilds the watched directory from those copies
// (tests/integration/durability_test.py: files never synced are gone, the
// others hold what their last sync made durable) -- what a power loss, or a
// kernel crash, would have left -- and restarts the daemon on it.
//
// Not modelled: directory entries (a file synced once keeps its name), and
// ordering inside one file between syncs (the copy is the whole file at the
// sync, a conservative model for SQLite's WAL and perld's spool, which only
// count on what a sync returned).
//
// Threads: any; copies are serialized by one mutex. Test tool only: never
// linked into perld.
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

using SyncFn = int (*)(int);

std::mutex& CopyMutex() {
  static std::mutex mu;
  return mu;
}

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void MakeParents(const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    mkdir(path.substr(0, slash).c_str(), 0700);
  }
}

// Copies the file behind `fd` to the shadow tree when it is watched.
void Snapshot(int fd) {
  const char* watch = std::getenv("PERLD_POWERCUT_WATCH");
  const char* shadow = std::getenv("PERLD_POWERCUT_SHADOW");
  if (watch == nullptr || shadow == nullptr) return;
  struct stat st = {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
  char link[64];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  char target[PATH_MAX];
  const ssize_t n = readlink(link, target, sizeof(target) - 1);
  if (n <= 0) return;
  target[n] = '\0';
  const std::string path(target);
  const std::string prefix = std::string(watch) + "/";
  if (path.compare(0, prefix.size(), prefix) != 0) return;
  const std::string copy = std::string(shadow) + "/" + path.substr(prefix.size());
  std::lock_guard<std::mutex> lock(CopyMutex());
  const int in = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return;
  MakeParents(copy);
  const std::string temp = copy + ".powercut-tmp";
  const int out = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = out >= 0;
  char buf[1 << 16];
  while (ok) {
    const ssize_t r = read(in, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ok = r == 0;
      break;
    }
    ok = WriteAll(out, buf, static_cast<size_t>(r));
  }
  close(in);
  if (out >= 0) close(out);
  if (ok) rename(temp.c_str(), copy.c_str());
}

int Sync(const char* name, int fd) {
  static SyncFn real_fsync = reinterpret_cast<SyncFn>(dlsym(RTLD_NEXT, "fsync"));
  static SyncFn real_fdatasync = reinterpret_cast<SyncFn>(dlsym(RTLD_NEXT, "fdatasync"));
  const SyncFn real = std::strcmp(name, "fsync") == 0 ? real_fsync : real_fdatasync;
  const int rc = real(fd);
  if (rc == 0) {
    const int saved = errno;
    Snapshot(fd);
    errno = saved;
  }
  return rc;
}

}  // namespace

extern "C" {
int fsync(int fd) { return Sync("fsync", fd); }
int fdatasync(int fd) { return Sync("fdatasync", fd); }
}
