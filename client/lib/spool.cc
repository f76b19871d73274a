#include "client/lib/spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/crc32c.h"
#include "daemon/common/mutex.h"
#include "daemon/common/unique_fd.h"

namespace perld::client {
namespace {

constexpr size_t kReadChunk = size_t{4} << 20;      // a scan's read-ahead, at most
constexpr size_t kCursorChunk = size_t{256} << 10;  // a cursor's read-ahead

void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void PutU64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// The record's CRC covers the payload, then the 8 key bytes: the payload's
// part is computed before the appender takes the lock.
uint32_t PayloadCrc(std::string_view payload) { return common::Crc32c(payload); }
uint32_t WithKey(uint32_t payload_crc, const char* key_bytes) {
  return common::Crc32cExtend(payload_crc, std::string_view(key_bytes, 8));
}
uint32_t RecordCrc(const char* key_bytes, std::string_view payload) {
  return WithKey(PayloadCrc(payload), key_bytes);
}

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Takes `mu`, trying for a while before sleeping: the appenders hold it for
// a reservation (tens of nanoseconds), far less than a futex sleep and
// wake-up cost.
void LockSpinning(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (int i = 0; i < 16; ++i) {
    if (mu.TryLock()) return;
    for (int j = 0; j < 4; ++j) CpuRelax();
  }
  mu.Lock();
}

// Holds a Mutex for its scope, taken with LockSpinning.
class ABSL_SCOPED_LOCKABLE SpinningLock {
 public:
  explicit SpinningLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { LockSpinning(mu); }
  ~SpinningLock() ABSL_UNLOCK_FUNCTION() { mu_.Unlock(); }
  SpinningLock(const SpinningLock&) = delete;
  SpinningLock& operator=(const SpinningLock&) = delete;

 private:
  Mutex& mu_;
};

// Writes all of `data` at *offset, advancing it.
absl::Status WriteAt(int fd, std::string_view data, int64_t* offset, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = pwrite(fd, data.data(), data.size(), *offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("spool: cannot write ", path));
    data.remove_prefix(static_cast<size_t>(n));
    *offset += n;
  }
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, std::string_view data, const std::string& path) {
  int64_t offset = 0;
  return WriteAt(fd, data, &offset, path);
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("spool: cannot open ", dir));
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  if (rc != 0) return absl::ErrnoToStatus(err, absl::StrCat("spool: cannot sync ", dir));
  return absl::OkStatus();
}

std::string SegmentName(uint64_t first_key) {
  char name[40];
  std::snprintf(name, sizeof(name), "seg-%020" PRIu64 ".log", first_key);
  return name;
}

// What a scan of one segment found: the valid prefix and its last key.
struct Scan {
  int64_t valid_bytes = 0;
  int64_t file_bytes = 0;
  uint64_t last_key = 0;
  uint64_t records = 0;
  bool torn = false;  // a record past valid_bytes is incomplete or wrong
};

// Reads `path` record by record, calling `visit` (may be empty) for each
// valid one, whose key must exceed `after`. Stops at the first bad record.
absl::StatusOr<Scan> ScanSegment(const std::string& path, uint64_t after, uint32_t max_record,
                                 const std::function<bool(uint64_t, std::string_view)>& visit) {
  const common::UniqueFd owned(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  const int fd = owned.get();
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("spool: cannot open ", path));
  struct stat st = {};
  if (fstat(fd, &st) != 0)
    return absl::ErrnoToStatus(errno, absl::StrCat("spool: cannot stat ", path));
  Scan scan;
  scan.file_bytes = st.st_size;
  scan.last_key = after;
  std::string buf;
  size_t start = 0;  // unparsed bytes begin here in buf
  int64_t offset = 0;
  bool eof = false;
  for (;;) {
    // Parse every complete record in buf[start, end).
    while (buf.size() - start >= Spool::kHeaderBytes) {
      const char* h = buf.data() + start;
      const uint32_t length = GetU32(h);
      const uint32_t crc = GetU32(h + 4);
      const uint64_t key = GetU64(h + 8);
      if (length > max_record || key <= scan.last_key) {
        scan.torn = true;
        break;
      }
      if (buf.size() - start < Spool::kHeaderBytes + length) break;  // need more
      const std::string_view payload(h + Spool::kHeaderBytes, length);
      if (RecordCrc(h + 8, payload) != crc) {
        scan.torn = true;
        break;
      }
      scan.last_key = key;
      ++scan.records;
      const size_t size = Spool::kHeaderBytes + length;
      start += size;
      offset += static_cast<int64_t>(size);
      scan.valid_bytes = offset;
      if (visit && !visit(key, payload)) return scan;
    }
    if (scan.torn || eof) break;
    buf.erase(0, start);
    start = 0;
    const size_t have = buf.size();
    // At most what is left of the file: a small segment costs a small buffer.
    const size_t chunk = static_cast<size_t>(
        std::clamp<int64_t>(scan.file_bytes - offset - static_cast<int64_t>(have), 16,
                            static_cast<int64_t>(kReadChunk)));
    buf.resize(have + chunk);
    ssize_t n = 0;
    do {
      n = read(fd, buf.data() + have, chunk);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("spool: cannot read ", path));
    buf.resize(have + static_cast<size_t>(n));
    eof = n == 0;
  }
  if (scan.valid_bytes < scan.file_bytes) scan.torn = true;  // an incomplete tail
  return scan;
}

}  // namespace

