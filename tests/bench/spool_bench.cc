// spool_bench: the durable client spool against the seed's file-queue table
// (../shared/seeds/popout-file-queue-benchmarks.txt), on this machine's disk:
//
//   1. the device's fdatasync rate (a plain write + fdatasync loop, 512 B);
//   2. write ops/s with 1, 2 and 8 threads, batched (group commit every
//      10,000 appends, the seed's batchSize, or 10 ms) and synced, 512-byte
//      records (the seed's payload); each thread releases what is durable
//      every 4096 appends (an acknowledging daemon), so segments are deleted
//      as in real use. Each batched cell is preceded by a probe of the
//      device's synced write bandwidth at the batched spool's own cadence
//      (4 MiB writes into a file overwritten in place, each started on the
//      device at once, an fdatasync after every 10,000 records' bytes). A
//      batched spool writes and syncs every byte it takes, so that bandwidth
//      over a record's size on disk is about the most a spool syncing at
//      this cadence can take on this device; the cell's "of the device"
//      column is how close the spool comes to it;
//   3. iteration of 1,000,000 records of 512 bytes: reopening the spool
//      (recovery reads and checks every record) and a ForEach over it, warm
//      and -- when run as root -- after dropping the page cache;
//   4. 3 writers and 1 reader (a Spool::Cursor that releases what it read)
//      at once, batched and synced.
//
// Usage: spool_bench [--dir DIR] [--seconds S] [--records N] [--size BYTES] [--cold 0]
// DIR (default /var/tmp) must be on the disk to measure. The fdatasync loop
// runs 2 s (or S when shorter); --cold 0 skips the page-cache-dropped
// iteration (which drops the whole host's page cache, as root). Prints Markdown.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "client/lib/spool.h"

namespace {

using perld::client::Spool;
using perld::client::SpoolMode;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void Die(const std::string& what) {
  std::fprintf(stderr, "spool_bench: %s\n", what.c_str());
  std::_Exit(1);  // from any thread, no cleanup needed
}

std::unique_ptr<Spool> OpenFresh(const std::string& dir, SpoolMode mode) {
  std::filesystem::remove_all(dir);
  Spool::Options o;
  o.dir = dir;
  o.mode = mode;
  o.max_bytes = int64_t{64} << 30;
  o.batch_appends = 10'000;  // the seed's batchSize(10_000)
  absl::StatusOr<std::unique_ptr<Spool>> spool = Spool::Open(o);
  if (!spool.ok()) Die(std::string(spool.status().message()));
  return std::move(*spool);
}

double FsyncRate(const std::string& dir, double seconds) {
  const std::string path = dir + "/fsync-probe";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) Die("cannot create " + path);
  const std::string block(512, 'f');
  int64_t n = 0;
  const auto start = Clock::now();
  while (Seconds(start, Clock::now()) < seconds) {
    if (write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) Die("write");
    if (fdatasync(fd) != 0) Die("fdatasync");
    ++n;
  }
  const double rate = static_cast<double>(n) / Seconds(start, Clock::now());
  close(fd);
  unlink(path.c_str());
  return rate;
}

// Bytes per second written and synced the way a batched spool does it:
// 4 MiB pwrites cycling over a 64 MiB file whose blocks are allocated and
// cached (as a recycled segment), each handed to the device at once
// (sync_file_range), an fdatasync after every `sync_bytes`.
double SyncedWriteBandwidth(const std::string& dir, double seconds, int64_t sync_bytes) {
  const std::string path = dir + "/bandwidth-probe";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) Die("cannot create " + path);
  constexpr int64_t kBlock = int64_t{4} << 20;
  constexpr int64_t kFile = int64_t{64} << 20;
  const std::string block(static_cast<size_t>(kBlock), 'b');
  auto put = [&](int64_t offset) {
    if (pwrite(fd, block.data(), block.size(), offset) != static_cast<ssize_t>(block.size())) {
      Die("write " + path);
    }
  };
  for (int64_t offset = 0; offset < kFile; offset += kBlock) put(offset);
  if (fdatasync(fd) != 0) Die("fdatasync");
  int64_t written = 0;
  int64_t unsynced = 0;
  const auto start = Clock::now();
  while (Seconds(start, Clock::now()) < seconds) {
    put(written % kFile);
    // As the spool does: start the device on each block at once.
    sync_file_range(fd, written % kFile, kBlock, SYNC_FILE_RANGE_WRITE);
    written += kBlock;
    unsynced += kBlock;
    if (unsynced >= sync_bytes) {
      if (fdatasync(fd) != 0) Die("fdatasync");
      unsynced = 0;
    }
  }
  if (fdatasync(fd) != 0) Die("fdatasync");
  const double rate = static_cast<double>(written) / Seconds(start, Clock::now());
  close(fd);
  unlink(path.c_str());
  return rate;
}

