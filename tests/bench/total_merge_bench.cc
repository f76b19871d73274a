// total_merge_bench: the final total of a spilled run, i.e. the streaming
// merge of its total segments read from SQLite
// (StateStore::MergeTotalSegments: one DistributionBlobSource per stored
// segment blob, a k-way heap merge, a percentile walk), timed on this
// machine's disk with the page cache warm (the segments were just written;
// --cold drops the page cache before every merge, as root).
//
// Goal (tests/bench/TOTALS.md): the final total of a run with 100 segments of
// 1 M distinct values each is computed in < 5 s. Reproduce it with
//
//   build/release/tests/bench/total_merge_bench --segments 100 --distinct 1000000
//
// (the defaults). It writes one run of N total segments into a fresh state
// store, each D strictly ascending distinct latencies (random gaps 1..8N from
// a random start below N*D, so segments overlap partially; counts 1..3), one
// segment in memory at a time, then times MergeTotalSegments R times. The
// merged total's valid count is always checked (the merge is DataLoss when it
// differs) and percentiles_exact must come back true; with --verify (default
// when N*D <= 2,000,000) the merge is also recomputed in memory (sort,
// FillPercentiles) and its values, counts and median compared.
//
// --breakdown then times the merge's parts on the same stored segments, on a
// connection of the bench's own: the SQLite blob reads alone, each segment
// opened (checksum pass) and decoded alone, the streaming heap merge of the
// blob sources without the percentile walk, and -- every segment decoded into
// memory first (16 bytes per bucket: 1.6 GB at the goal size) -- the heap
// merge alone and with the walk.
//
// Output (machine-readable key=value lines): `total_merge_write` (the write
// phase: its time, not the goal figure), one `total_merge_repeat` per merge,
// and the `total_merge` summary: merge seconds min/median/max, input buckets
// per second at the median, db_bytes (perld.db and its WAL), VmHWM before the
// first merge and after the last, and merge_peak_rss_mib: VmHWM reset just
// before the merges (/proc/self/clear_refs), so the merges' own peak.
// Exit 0 on success, 1 on an error or mismatch, 2 on a usage error.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/config/daemon_config.h"
#include "daemon/core/bucket_source.h"
#include "daemon/core/distribution_merge.h"
#include "daemon/core/latency_config.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/latency_recorder.h"
#include "daemon/core/latency_snapshot.h"
#include "daemon/core/run_total.h"
#include "daemon/runs/run_info.h"
#include "daemon/runs/window_record.h"
#include "daemon/state/distribution_codec.h"
#include "daemon/state/sqlite_db.h"
#include "daemon/state/state_schema.h"
#include "daemon/state/state_store.h"

namespace {

using Clock = std::chrono::steady_clock;
using perld::LatencyBucket;
using perld::LatencySnapshot;
using perld::PercentileSet;
using perld::runs::WindowRecord;
using perld::state::DistributionBlobSource;
using perld::state::SqliteBlob;
using perld::state::SqliteDb;
using perld::state::StateStore;

constexpr char kUsage[] =
    "usage: total_merge_bench [--segments N] [--distinct D] [--dir PATH] [--keep]\n"
    "                         [--repeat R] [--seed S] [--verify | --no-verify] [--cold]\n"
    "                         [--breakdown]\n"
    "  --segments N   total segments of the run (default 100)\n"
    "  --distinct D   distinct latencies per segment (default 1000000)\n"
    "  --dir PATH     state directory (default: a fresh mkdtemp under /tmp); must not hold a\n"
    "                 perld.db; what the bench creates there is removed at exit unless --keep\n"
    "  --keep         keep the state directory and database\n"
    "  --repeat R     time the merge R times, report min/median/max (default 3)\n"
    "  --seed S       random seed (default 1)\n"
    "  --verify       also recompute the merge in memory and compare (default when\n"
    "                 N*D <= 2000000); --no-verify skips it\n"
    "  --cold         drop the page cache before every merge (root only)\n"
    "  --breakdown    then time the merge's parts: blob reads, decode, heap merge, walk\n"
    "                 (holds every segment in memory for the last two: 16 bytes a bucket)\n";

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// "VmHWM" / "VmRSS" of /proc/self/status in MiB; -1 when unreadable.
double StatusMib(std::string_view key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 &&
        line[key.size()] == ':') {
      return static_cast<double>(std::atoll(line.c_str() + key.size() + 1)) / 1024.0;
    }
  }
  return -1;
}