Spool::Spool(Options options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Spool>> Spool::Open(const Options& options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("spool: no directory");
  if (options.batch_appends < 1 || options.batch_ms < 1) {
    return absl::InvalidArgumentError("spool: batch_appends and batch_ms must be >= 1");
  }
  if (options.segment_bytes < 4096 || options.max_bytes < 2 * options.segment_bytes) {
    return absl::InvalidArgumentError(
        "spool: segment_bytes must be >= 4096 and max_bytes at least twice segment_bytes");
  }
  if (mkdir(options.dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("spool: cannot create ", options.dir));
  }
  std::unique_ptr<Spool> spool(new Spool(options));
  if (absl::Status s = spool->Recover(); !s.ok()) return s;
  if (options.mode == SpoolMode::kBatched) {
    spool->flusher_ = std::thread([raw = spool.get()] { raw->FlusherLoop(); });
  }
  return spool;
}

absl::Status Spool::Recover() {
  // Before the spool is shared (Open): the locks cost nothing and keep the
  // analysis simple.
  MutexLock lock(mu_);
  MutexLock io(io_mu_);
  {
    const std::string path = options_.dir + "/meta";
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char chunk[4096];
      ssize_t n = 0;
      while ((n = read(fd, chunk, sizeof(chunk))) > 0) meta_.append(chunk, static_cast<size_t>(n));
      close(fd);
    }
  }
  std::vector<std::pair<uint64_t, std::string>> files;
  DIR* dir = opendir(options_.dir.c_str());
  if (dir == nullptr)
    return absl::ErrnoToStatus(errno, absl::StrCat("spool: cannot read ", options_.dir));
  // readdir on a stream this thread owns is safe (glibc: per-DIR state).
  while (const dirent* entry = readdir(dir)) {  // NOLINT(concurrency-mt-unsafe)
    uint64_t first = 0;
    char tail = 0;
    if (std::sscanf(entry->d_name, "seg-%20" SCNu64 ".lo%c", &first, &tail) == 2 && tail == 'g' &&
        std::string_view(entry->d_name) == SegmentName(first)) {
      files.emplace_back(first, options_.dir + "/" + entry->d_name);
    } else if (std::string_view(entry->d_name).rfind("free-", 0) == 0) {
      unlink((options_.dir + "/" + entry->d_name).c_str());  // an earlier life's spare file
    }
  }
  closedir(dir);
  std::sort(files.begin(), files.end());
  uint64_t last = 0;
  bool broken = false;
  for (const auto& [first, path] : files) {
    if (broken) {  // after a bad record nothing is trusted
      struct stat st = {};
      if (stat(path.c_str(), &st) == 0) truncated_bytes_ += static_cast<uint64_t>(st.st_size);
      unlink(path.c_str());
      continue;
    }
    absl::StatusOr<Scan> scan = ScanSegment(path, last, options_.max_record_bytes, {});
    if (!scan.ok()) return scan.status();
    if (scan->torn) {
      truncated_bytes_ += static_cast<uint64_t>(scan->file_bytes - scan->valid_bytes);
      if (truncate(path.c_str(), scan->valid_bytes) != 0) {
        return absl::ErrnoToStatus(errno,
                                   absl::StrCat("spool: cannot truncate the torn tail of ", path));
      }
      broken = true;
    }
    if (scan->records == 0) {
      unlink(path.c_str());
      continue;
    }
    records_recovered_ += scan->records;
    total_bytes_ += scan->valid_bytes;
    segments_.push_back(Segment{first, scan->last_key, scan->valid_bytes, path});
    last = scan->last_key;
  }
  if (!segments_.empty()) {
    // What was read is made durable before it counts as such.
    for (const Segment& s : segments_) {
      const int fd = open(s.path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        fdatasync(fd);
        close(fd);
      }
    }
    fd_ = open(segments_.back().path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0)
      return absl::ErrnoToStatus(errno, absl::StrCat("spool: cannot open ", segments_.back().path));
    write_offset_ = segments_.back().bytes;
    fd_path_ = segments_.back().path;
  }
  if (absl::Status s = SyncDirectory(options_.dir); !s.ok()) return s;
  durable_key_.store(last, std::memory_order_release);
  written_key_.store(last, std::memory_order_release);
  buffered_last_key_ = last;
  io_last_key_ = last;
  return absl::OkStatus();
}

