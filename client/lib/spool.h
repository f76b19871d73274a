// Spool: a durable, file-backed FIFO of keyed records -- the client's
// Ingest messages not yet durable (key = sequence number), appended before
// they are sent, released once the daemon reports them durable, replayed in
// order after a reconnect or a restart of the client process.
//
// Layout: DIR/seg-<first key, 20 digits>.log, appended in key order. A
// record is a 16-byte header -- u32 payload length, u32 CRC32C of the
// payload followed by the 8 key bytes, u64 key, little-endian -- and the
// payload. Keys strictly increase across the spool.
//
// Durability (Options::mode):
//   kSynced  -- Append returns once the record is on the device (fdatasync).
//               Concurrent appenders share one fdatasync (group commit).
//   kBatched -- Append returns once the record is buffered; a group commit
//               (write + fdatasync) runs on a flusher thread once
//               batch_appends appends are waiting and at least every
//               batch_ms, and at Commit(). Appenders never wait for a sync
//               while the flusher keeps up; when every append buffer is
//               full (kMaxBlocks of kBlockBytes) an appender writes them
//               itself.
//   durable_key() is the highest key known to be on the device;
//   written_key() the highest written to a file (safe from a process kill).
//
// Append path (both modes): an appender takes mu_ only to check the key
// and the bounds and to reserve the record's bytes in the active append
// buffer (a fixed 4 MiB block, reused); it writes the header and payload
// into its reservation after mu_ is released and then marks them filled.
// A full block is handed whole to the writers' queue (in reservation
// order, which is key order) and the appender takes a free block. Whoever
// writes (the flusher, a committing or WriteThrough caller, an appender
// when no block is free) holds io_mu_, takes the queued blocks in order,
// waits until every reservation in one is filled, and writes it: the files
// hold the records in key order, each block after the previous one. In a
// batched spool each block written is handed to the device at once
// (sync_file_range WRITE, which does not wait), so the device works while
// the next blocks are copied into the page cache, and a commit's fdatasync
// waits only for what it has not taken yet (tests/bench/SPOOL.md, "The
// device is the bound").
//
// Recovery (Open): every segment is read; the first record whose header is
// incomplete, whose length is impossible, whose CRC fails or whose key does
// not increase ends the spool: the file is truncated there (a torn tail
// after a crash) and any later segment is removed; both are counted
// (truncated_bytes(), and a torn tail is never returned as data).
//
// Bound: max_bytes of segment files. An Append that would pass it fails
// with RESOURCE_EXHAUSTED and is counted (full_refusals()): the caller
// decides (the IngestSender waits for acknowledgements to release room).
// Release(key) retires every closed segment whose records all have keys
// <= key (the active segment stays: it holds the last key); up to two
// retired files are kept and overwritten by the next segments, which is
// why a segment's file may hold stale bytes past its last record until it
// closes (then it is cut at its end, durably) -- a reader stops at the
// first record that does not continue the keys.
//
// Threads: every method may be called from any thread; Append and Commit
// from several at once. ForEach reads the files and must not run
// concurrently with Release. The flusher thread (kBatched) belongs to the
// spool; Reset must not run concurrently with Append.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/common/mutex.h"

namespace perld::client {

enum class SpoolMode { kSynced, kBatched };

class Spool {
 public:
  struct Options {
    std::string dir;  // created if missing (mode 0700)
    SpoolMode mode = SpoolMode::kBatched;
    int64_t batch_appends = 1024;  // kBatched: commit after this many appends
    int64_t batch_ms = 10;         // kBatched: and at least this often
    int64_t max_bytes = int64_t{1} << 30;
    int64_t segment_bytes = int64_t{64} << 20;  // a segment closes past this size
    uint32_t max_record_bytes = 64u << 20;
  };
  static constexpr size_t kHeaderBytes = 16;