// Resets VmHWM to the current RSS (Linux >= 4.0); false when refused.
bool ResetPeakRss() {
  std::ofstream clear("/proc/self/clear_refs");
  if (!clear) return false;
  clear << "5\n";
  clear.flush();
  return static_cast<bool>(clear);
}

bool DropCaches() {
  sync();
  std::ofstream drop("/proc/sys/vm/drop_caches");
  if (!drop) return false;
  drop << "3\n";
  drop.flush();
  return static_cast<bool>(drop);
}

int64_t FileBytes(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

struct Flags {
  int64_t segments = 100;
  int64_t distinct = 1'000'000;
  std::string dir;
  bool keep = false;
  int repeat = 3;
  uint64_t seed = 1;
  int verify = -1;  // -1: by size
  bool cold = false;
  bool breakdown = false;
};

int UsageError(const std::string& what) {
  std::fprintf(stderr, "total_merge_bench: %s\n%s", what.c_str(), kUsage);
  return 2;
}

bool ParseInt(const char* text, int64_t min, int64_t* out) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min) return false;
  *out = v;
  return true;
}

// Fills `f` from the command line; -1 to go on, else the exit code (usage
// printed).
int ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool valued = flag == "--segments" || flag == "--distinct" || flag == "--dir" ||
                        flag == "--repeat" || flag == "--seed";
    if (valued && i + 1 >= argc) return UsageError(flag + " needs a value");
    const char* value = valued ? argv[++i] : "";
    int64_t v = 0;
    const int64_t min = flag == "--seed" ? 0 : 1;
    if (valued && flag != "--dir" && !ParseInt(value, min, &v)) {
      return UsageError(flag + " " + value + ": not an integer >= " + std::to_string(min));
    }
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (flag == "--segments") {
      f->segments = v;
    } else if (flag == "--distinct") {
      f->distinct = v;
    } else if (flag == "--dir") {
      f->dir = value;
    } else if (flag == "--keep") {
      f->keep = true;
    } else if (flag == "--repeat") {
      f->repeat = static_cast<int>(std::min<int64_t>(v, 1'000'000));
    } else if (flag == "--seed") {
      f->seed = static_cast<uint64_t>(v);
    } else if (flag == "--verify") {
      f->verify = 1;
    } else if (flag == "--no-verify") {
      f->verify = 0;
    } else if (flag == "--cold") {
      f->cold = true;
    } else if (flag == "--breakdown") {
      f->breakdown = true;
    } else {
      return UsageError("unknown flag " + flag);
    }
  }
  // Latencies stay below N*D + D*8N = 9*N*D: keep that and the count sums
  // (at most 3*N*D) far from int64 overflow.
  if (f->segments > 1'000'000 || f->distinct > (int64_t{1} << 32) ||
      f->segments * f->distinct > (int64_t{1} << 40)) {
    return UsageError("--segments x --distinct is too large");
  }
  if (f->verify < 0) f->verify = f->segments * f->distinct <= 2'000'000 ? 1 : 0;
  return -1;
}