Spool::~Spool() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  flusher_cv_.NotifyAll();
  if (flusher_.joinable()) flusher_.join();
  MutexLock lock(mu_);
  if (HasUnwritten() && io_error_.ok()) (void)Flush(/*sync=*/true);
  MutexLock io(io_mu_);
  if (fd_ >= 0) {
    (void)CloseActive();
  }
  for (const std::string& path : free_) unlink(path.c_str());
}

absl::Status Spool::CloseActive() {
  // A recycled file holds an earlier life's bytes past the valid end: cut
  // them, durably, so a closed segment ends at its last record.
  absl::Status status;
  if (ftruncate(fd_, write_offset_) != 0 || fsync(fd_) != 0) {
    status = absl::ErrnoToStatus(errno, "spool: cannot close a segment at its end");
  }
  close(fd_);
  fd_ = -1;
  return status;
}

uint64_t Spool::last_key() const {
  MutexLock lock(mu_);
  return buffered_last_key_;
}

int64_t Spool::bytes() const {
  MutexLock lock(mu_);
  return total_bytes_;
}

absl::Status Spool::OpenActive(uint64_t first_key) {
  if (fd_ >= 0) {
    if (absl::Status s = CloseActive(); !s.ok()) return s;
  }
  const std::string path = options_.dir + "/" + SegmentName(first_key);
  int fd = -1;
  // A released segment's file is overwritten in place: its pages are in
  // the page cache and its blocks allocated, so writing it costs a copy.
  while (fd < 0 && !free_.empty()) {
    if (rename(free_.front().c_str(), path.c_str()) == 0) {
      fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    } else {
      unlink(free_.front().c_str());
    }
    free_.pop_front();
  }
  if (fd < 0) fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("spool: cannot create ", path));
  if (absl::Status s = SyncDirectory(options_.dir); !s.ok()) {
    close(fd);
    return s;
  }
  fd_ = fd;
  write_offset_ = 0;
  fd_path_ = path;
  segments_.push_back(Segment{first_key, 0, 0, path});
  return absl::OkStatus();
}

bool Spool::HasUnwritten() {
  if (active_ != nullptr && active_->reserved > 0) return true;
  MutexLock queue(queue_mu_);
  return !queued_.empty();
}

void Spool::DetachActive() {
  if (active_ == nullptr || active_->reserved == 0) return;
  MutexLock queue(queue_mu_);
  queued_.push_back(std::move(active_));
}

bool Spool::TakeBlock(size_t size) {
  MutexLock queue(queue_mu_);
  if (active_ != nullptr) {  // empty, too small for `size`: an oversized block goes
    if (active_->capacity == kBlockBytes) {
      free_blocks_.push_back(std::move(active_));
    } else {
      active_.reset();
    }
  }
  if (size > kBlockBytes) {  // a record larger than a block gets one of its own
    active_ = std::make_unique<Block>(size);
    return true;
  }
  if (!free_blocks_.empty()) {
    active_ = std::move(free_blocks_.back());
    free_blocks_.pop_back();
    return true;
  }
  if (blocks_ >= kMaxBlocks) return false;
  ++blocks_;
  active_ = std::make_unique<Block>(kBlockBytes);
  return true;
}