  static absl::StatusOr<std::unique_ptr<Spool>> Open(const Options& options);
  ~Spool();  // commits what is buffered
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  // Appends `payload` under `key` (> last_key()). See the header comment.
  absl::Status Append(uint64_t key, std::string_view payload);
  // Appends `payload` under the next key (last_key() + 1), which it returns.
  absl::StatusOr<uint64_t> Append(std::string_view payload);
  // Writes and syncs everything appended so far.
  absl::Status Commit();
  // Writes (without a sync) every buffered record up to `key`, so that it
  // survives the process being killed: a batched spool's sender calls it
  // before sending a message the flusher has not written yet (never send
  // what the spool does not hold). No-op when written_key() >= key.
  absl::Status WriteThrough(uint64_t key);
  // Deletes the closed segments whose keys are all <= `key`.
  void Release(uint64_t key);
  // Deletes every record (all acknowledged) and the meta: the spool starts
  // over at key 1.
  absl::Status Reset();
  // A small blob stored beside the records (DIR/meta, replaced atomically
  // and durably): the client keeps its IngestOpen there. "" when none.
  const std::string& meta() const { return meta_; }
  absl::Status SetMeta(const std::string& bytes);
  // Calls `visit` for every record in key order until it returns false.
  absl::Status ForEach(const std::function<bool(uint64_t key, std::string_view payload)>& visit);

  // Tails the spool: the records with keys above `after`, in order, as they
  // reach the files (a batched spool writes at least every batch_ms). One
  // thread per cursor; the spool must outlive it and Release must not drop
  // the segment it reads.
  class Cursor {
   public:
    explicit Cursor(Spool& spool, uint64_t after = 0) : spool_(spool), last_(after) {}
    ~Cursor();
    Cursor(const Cursor&) = delete;
    Cursor& operator=(const Cursor&) = delete;
    // The next record into *key/*payload: true, or false when none has
    // reached the files yet.
    absl::StatusOr<bool> Next(uint64_t* key, std::string* payload);

   private:
    Spool& spool_;
    uint64_t last_;
    std::string path_;  // the segment being read ("" none)
    int fd_ = -1;
    int64_t offset_ = 0;
    uint64_t segment_last_ = 0;  // the last key read in path_ (its first key - 1 before)
    std::string buf_;            // read-ahead of path_ from buf_offset_
    int64_t buf_offset_ = 0;
  };

  uint64_t last_key() const;  // 0 when the spool never held a record
  uint64_t durable_key() const { return durable_key_.load(std::memory_order_acquire); }
  // The highest key written to a segment file (in the page cache at least:
  // it survives a crash of the process, not of the machine unless durable).
  uint64_t written_key() const { return written_key_.load(std::memory_order_acquire); }
  // The first key the spool holds (0 when none): every key below it was
  // released, i.e. reported durable by the daemon.
  uint64_t first_key() const;
  int64_t bytes() const;  // in segment files, buffered included
  uint64_t records_recovered() const { return records_recovered_; }
  uint64_t truncated_bytes() const { return truncated_bytes_; }
  uint64_t full_refusals() const { return full_refusals_.load(std::memory_order_relaxed); }
  uint64_t commits() const { return commits_.load(std::memory_order_relaxed); }

 private:
  struct Segment {
    uint64_t first_key = 0;
    uint64_t last_key = 0;
    int64_t bytes = 0;
    std::string path;
  };
  // An append buffer: appenders reserve [reserved, reserved + n) under mu_
  // while it is active_, copy their record in without a lock, then add n to
  // `filled` (release). Once detached (queued_) `reserved` no longer
  // changes; its writer waits for filled == reserved (acquire) and writes
  // [0, reserved). Owned by whichever of active_, queued_, free_blocks_ holds
  // it; an appender with an unfilled reservation keeps only a raw pointer,
  // valid because the block is not written or reused before it is filled.
  struct Block {
    explicit Block(size_t bytes) : data(new char[bytes]), capacity(bytes) {}
    std::unique_ptr<char[]> data;
    const size_t capacity;
    size_t reserved = 0;    // mu_ while active_, then fixed
    uint64_t last_key = 0;  // the key of the last record reserved
    std::atomic<size_t> filled{0};
  };
  static constexpr size_t kBlockBytes = size_t{4} << 20;
  static constexpr int kMaxBlocks = 6;  // standard blocks at most (24 MiB)

