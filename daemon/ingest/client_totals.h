// ClientTotals: one remote client's own share of an aggregated run -- the
// per-client breakdown Query.GetClients reports. For a windows client: its
// summed counters and, while the breakdown budget allows, its exact
// distribution with its cumulative counts (PercentileIndex: its percentiles
// in O(P log D)), immutable once published: windows are merged into a
// second index -- the one readers dropped last, reused (IndexRecycler), so
// the steady state allocates nothing -- which then replaces the first. A
// reader (Query.GetClients, through a Snapshot) holds its copy without any
// lock the applier takes; for a raw client: the records and
// timestamps it sent (its timestamps go straight to the run's channels, and
// the daemon does not keep a second copy of them per client).
//
// At most kRefreshMs apart: a merge costs the whole distribution (O(D + d)),
// so a client that sends windows faster than one per kRefreshMs does not pay
// it per window. Its windows meanwhile add up in a hash map (O(1) a pair:
// a busy client repeats its latencies), and the next window at least
// kRefreshMs after the last merge -- or Flush(), when the client closes,
// its stream leaves, its run ends or it goes quiet (the run table's reaper)
// -- sorts them and merges them at once. A
// window that comes later than that after the last merge, with nothing
// waiting, is merged directly. The published row (Snapshot: counters,
// reports, distribution) is always one consistent cut -- every window up to
// its last merge -- so its percentiles agree with its counts; pending()
// says windows wait beyond it.
//
// BreakdownBudget: the memory every client distribution of the daemon may
// hold together (ingest.clientBreakdownMaxMemoryMB; a client is charged
// twice its distribution: the published one and the spare, and its waiting
// windows' map). A client whose merge would exceed it drops its distribution
// for good (exact = false; its counters go on) and the drop is counted: a
// breakdown never costs the run's own exactness, only its own detail.
//
// Threads: a ClientTotals is guarded by its client's apply lock (the
// handler that applies the client's messages); a Snapshot is a value, its
// distribution shared and never written; BreakdownBudget is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "daemon/common/mutex.h"
#include "daemon/core/interleaved_long_map.h"
#include "daemon/core/latency_recorder.h"
#include "daemon/core/latency_window.h"
#include "daemon/core/percentile_index.h"