absl::Status Spool::WriteQueued(bool sync) {
  for (;;) {
    std::unique_ptr<Block> block;
    {
      MutexLock queue(queue_mu_);
      if (queued_.empty()) break;
      block = std::move(queued_.front());
      queued_.pop_front();
    }
    // Detached under mu_: `reserved` is final; wait for the copies still
    // under way (a few hundred nanoseconds each, never blocked on a lock).
    const size_t bytes = block->reserved;
    for (int spins = 0; block->filled.load(std::memory_order_acquire) != bytes; ++spins) {
      if (spins < 100) {
        CpuRelax();
      } else {
        std::this_thread::yield();
      }
    }
    if (io_failed_.ok()) {
      const int64_t at = write_offset_;
      io_failed_ =
          WriteAt(fd_, std::string_view(block->data.get(), bytes), &write_offset_, fd_path_);
      if (io_failed_.ok()) {
        // Batched: start the device on these pages now, so the commit's
        // fdatasync waits only for what it has not taken yet and the next
        // blocks are copied into the page cache while it works. Advisory:
        // a failure changes nothing, the fdatasync is what makes it durable.
        if (options_.mode == SpoolMode::kBatched) {
          sync_file_range(fd_, at, static_cast<off_t>(bytes), SYNC_FILE_RANGE_WRITE);
        }
        io_last_key_ = block->last_key;
        written_key_.store(io_last_key_, std::memory_order_release);
      }
    }
    block->reserved = 0;
    block->last_key = 0;
    block->filled.store(0, std::memory_order_relaxed);
    if (block->capacity == kBlockBytes) {
      MutexLock queue(queue_mu_);
      free_blocks_.push_back(std::move(block));
    }
  }
  if (!io_failed_.ok()) return io_failed_;
  if (sync) {
    if (fd_ >= 0 && fdatasync(fd_) != 0) {
      io_failed_ = absl::ErrnoToStatus(errno, absl::StrCat("spool: cannot sync ", fd_path_));
      return io_failed_;
    }
    if (io_last_key_ > durable_key_.load(std::memory_order_relaxed)) {
      durable_key_.store(io_last_key_, std::memory_order_release);
    }
  }
  return absl::OkStatus();
}

absl::Status Spool::Flush(bool sync) {
  DetachActive();
  if (sync) appends_since_commit_ = 0;
  mu_.Unlock();
  absl::Status status;
  {
    MutexLock io(io_mu_);
    status = WriteQueued(sync);
  }
  mu_.Lock();
  if (!status.ok()) {
    io_error_ = status;
    synced_cv_.NotifyAll();
    return status;
  }
  if (sync) {
    commits_.fetch_add(1, std::memory_order_relaxed);
    synced_cv_.NotifyAll();
  }
  return absl::OkStatus();
}

absl::Status Spool::Append(uint64_t key, std::string_view payload) {
  if (key == 0) return absl::InvalidArgumentError("spool: key 0 is not a key");
  uint64_t used = 0;
  return AppendImpl(key, payload, &used);
}

absl::StatusOr<uint64_t> Spool::Append(std::string_view payload) {
  uint64_t used = 0;
  if (absl::Status s = AppendImpl(0, payload, &used); !s.ok()) return s;
  return used;
}