double WriteRate(const std::string& dir, SpoolMode mode, int threads, double seconds, size_t size) {
  std::unique_ptr<Spool> spool = OpenFresh(dir, mode);
  const std::string payload(size, 'w');
  std::atomic<bool> stop{false};
  std::atomic<int64_t> total{0};
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      int64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        if (!spool->Append(payload).ok()) Die("append failed");
        if (++n % 4096 == 0) spool->Release(spool->durable_key());
      }
      total.fetch_add(n);
    });
  }
  const auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (std::thread& w : workers) w.join();
  const double elapsed = Seconds(start, Clock::now());
  return static_cast<double>(total.load()) / elapsed;
}

bool DropCaches() {
  sync();
  std::ofstream drop("/proc/sys/vm/drop_caches");
  if (!drop) return false;
  drop << "3\n";
  return static_cast<bool>(drop);
}

struct IterationTimes {
  double write = 0, open = 0, foreach = 0;
  uint64_t records = 0;
};

IterationTimes Iterate(const std::string& dir, int64_t records, size_t size, bool cold) {
  IterationTimes t;
  const std::string payload(size, 'i');
  {
    std::unique_ptr<Spool> spool = OpenFresh(dir, SpoolMode::kBatched);
    const auto start = Clock::now();
    for (int64_t i = 0; i < records; ++i) {
      if (!spool->Append(payload).ok()) Die("append failed");
    }
    if (!spool->Commit().ok()) Die("commit failed");
    t.write = Seconds(start, Clock::now());
  }
  if (cold && !DropCaches()) Die("cannot drop the page cache (not root?)");
  Spool::Options o;
  o.dir = dir;
  o.max_bytes = int64_t{64} << 30;
  auto start = Clock::now();
  absl::StatusOr<std::unique_ptr<Spool>> spool = Spool::Open(o);
  if (!spool.ok()) Die(std::string(spool.status().message()));
  t.open = Seconds(start, Clock::now());
  if (cold && !DropCaches()) Die("cannot drop the page cache");
  start = Clock::now();
  uint64_t bytes = 0;
  const absl::Status s = (*spool)->ForEach([&](uint64_t, std::string_view p) {
    ++t.records;
    bytes += p.size();
    return true;
  });
  t.foreach = Seconds(start, Clock::now());
  if (!s.ok() || t.records != static_cast<uint64_t>(records) ||
      bytes != t.records * static_cast<uint64_t>(size)) {
    Die("iteration did not return every record");
  }
  return t;
}

struct ReadWrite {
  double write = 0, read = 0;
};

ReadWrite Simultaneous(const std::string& dir, SpoolMode mode, double seconds, size_t size) {
  std::unique_ptr<Spool> spool = OpenFresh(dir, mode);
  const std::string payload(size, 's');
  std::atomic<bool> stop{false};
  std::atomic<int64_t> written{0};
  int64_t read = 0;
  std::vector<std::thread> writers;
  writers.reserve(3);
  for (int t = 0; t < 3; ++t) {
    writers.emplace_back([&] {
      int64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        if (!spool->Append(payload).ok()) Die("append failed");
        ++n;
      }
      written.fetch_add(n);
    });
  }
  std::thread reader([&] {
    Spool::Cursor cursor(*spool);
    uint64_t key = 0;
    std::string got;
    while (!stop.load(std::memory_order_relaxed)) {
      absl::StatusOr<bool> next = cursor.Next(&key, &got);
      if (!next.ok()) Die(std::string(next.status().message()));
      if (!*next) {
        std::this_thread::yield();
        continue;
      }
      if (got.size() != size) Die("read a wrong record");
      if (++read % 4096 == 0) spool->Release(key - 1);
    }
  });
  const auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (std::thread& w : writers) w.join();
  reader.join();
  const double elapsed = Seconds(start, Clock::now());
  return {static_cast<double>(written.load()) / elapsed, static_cast<double>(read) / elapsed};
}