namespace perld::ingest {

class BreakdownBudget {
 public:
  explicit BreakdownBudget(int64_t limit_bytes) : limit_(limit_bytes) {}
  // True when `bytes` more fit (and are now charged).
  bool TryCharge(int64_t bytes);
  void Release(int64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  void SetLimit(int64_t limit_bytes) { limit_.store(limit_bytes, std::memory_order_relaxed); }
  int64_t used() const { return used_.load(std::memory_order_relaxed); }
  int64_t limit() const { return limit_.load(std::memory_order_relaxed); }
  uint64_t drops() const { return drops_.load(std::memory_order_relaxed); }
  void CountDrop() { drops_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> used_{0};
  std::atomic<int64_t> limit_;
  std::atomic<uint64_t> drops_{0};
};

// Keeps the last PercentileIndex its readers let go of, for the next merge
// to reuse. Threads: any (the last holder of an index, often a Query
// thread, hands it back).
class IndexRecycler {
 public:
  // `index` shared; when its last holder drops it, it becomes the spare
  // (freeing any older spare), or is freed once Close() was called.
  static std::shared_ptr<const PercentileIndex> Share(std::shared_ptr<IndexRecycler> self,
                                                      std::unique_ptr<PercentileIndex> index);
  // The spare, or a new empty index.
  std::unique_ptr<PercentileIndex> Take();
  // Frees the spare and every index handed back from now on.
  void Close();

 private:
  void HandBack(std::unique_ptr<PercentileIndex> index);

  Mutex mu_;
  std::unique_ptr<PercentileIndex> spare_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

class ClientTotals {
 public:
  // The longest a windows client's published row trails its windows while
  // it keeps sending (see the file comment).
  static constexpr int64_t kRefreshMs = 100;

  explicit ClientTotals(std::shared_ptr<BreakdownBudget> budget) : budget_(std::move(budget)) {}
  ~ClientTotals();
  ClientTotals(const ClientTotals&) = delete;
  ClientTotals& operator=(const ClientTotals&) = delete;

  // A windows client's report: counters and ascending buckets (validated).
  void AddWindow(const LatencyCounters& counters, std::span<const LatencyBucket> ascending,
                 int64_t now_unix_ms);
  // A raw client's batch of `timestamps` carrying `records` records.
  void AddBatch(int64_t timestamps, int64_t records, int64_t now_unix_ms);
  // Merges every waiting window into the published row.
  void Flush(int64_t now_unix_ms);
  // The wall clock, in unix ms, that the times given to and kept by a
  // ClientTotals are read from (every caller's `now_unix_ms`).
  static int64_t NowUnixMs();
  // kRefreshMs or more passed from `since` to `now` (a wall clock stepped
  // back counts as passed: nothing waits for it to catch up).
  static bool RefreshPassed(int64_t since_unix_ms, int64_t now_unix_ms) {
    return now_unix_ms < since_unix_ms || now_unix_ms - since_unix_ms >= kRefreshMs;
  }
  // The row is due for a merge: kRefreshMs after the last one, or none yet.
  bool Due(int64_t now_unix_ms) const {
    return !last_merge_unix_ms_ || RefreshPassed(*last_merge_unix_ms_, now_unix_ms);
  }
  // Windows wait that the published row does not hold yet.
  bool pending() const { return pending_reports_ > 0; }
  // When the newest of them came (unix ms); meaningful while pending().
  int64_t pending_last_unix_ms() const { return pending_last_unix_ms_; }

  // What the client has sent up to the last merge, as a value.
  struct Snapshot {
    int64_t reports = 0;  // windows or batches applied
    int64_t timestamps = 0;
    LatencyCounters counters;
    // Covers every window counted when set; null when not kept (a raw
    // client, or one whose distribution the budget dropped).
    std::shared_ptr<const PercentileIndex> distribution;
    // Names `distribution`: a new value (from 1) each time a merge replaces
    // it, so a reader can tell it computed from this one before.
    uint64_t distribution_version = 0;
    int64_t last_report_unix_ms = 0;
  };
  Snapshot Snap() const;

 private:
  void Drop();
  // Merges `ascending` into the published distribution (a new index).
  void MergeIntoPublished(std::span<const LatencyBucket> ascending);
  // Counts the waiting windows in the published row.
  void PublishPending();
  // The published distribution and the spare (at most as large: indexes
  // only grow, and the spare is the one before).
  int64_t Charged() const { return 2 * static_cast<int64_t>(distribution_->RetainedBytes()); }

  std::shared_ptr<BreakdownBudget> budget_;
  LatencyCounters counters_;
  const std::shared_ptr<IndexRecycler> recycler_ = std::make_shared<IndexRecycler>();
  // Never null while exact_; replaced, never written, by each merge.
  std::shared_ptr<const PercentileIndex> distribution_ =
      IndexRecycler::Share(recycler_, std::make_unique<PercentileIndex>());
  uint64_t distribution_version_ = 1;  // distribution_'s (Snapshot)
  int64_t charged_ = 0;                // bytes charged to budget_ for the distribution
  int64_t reports_ = 0;
  int64_t timestamps_ = 0;
  int64_t last_report_unix_ms_ = 0;
  bool exact_ = true;

  // Windows since the last merge.
  InterleavedLongMap pending_buckets_;  // latency -> count
  int64_t pending_charged_ = 0;         // bytes charged to budget_ for the map
  LatencyCounters pending_counters_;
  int64_t pending_reports_ = 0;
  int64_t pending_last_unix_ms_ = 0;
  std::optional<int64_t> last_merge_unix_ms_;  // none before the first merge
  std::vector<LatencyBucket> sort_buffer_;     // the map's buckets, then their order
  std::vector<LatencyBucket> sort_scratch_;
  std::vector<uint32_t> sort_histogram_;
};

}  // namespace perld::ingest