absl::Status Spool::AppendImpl(uint64_t key, std::string_view payload, uint64_t* used) {
  if (payload.size() > options_.max_record_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("spool: a record of ", payload.size(),
                                                   " bytes is over ", options_.max_record_bytes));
  }
  const uint32_t payload_crc = PayloadCrc(payload);  // outside the lock
  const size_t size = kHeaderBytes + payload.size();
  const bool next = key == 0;
  Block* block = nullptr;
  size_t offset = 0;
  {
    SpinningLock lock(mu_);
    // Every wait below (a flush, a new segment) releases mu_: the checks
    // start over after it.
    for (;;) {
      if (!io_error_.ok()) return io_error_;
      if (next) key = buffered_last_key_ + 1;
      if (key <= buffered_last_key_) {
        return absl::InvalidArgumentError(
            absl::StrCat("spool: key ", key, " does not follow the last key ", buffered_last_key_));
      }
      if (total_bytes_ + static_cast<int64_t>(size) > options_.max_bytes) {
        full_refusals_.fetch_add(1, std::memory_order_relaxed);
        return absl::ResourceExhaustedError(
            absl::StrCat("spool: full (", total_bytes_, " of ", options_.max_bytes, " bytes)"));
      }
      // A new segment when there is none or the active one is full: what
      // the old one holds is written and synced first.
      if (segments_.empty() || segments_.back().bytes >= options_.segment_bytes) {
        if (HasUnwritten()) {
          if (absl::Status s = Flush(/*sync=*/true); !s.ok()) return s;
          continue;
        }
        MutexLock io(io_mu_);
        // Blocks detached before this thread took mu_ may still be queued
        // (their writer waits for io_mu_): they belong to the old segment.
        absl::Status s = WriteQueued(/*sync=*/true);
        if (s.ok()) s = OpenActive(key);
        if (!s.ok()) {
          io_error_ = s;
          return s;
        }
        continue;
      }
      if (active_ == nullptr || active_->capacity - active_->reserved < size) {
        if (active_ != nullptr && active_->reserved > 0) {
          DetachActive();  // full: the flusher writes it
          flusher_cv_.NotifyOne();
        }
        if (!TakeBlock(size)) {  // every block is queued: write them here
          if (absl::Status s = Flush(/*sync=*/false); !s.ok()) return s;
          continue;
        }
      }
      break;
    }
    block = active_.get();
    offset = block->reserved;
    block->reserved += size;
    block->last_key = key;
    Segment& active = segments_.back();
    active.bytes += static_cast<int64_t>(size);
    total_bytes_ += static_cast<int64_t>(size);
    active.last_key = key;
    buffered_last_key_ = key;
    *used = key;
    ++appends_since_commit_;
    if (options_.mode == SpoolMode::kBatched && appends_since_commit_ == options_.batch_appends) {
      flusher_cv_.NotifyOne();
    }
  }
  // The reservation is this thread's: no lock while the record is copied.
  char* p = block->data.get() + offset;
  PutU32(p, static_cast<uint32_t>(payload.size()));
  PutU64(p + 8, key);
  PutU32(p + 4, WithKey(payload_crc, p + 8));
  if (!payload.empty()) std::memcpy(p + kHeaderBytes, payload.data(), payload.size());
  block->filled.fetch_add(size, std::memory_order_release);
  if (options_.mode == SpoolMode::kBatched) {
    // The group commit runs on the flusher thread, beside the appenders.
    return absl::OkStatus();
  }
  // Synced: one thread syncs for everyone waiting (group commit).
  MutexLock lock(mu_);
  while (durable_key_.load(std::memory_order_acquire) < key) {
    if (!io_error_.ok()) return io_error_;
    if (syncing_) {
      synced_cv_.Wait(mu_);
      continue;
    }
    syncing_ = true;
    absl::Status s = Flush(/*sync=*/true);
    syncing_ = false;
    synced_cv_.NotifyAll();
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Spool::WriteThrough(uint64_t key) {
  if (written_key_.load(std::memory_order_acquire) >= key) return absl::OkStatus();
  MutexLock lock(mu_);
  if (!io_error_.ok()) return io_error_;
  if (written_key_.load(std::memory_order_acquire) >= key) return absl::OkStatus();
  // Also with nothing buffered: another thread's Flush holds the records
  // and writes them under io_mu_ before this one gets it.
  return Flush(/*sync=*/false);
}

uint64_t Spool::first_key() const {
  MutexLock lock(mu_);
  if (segments_.empty()) return 0;
  const Segment& s = segments_.front();
  return s.last_key == 0 ? 0 : s.first_key;
}

absl::Status Spool::Commit() {
  MutexLock lock(mu_);
  if (!io_error_.ok()) return io_error_;
  if (buffered_last_key_ <= durable_key_.load(std::memory_order_acquire)) {
    return absl::OkStatus();
  }
  return Flush(/*sync=*/true);
}

void Spool::Release(uint64_t key) {
  MutexLock lock(mu_);
  while (segments_.size() > 1 && segments_.front().last_key <= key) {
    const std::string& path = segments_.front().path;
    std::string spare = absl::StrCat(options_.dir, "/free-", ++free_count_, ".log");
    if (free_.size() < kMaxFreeSegments && rename(path.c_str(), spare.c_str()) == 0) {
      free_.push_back(std::move(spare));
    } else {
      unlink(path.c_str());
    }
    total_bytes_ -= segments_.front().bytes;
    segments_.pop_front();
  }
}

absl::Status Spool::SetMeta(const std::string& bytes) {
  const std::string path = options_.dir + "/meta";
  const std::string temp = path + ".tmp";
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("spool: cannot create ", temp));
  absl::Status s = WriteAll(fd, bytes, temp);
  if (s.ok() && fdatasync(fd) != 0)
    s = absl::ErrnoToStatus(errno, absl::StrCat("spool: cannot sync ", temp));
  close(fd);
  if (s.ok() && rename(temp.c_str(), path.c_str()) != 0) {
    s = absl::ErrnoToStatus(errno, absl::StrCat("spool: cannot rename ", temp));
  }
  if (s.ok()) s = SyncDirectory(options_.dir);
  if (s.ok()) meta_ = bytes;
  return s;
}