const char* Name(SpoolMode mode) { return mode == SpoolMode::kSynced ? "synced" : "batched"; }

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/var/tmp";
  double seconds = 5;
  int64_t records = 1'000'000;
  size_t size = 512;
  bool cold_step = true;  // the page-cache-dropped iteration (as root)
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--dir") {
      dir = argv[i + 1];
    } else if (flag == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else if (flag == "--records") {
      records = std::atoll(argv[i + 1]);
    } else if (flag == "--size") {
      size = static_cast<size_t>(std::atoll(argv[i + 1]));
    } else if (flag == "--cold") {
      cold_step = std::string(argv[i + 1]) != "0";
    } else {
      Die("unknown flag " + flag);
    }
  }
  const std::string work = dir + "/spool-bench-" + std::to_string(getpid());
  std::filesystem::create_directories(work);
  const std::string spool_dir = work + "/spool";

  const double fsync_rate = FsyncRate(work, std::min(2.0, seconds));
  std::printf("device: %.0f fdatasync/s (512-byte write + fdatasync loop)\n\n", fsync_rate);

  std::printf(
      "| write, %zu-byte records | threads | ops/s | vs fdatasync rate | device MB/s synced | "
      "of the device |\n",
      size);
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  const double record_bytes = static_cast<double>(Spool::kHeaderBytes + size);
  for (SpoolMode mode : {SpoolMode::kBatched, SpoolMode::kSynced}) {
    for (int threads : {1, 2, 8}) {
      double bandwidth = 0;  // batched cells only: the device's ceiling just before
      if (mode == SpoolMode::kBatched) {
        bandwidth = SyncedWriteBandwidth(work, std::min(2.0, seconds),
                                         static_cast<int64_t>(10'000 * record_bytes));
      }
      const double rate = WriteRate(spool_dir, mode, threads, seconds, size);
      if (bandwidth > 0) {
        std::printf("| %s | %d | %.0f | %.2fx | %.0f | %.2f |\n", Name(mode), threads, rate,
                    rate / fsync_rate, bandwidth / 1e6, rate * record_bytes / bandwidth);
      } else {
        std::printf("| %s | %d | %.0f | %.2fx | | |\n", Name(mode), threads, rate,
                    rate / fsync_rate);
      }
      std::fflush(stdout);
    }
  }

  std::printf("\n| iterate %lld x %zu B | write (batched) s | reopen (recovery) s | ForEach s |\n",
              static_cast<long long>(records), size);
  std::printf("|---|---:|---:|---:|\n");
  const IterationTimes warm = Iterate(spool_dir, records, size, /*cold=*/false);
  std::printf("| page cache warm | %.3f | %.3f | %.3f |\n", warm.write, warm.open, warm.foreach);
  std::fflush(stdout);
  if (cold_step && geteuid() == 0) {
    const IterationTimes cold = Iterate(spool_dir, records, size, /*cold=*/true);
    std::printf("| page cache dropped | %.3f | %.3f | %.3f |\n", cold.write, cold.open,
                cold.foreach);
  }

  std::printf("\n| 3 writers + 1 reader | write ops/s | read ops/s | write + read ops/s |\n");
  std::printf("|---|---:|---:|---:|\n");
  for (SpoolMode mode : {SpoolMode::kBatched, SpoolMode::kSynced}) {
    const ReadWrite rw = Simultaneous(spool_dir, mode, seconds, size);
    std::printf("| %s | %.0f | %.0f | %.0f |\n", Name(mode), rw.write, rw.read, rw.write + rw.read);
    std::fflush(stdout);
  }
  std::filesystem::remove_all(work);
  return 0;
}