// The state directory and what the bench created in it, removed at exit
// unless kept.
class WorkDir {
 public:
  WorkDir(std::string path, bool created, bool keep)
      : path_(std::move(path)), keep_(keep), created_(created) {
    std::error_code ec;
    if (!created_) {
      for (const auto& entry : std::filesystem::directory_iterator(path_, ec)) {
        before_.insert(entry.path().filename().string());
      }
    }
  }
  ~WorkDir() {
    if (keep_) {
      std::printf("kept %s\n", path_.c_str());
      return;
    }
    std::error_code ec;
    if (created_) {
      std::filesystem::remove_all(path_, ec);
      return;
    }
    std::vector<std::filesystem::path> ours;
    for (const auto& entry : std::filesystem::directory_iterator(path_, ec)) {
      if (before_.count(entry.path().filename().string()) == 0) ours.push_back(entry.path());
    }
    for (const auto& p : ours) std::filesystem::remove_all(p, ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool keep_;
  bool created_;  // by the bench: removed as a whole
  std::set<std::string> before_;
};

// One total segment's distribution: D strictly ascending latencies, random
// gaps 1..8N from a random start below N*D, counts 1..3.
int64_t MakeSegment(std::mt19937_64& rng, int64_t segments, int64_t distinct,
                    std::vector<LatencyBucket>* out) {
  out->resize(static_cast<size_t>(distinct));
  const auto max_gap = static_cast<uint64_t>(8 * segments);
  auto latency = static_cast<int64_t>(rng() % static_cast<uint64_t>(segments * distinct));
  int64_t valid = 0;
  for (LatencyBucket& b : *out) {
    const uint64_t r = rng();
    const auto count = static_cast<int64_t>(1 + (r >> 32) % 3);
    b.latency = latency;
    b.count = count;
    valid += count;
    latency += static_cast<int64_t>(1 + (r & 0xffffffff) % max_gap);
  }
  return valid;
}

// The merge of `segments` in memory: concatenated, sorted, equal latencies
// summed.
std::vector<LatencyBucket> MergeInMemory(const std::vector<std::vector<LatencyBucket>>& segments) {
  std::vector<LatencyBucket> all;
  size_t n = 0;
  for (const auto& s : segments) n += s.size();
  all.reserve(n);
  for (const auto& s : segments) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end(),
            [](const LatencyBucket& a, const LatencyBucket& b) { return a.latency < b.latency; });
  std::vector<LatencyBucket> merged;
  merged.reserve(all.size());
  for (const LatencyBucket& b : all) {
    if (!merged.empty() && merged.back().latency == b.latency) {
      merged.back().count += b.count;
    } else {
      merged.push_back(b);
    }
  }
  return merged;
}

// The run's stored total segments, as MergeTotalSegments opens them: one
// read transaction, a blob handle per segment.
struct StoredBlobs {
  SqliteDb db;
  std::vector<SqliteBlob> blobs;  // closed before `db`
};

absl::StatusOr<StoredBlobs> OpenBlobs(const std::string& path, perld::runs::RunId run,
                                      int64_t segments) {
  StoredBlobs out;
  absl::StatusOr<SqliteDb> db = SqliteDb::Open(path, SQLITE_OPEN_READONLY);
  if (!db.ok()) return db.status();
  out.db = *std::move(db);
  if (absl::Status s = out.db.Exec("BEGIN"); !s.ok()) return s;
  std::vector<int64_t> rowids;
  {
    absl::StatusOr<perld::state::SqliteStatement> select =
        out.db.Prepare(perld::state::SelectTotalSegmentsSql());
    if (!select.ok()) return select.status();
    select->BindInt64(1, static_cast<int64_t>(run));
    select->BindInt64(2, segments);
    for (;;) {
      absl::StatusOr<bool> row = select->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      rowids.push_back(select->ColumnInt64(0));
    }
  }
  for (const int64_t rowid : rowids) {
    absl::StatusOr<SqliteBlob> blob = out.db.OpenBlob("windows", "distribution", rowid);
    if (!blob.ok()) return blob.status();
    out.blobs.push_back(*std::move(blob));
  }
  return out;
}

// Counts what a merge hands over.
class CountingSink final : public perld::LatencyBucketSink {
 public:
  void OnBuckets(std::span<const LatencyBucket> buckets) override {
    buckets_ += static_cast<int64_t>(buckets.size());
    for (const LatencyBucket& b : buckets) valid_ += b.count;
  }
  int64_t buckets() const { return buckets_; }
  int64_t valid() const { return valid_; }