absl::Status Spool::Reset() {
  MutexLock lock(mu_);
  unlink((options_.dir + "/meta").c_str());
  meta_.clear();
  MutexLock io(io_mu_);
  // What is buffered is dropped: the active block (its copies finished;
  // appends must not run concurrently) and the queue.
  {
    MutexLock queue(queue_mu_);
    if (active_ != nullptr) queued_.push_back(std::move(active_));
    for (std::unique_ptr<Block>& block : queued_) {
      while (block->filled.load(std::memory_order_acquire) != block->reserved) {
        std::this_thread::yield();
      }
      block->reserved = 0;
      block->last_key = 0;
      block->filled.store(0, std::memory_order_relaxed);
      if (block->capacity == kBlockBytes) free_blocks_.push_back(std::move(block));
    }
    queued_.clear();
  }
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  write_offset_ = 0;
  fd_path_.clear();
  io_last_key_ = 0;
  io_failed_ = absl::OkStatus();
  // Spare files go too: a later life's keys restart at 1, below theirs.
  for (const std::string& path : free_) unlink(path.c_str());
  free_.clear();
  for (const Segment& s : segments_) unlink(s.path.c_str());
  segments_.clear();
  total_bytes_ = 0;
  buffered_last_key_ = 0;
  appends_since_commit_ = 0;
  durable_key_.store(0, std::memory_order_release);
  written_key_.store(0, std::memory_order_release);
  return SyncDirectory(options_.dir);
}

absl::Status Spool::ForEach(
    const std::function<bool(uint64_t key, std::string_view payload)>& visit) {
  std::vector<Segment> segments;
  {
    MutexLock lock(mu_);
    if (buffered_last_key_ > written_key_.load(std::memory_order_acquire)) {
      if (absl::Status s = Flush(/*sync=*/false); !s.ok()) return s;
    }
    segments.assign(segments_.begin(), segments_.end());
  }
  bool more = true;
  uint64_t after = 0;
  for (const Segment& segment : segments) {
    absl::StatusOr<Scan> scan = ScanSegment(segment.path, after, options_.max_record_bytes,
                                            [&](uint64_t key, std::string_view payload) {
                                              more = visit(key, payload);
                                              return more;
                                            });
    if (!scan.ok()) return scan.status();
    if (!more) break;
    after = scan->last_key;
  }
  return absl::OkStatus();
}