  explicit Spool(Options options);
  absl::Status Recover();
  absl::Status OpenActive(uint64_t first_key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_, io_mu_);
  absl::Status CloseActive() ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);  // fd_ >= 0
  // Hands the active block to the writers' queue and writes the queue (in
  // order, under io_mu_; io_mu_ is taken after mu_ is released, so an
  // appender never sleeps on the files holding mu_) and, with `sync`,
  // fdatasyncs it. On return everything appended before the call is
  // written (and synced). Releases mu_ during the write and holds it again
  // on return.
  absl::Status Flush(bool sync) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) ABSL_LOCKS_EXCLUDED(io_mu_);
  // Writes every queued block in order (and fdatasyncs with `sync`),
  // updating written_key_ / durable_key_. Sticky on failure (io_failed_).
  absl::Status WriteQueued(bool sync) ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  // Detaches a non-empty active_ into queued_.
  void DetachActive() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A block with room for `size` bytes as active_: false when none is free
  // and kMaxBlocks exist (the caller writes the queue and tries again).
  bool TakeBlock(size_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appended records not yet handed to a write (active_ or queued_).
  bool HasUnwritten() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FlusherLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // key 0: the next key. Returns the key used through `used`.
  absl::Status AppendImpl(uint64_t key, std::string_view payload, uint64_t* used);

  const Options options_;
  mutable Mutex mu_;  // the active block, segments and counters below
  CondVar synced_cv_;
  std::deque<Segment> segments_ ABSL_GUARDED_BY(mu_);   // ascending; back() is the active one
  std::unique_ptr<Block> active_ ABSL_GUARDED_BY(mu_);  // appends reserve here (null: none yet)
  uint64_t buffered_last_key_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // the segments' bytes, buffered included
  int64_t appends_since_commit_ ABSL_GUARDED_BY(mu_) = 0;
  bool syncing_ ABSL_GUARDED_BY(mu_) = false;  // a thread runs a group commit
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Sticky: the spool refuses appends after a write failure.
  absl::Status io_error_ ABSL_GUARDED_BY(mu_);

  Mutex io_mu_ ABSL_ACQUIRED_AFTER(mu_);  // the active file descriptor and its writes
  int fd_ ABSL_GUARDED_BY(io_mu_) = -1;
  int64_t write_offset_ ABSL_GUARDED_BY(io_mu_) = 0;  // where the next write goes in fd_
  std::string fd_path_ ABSL_GUARDED_BY(io_mu_);       // fd_'s file, for messages
  uint64_t io_last_key_ ABSL_GUARDED_BY(io_mu_) = 0;  // the last key written to a file
  absl::Status io_failed_ ABSL_GUARDED_BY(io_mu_);    // no write after a failed one

  // The blocks between the appenders and the writers, innermost lock.
  Mutex queue_mu_ ABSL_ACQUIRED_AFTER(io_mu_);
  std::deque<std::unique_ptr<Block>> queued_ ABSL_GUARDED_BY(queue_mu_);  // to write, in order
  std::vector<std::unique_ptr<Block>> free_blocks_ ABSL_GUARDED_BY(queue_mu_);
  int blocks_ ABSL_GUARDED_BY(queue_mu_) = 0;  // standard blocks in existence

  // Released segments' files kept for reuse (mu_): overwriting a file whose
  // pages are cached and blocks allocated is several times faster than
  // growing a new one. Removed at Reset, Open and destruction.
  static constexpr size_t kMaxFreeSegments = 2;
  std::deque<std::string> free_ ABSL_GUARDED_BY(mu_);
  uint64_t free_count_ ABSL_GUARDED_BY(mu_) = 0;

  // Atomics (read without mu_ by the appenders' fast paths and counters).
  std::atomic<uint64_t> durable_key_{0};
  std::atomic<uint64_t> written_key_{0};
  std::atomic<uint64_t> full_refusals_{0};
  std::atomic<uint64_t> commits_{0};
  std::string meta_;  // set at Open and by SetMeta (owner thread)
  uint64_t records_recovered_ = 0;
  uint64_t truncated_bytes_ = 0;
  CondVar flusher_cv_;
  std::thread flusher_;
};

}  // namespace perld::client