 private:
  int64_t buckets_ = 0;
  int64_t valid_ = 0;
};

// --breakdown: each part of the merge timed alone; false on an error.
bool Breakdown(const std::string& path, perld::runs::RunId run, int64_t segments, int64_t buckets,
               int64_t valid, const PercentileSet& set) {
  auto fail = [](const std::string& what, const absl::Status& s) {
    std::fprintf(stderr, "total_merge_bench: --breakdown: %s: %s\n", what.c_str(),
                 s.ToString().c_str());
    return false;
  };
  absl::StatusOr<StoredBlobs> stored = OpenBlobs(path, run, segments);
  if (!stored.ok()) return fail("opening the blobs", stored.status());
  const std::vector<SqliteBlob>& blobs = stored->blobs;

  // 1. The blob bytes alone, in 64 KiB reads (as the sources read them).
  auto t0 = Clock::now();
  constexpr int64_t kRead = int64_t{64} << 10;
  std::string buffer(static_cast<size_t>(kRead), '\0');
  int64_t bytes = 0;
  for (const SqliteBlob& blob : blobs) {
    for (int64_t at = 0; at < blob.size();) {
      const auto n = static_cast<int>(std::min<int64_t>(kRead, blob.size() - at));
      if (absl::Status s = blob.Read(at, buffer.data(), n); !s.ok()) return fail("read", s);
      at += n;
      bytes += n;
    }
  }
  const double read_s = Seconds(t0, Clock::now());

  // 2. Each segment opened (its checksum pass) and decoded, one at a time.
  t0 = Clock::now();
  int64_t decoded = 0;
  double open_s = 0;
  for (const SqliteBlob& blob : blobs) {
    const auto o0 = Clock::now();
    absl::StatusOr<std::unique_ptr<DistributionBlobSource>> source =
        DistributionBlobSource::OpenStored(&blob);
    if (!source.ok()) return fail("open", source.status());
    open_s += Seconds(o0, Clock::now());
    for (;;) {
      absl::StatusOr<std::span<const LatencyBucket>> chunk = (*source)->Next();
      if (!chunk.ok()) return fail("decode", chunk.status());
      if (chunk->empty()) break;
      decoded += static_cast<int64_t>(chunk->size());
    }
  }
  const double decode_s = Seconds(t0, Clock::now());

  // 3. The streaming merge of the blob sources, no percentile walk.
  t0 = Clock::now();
  CountingSink streamed;
  {
    std::vector<std::unique_ptr<DistributionBlobSource>> sources;
    std::vector<perld::BucketSource*> inputs;
    for (const SqliteBlob& blob : blobs) {
      absl::StatusOr<std::unique_ptr<DistributionBlobSource>> source =
          DistributionBlobSource::OpenStored(&blob);
      if (!source.ok()) return fail("open", source.status());
      inputs.push_back(source->get());
      sources.push_back(*std::move(source));
    }
    if (absl::Status s = perld::StreamMerge(inputs, &streamed); !s.ok()) {
      return fail("stream merge", s);
    }
  }
  const double stream_s = Seconds(t0, Clock::now());
  if (streamed.valid() != valid) {
    return fail("stream merge", absl::DataLossError("the merge does not hold every latency"));
  }

  // 4. Every segment in memory: the heap merge alone, then with the walk.
  std::vector<std::vector<LatencyBucket>> memory;
  for (const SqliteBlob& blob : blobs) {
    std::string bytes_of(static_cast<size_t>(blob.size()), '\0');
    if (absl::Status s = blob.Read(0, bytes_of.data(), static_cast<int>(blob.size())); !s.ok()) {
      return fail("read", s);
    }
    absl::StatusOr<std::vector<LatencyBucket>> d = perld::state::DecodeDistribution(bytes_of);
    if (!d.ok()) return fail("decode", d.status());
    memory.push_back(*std::move(d));
  }
  auto spans = [&memory](std::vector<perld::SpanBucketSource>* holder) {
    holder->clear();
    holder->reserve(memory.size());
    std::vector<perld::BucketSource*> inputs;
    inputs.reserve(memory.size());
    for (const auto& m : memory) inputs.push_back(&holder->emplace_back(m));
    return inputs;
  };
  std::vector<perld::SpanBucketSource> holder;
  std::vector<perld::BucketSource*> inputs = spans(&holder);
  t0 = Clock::now();
  CountingSink merged;
  if (absl::Status s = perld::StreamMerge(inputs, &merged); !s.ok()) {
    return fail("memory merge", s);
  }
  const double memory_s = Seconds(t0, Clock::now());
  inputs = spans(&holder);
  LatencySnapshot walked;
  walked.valid = valid;
  t0 = Clock::now();
  if (absl::Status s = perld::MergedPercentiles(inputs, set, &walked); !s.ok()) {
    return fail("memory merge + walk", s);
  }
  const double walk_s = Seconds(t0, Clock::now());

  std::printf(
      "total_merge_breakdown blob_bytes=%lld read_s=%.3f open_checksum_s=%.3f "
      "open_decode_s=%.3f stream_merge_s=%.3f memory_merge_s=%.3f memory_merge_walk_s=%.3f "
      "merged_distinct=%lld\n",
      static_cast<long long>(bytes), read_s, open_s, decode_s, stream_s, memory_s, walk_s,
      static_cast<long long>(merged.buckets()));
  if (decoded != buckets || merged.buckets() != streamed.buckets() || merged.valid() != valid) {
    return fail("counts", absl::DataLossError("decoded or merged buckets differ"));
  }
  return true;
}

int Run(const Flags& flags, const std::string& dir) {
  const int64_t n = flags.segments;
  const int64_t d = flags.distinct;
  const int64_t buckets = n * d;  // input buckets of the merge
  absl::StatusOr<std::unique_ptr<StateStore>> opened =
      StateStore::Open(dir, perld::config::RetentionConfig{});
  if (!opened.ok()) {
    std::fprintf(stderr, "total_merge_bench: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  StateStore& store = **opened;

  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  perld::runs::RunInfo run;
  run.id = 1;
  run.spec.name = "total_merge_bench";
  run.spec.source = perld::runs::RunSource::kBench;
  run.spec.latency = perld::LatencyConfig::ForUnit(perld::TimeUnit::kNs);
  run.state = perld::runs::RunState::kRunning;
  run.start_unix_ms = now_ms;
  store.SaveRun(run);

  // Segments one at a time (SaveWindow copies the distribution into its
  // queue and waits for room for a total segment), all of them with --verify.
  std::mt19937_64 rng(flags.seed);
  std::vector<std::vector<LatencyBucket>> kept;
  WindowRecord w;
  w.run_id = run.id;
  w.kind = WindowRecord::Kind::kTotalSegment;
  int64_t valid = 0;
  double generate_s = 0;
  const auto write_start = Clock::now();
  for (int64_t seq = 1; seq <= n; ++seq) {
    const auto t0 = Clock::now();
    const int64_t segment_valid = MakeSegment(rng, n, d, &w.distribution);
    generate_s += Seconds(t0, Clock::now());
    w.seq = seq;
    w.start_unix_ms = now_ms + (seq - 1) * 1000;
    w.end_unix_ms = w.start_unix_ms + 1000;
    w.seconds = 1;
    LatencySnapshot& s = w.snapshot;
    s.start_time = (seq - 1) * 1'000'000'000;
    s.end_time = s.start_time + 1'000'000'000;
    s.valid = segment_valid;
    s.records = segment_valid;
    s.min_latency = w.distribution.front().latency;
    s.max_latency = w.distribution.back().latency;
    s.total_latency = 0;
    for (const LatencyBucket& b : w.distribution) s.total_latency += b.latency * b.count;
    valid += segment_valid;
    store.SaveWindow(w);
    if (flags.verify != 0) kept.push_back(w.distribution);
  }
  w.distribution = {};
  if (absl::Status s = store.Flush(); !s.ok()) {
    std::fprintf(stderr, "total_merge_bench: Flush: %s\n", s.ToString().c_str());
    return 1;
  }
  const double write_s = Seconds(write_start, Clock::now());
  const std::filesystem::path db = std::filesystem::path(dir) / StateStore::kFileName;
  const int64_t db_bytes = FileBytes(db);
  const int64_t wal_bytes = FileBytes(db.string() + "-wal");
  const int64_t stored_bytes = db_bytes + wal_bytes;  // the database: the file and its WAL
  std::printf(
      "total_merge_write segments=%lld distinct=%lld valid=%lld write_s=%.3f generate_s=%.3f "
      "db_bytes=%lld wal_bytes=%lld bytes_per_bucket=%.2f\n",
      static_cast<long long>(n), static_cast<long long>(d), static_cast<long long>(valid), write_s,
      generate_s, static_cast<long long>(db_bytes), static_cast<long long>(wal_bytes),
      static_cast<double>(stored_bytes) / static_cast<double>(buckets));
  std::fflush(stdout);

  const PercentileSet set = PercentileSet::Default();
  LatencySnapshot want;
  if (flags.verify != 0) {
    const std::vector<LatencyBucket> merged = MergeInMemory(kept);
    kept = {};
    want.valid = valid;
    perld::FillPercentiles(set, merged, &want);
    std::printf("total_merge_verify merged_distinct=%zu\n", merged.size());
  }

  const double rss_before = StatusMib("VmRSS");
  const double hwm_before = StatusMib("VmHWM");
  const bool hwm_reset = ResetPeakRss();
  std::printf("total_merge_memory before_merge rss_mib=%.1f peak_rss_mib=%.1f\n", rss_before,
              hwm_before);
  std::fflush(stdout);

  std::vector<double> times;
  int failures = 0;
  for (int r = 1; r <= flags.repeat; ++r) {
    if (flags.cold && !DropCaches()) {
      std::fprintf(stderr, "total_merge_bench: --cold: cannot drop the page cache (not root?)\n");
      return 1;
    }
    LatencySnapshot got;
    got.valid = valid;  // the total's counters: the merge must hold as many
    got.percentiles_exact = false;
    const auto t0 = Clock::now();
    const absl::Status s = store.MergeTotalSegments(run.id, n, set, &got);
    const double merge_s = Seconds(t0, Clock::now());
    times.push_back(merge_s);
    bool ok = s.ok() && got.percentiles_exact;
    if (!s.ok()) {
      std::fprintf(stderr, "total_merge_bench: MergeTotalSegments: %s\n", s.ToString().c_str());
    } else if (!got.percentiles_exact) {
      std::fprintf(stderr, "total_merge_bench: MergeTotalSegments: percentiles not exact\n");
    }
    if (ok && flags.verify != 0 &&
        (got.values != want.values || got.counts != want.counts || got.median != want.median)) {
      ok = false;
      std::fprintf(stderr,
                   "total_merge_bench: repeat %d: the merge differs from the in-memory "
                   "merge (values, counts or median)\n",
                   r);
      for (size_t i = 0; i < std::max(got.values.size(), want.values.size()); ++i) {
        const auto at = [](const std::vector<int64_t>& v, size_t j) {
          return j < v.size() ? static_cast<long long>(v[j]) : -1LL;
        };
        std::fprintf(stderr, "  [%zu] value %lld want %lld, count %lld want %lld\n", i,
                     at(got.values, i), at(want.values, i), at(got.counts, i), at(want.counts, i));
      }
      std::fprintf(stderr, "  median %lld want %lld\n", static_cast<long long>(got.median),
                   static_cast<long long>(want.median));
    }
    if (!ok) ++failures;
    std::printf(
        "total_merge_repeat i=%d merge_s=%.3f buckets_per_s=%.0f median=%lld top=%lld "
        "ok=%d\n",
        r, merge_s, static_cast<double>(buckets) / merge_s, static_cast<long long>(got.median),
        static_cast<long long>(got.values.empty() ? -1 : got.values.back()), ok ? 1 : 0);
    std::fflush(stdout);
  }
  const double hwm_after = StatusMib("VmHWM");
  char merge_peak[32] = "n/a";  // VmHWM since the reset: the merges' own peak
  if (hwm_reset) std::snprintf(merge_peak, sizeof merge_peak, "%.1f", hwm_after);

  if (flags.breakdown && failures == 0 && !Breakdown(db.string(), run.id, n, buckets, valid, set)) {
    ++failures;
  }

  std::sort(times.begin(), times.end());
  const double median = times.size() % 2 == 1
                            ? times[times.size() / 2]
                            : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
  std::printf(
      "total_merge segments=%lld distinct=%lld buckets=%lld merge_s min=%.3f median=%.3f "
      "max=%.3f buckets_per_s=%.0f db_bytes=%lld peak_rss_before_merge_mib=%.1f "
      "peak_rss_mib=%.1f merge_peak_rss_mib=%s verify=%s cache=%s result=%s\n",
      static_cast<long long>(n), static_cast<long long>(d), static_cast<long long>(buckets),
      times.front(), median, times.back(), static_cast<double>(buckets) / median,
      static_cast<long long>(stored_bytes), hwm_before, std::max(hwm_before, hwm_after), merge_peak,
      flags.verify != 0 ? "on" : "off", flags.cold ? "cold" : "warm",
      failures == 0 ? "ok" : "FAIL");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (const int code = ParseFlags(argc, argv, &flags); code >= 0) return code;
  std::string dir = flags.dir;
  bool created = false;
  if (dir.empty()) {
    std::string pattern = "/tmp/total_merge_bench-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("total_merge_bench: mkdtemp");
      return 1;
    }
    dir = pattern;
    created = true;
  } else {
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::path(dir) / StateStore::kFileName, ec)) {
      return UsageError("--dir " + dir + " already holds a " + StateStore::kFileName +
                        ": give a fresh directory");
    }
    created = !std::filesystem::exists(dir, ec);
  }
  WorkDir work(dir, created, flags.keep);
  std::printf("total_merge_bench dir=%s segments=%lld distinct=%lld repeat=%d seed=%llu\n",
              work.path().c_str(), static_cast<long long>(flags.segments),
              static_cast<long long>(flags.distinct), flags.repeat,
              static_cast<unsigned long long>(flags.seed));
  std::fflush(stdout);
  return Run(flags, work.path());  // the store closes before `work` cleans up
}