Spool::Cursor::~Cursor() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<bool> Spool::Cursor::Next(uint64_t* key, std::string* payload) {
  bool reread = false;  // a closed segment is read once more before it is left
  for (;;) {
    if (fd_ < 0) {  // the segment holding the first key above last_
      std::string next_path;
      uint64_t first = 0;
      {
        MutexLock lock(spool_.mu_);
        for (const Segment& s : spool_.segments_) {
          if (s.last_key > last_) {
            next_path = s.path;
            first = s.first_key;
            break;
          }
        }
      }
      if (next_path.empty()) return false;
      fd_ = open(next_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0)
        return absl::ErrnoToStatus(errno, absl::StrCat("spool: cannot open ", next_path));
      path_ = next_path;
      offset_ = 0;
      // A recycled file holds an earlier life's records (keys below the
      // segment's first) until they are overwritten: they are not this
      // segment's, and reading past them would skip the records written
      // over them.
      segment_last_ = first - 1;
      buf_.clear();
      buf_offset_ = 0;
    }
    // Bytes [offset_, offset_ + n) in buf_, reading ahead in large chunks.
    auto have = [&](size_t n) -> absl::StatusOr<bool> {
      const int64_t want_end = offset_ + static_cast<int64_t>(n);
      if (buf_offset_ + static_cast<int64_t>(buf_.size()) >= want_end) return true;
      buf_.erase(0, static_cast<size_t>(offset_ - buf_offset_));
      buf_offset_ = offset_;
      const size_t old = buf_.size();
      buf_.resize(std::max(n, old + kCursorChunk));
      ssize_t got = 0;
      do {
        got = pread(fd_, buf_.data() + old, buf_.size() - old,
                    buf_offset_ + static_cast<int64_t>(old));
      } while (got < 0 && errno == EINTR);
      if (got < 0) return absl::ErrnoToStatus(errno, absl::StrCat("spool: cannot read ", path_));
      buf_.resize(old + static_cast<size_t>(got));
      return buf_.size() >= n;
    };
    // A record continues the segment when it is complete, sane, passes its
    // CRC and its key rises; anything else at offset_ is not written yet
    // (or, in a file being reused, an earlier life's bytes).
    bool valid = false;
    uint32_t length = 0;
    absl::StatusOr<bool> header = have(kHeaderBytes);
    if (!header.ok()) return header.status();
    if (*header) {
      const char* h = buf_.data() + (offset_ - buf_offset_);
      length = GetU32(h);
      if (length <= spool_.options_.max_record_bytes && GetU64(h + 8) > segment_last_) {
        absl::StatusOr<bool> whole = have(kHeaderBytes + length);
        if (!whole.ok()) return whole.status();
        h = buf_.data() + (offset_ - buf_offset_);
        valid =
            *whole && RecordCrc(h + 8, std::string_view(h + kHeaderBytes, length)) == GetU32(h + 4);
      }
    }
    if (!valid) {
      buf_.resize(static_cast<size_t>(offset_ - buf_offset_));  // read it again next time
      bool closed = false;
      {
        MutexLock lock(spool_.mu_);
        closed = spool_.segments_.empty() || spool_.segments_.back().path != path_;
      }
      if (!closed) return false;
      if (!reread) {  // it may have been completed before it closed
        reread = true;
        continue;
      }
      reread = false;
      close(fd_);
      fd_ = -1;
      continue;
    }
    const char* h = buf_.data() + (offset_ - buf_offset_);
    offset_ += static_cast<int64_t>(kHeaderBytes + length);
    const uint64_t k = GetU64(h + 8);
    segment_last_ = k;
    if (k <= last_) continue;  // before the cursor's start
    last_ = k;
    *key = k;
    payload->assign(h + kHeaderBytes, length);
    return true;
  }
}

void Spool::FlusherLoop() {
  MutexLock lock(mu_);
  const auto period = std::chrono::milliseconds(options_.batch_ms);
  auto next_commit = std::chrono::steady_clock::now() + period;
  while (!stop_) {
    // Woken for a commit (batch_appends appends, or batch_ms passed) or for
    // a full block (written without a sync, so that appenders find free ones).
    flusher_cv_.WaitUntil(mu_, next_commit, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (stop_) return true;
      if (!io_error_.ok()) return false;  // nothing more to write
      if (appends_since_commit_ >= options_.batch_appends) return true;
      MutexLock queue(queue_mu_);
      return !queued_.empty();
    });
    if (stop_) break;
    const auto now = std::chrono::steady_clock::now();
    const bool commit = appends_since_commit_ >= options_.batch_appends || now >= next_commit;
    if (commit) next_commit = now + period;
    if (!io_error_.ok()) continue;
    if (commit) {
      if (buffered_last_key_ > durable_key_.load(std::memory_order_acquire)) {
        (void)Flush(/*sync=*/true);
      } else {
        appends_since_commit_ = 0;  // already durable (a segment closed): nothing to wait for
      }
    } else {
      (void)Flush(/*sync=*/false);
    }
  }
}

}  // namespace perld::client
