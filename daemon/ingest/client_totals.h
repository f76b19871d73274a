// ClientTotals: one remote client's own share of an aggregated run -- the
// per-client breakdown Query.GetClients reports. For a windows client: its
// summed counters and, while the breakdown budget allows, its exact
// distribution with its cumulative counts (PercentileIndex: its percentiles
// in O(P log D), so Query.GetClients over hundreds of clients holds each
// client's lock for microseconds); for a raw client: the records and
// timestamps it sent (its timestamps go straight to the run's channels, and
// the daemon does not keep a second copy of them per client).
//
// BreakdownBudget: the memory every client distribution of the daemon may
// hold together (ingest.clientBreakdownMaxMemoryMB). A client whose merge
// would exceed it drops its distribution for good (exact = false; its
// counters go on) and the drop is counted: a breakdown never costs the
// run's own exactness, only its own detail.
//
// Threads: a ClientTotals is guarded by its client's apply lock (the
// handler that applies the client's messages, and Query reading it);
// BreakdownBudget is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

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

class ClientTotals {
 public:
  explicit ClientTotals(std::shared_ptr<BreakdownBudget> budget) : budget_(std::move(budget)) {}
  ~ClientTotals();
  ClientTotals(const ClientTotals&) = delete;
  ClientTotals& operator=(const ClientTotals&) = delete;

  // A windows client's report: counters and ascending buckets (validated).
  void AddWindow(const LatencyCounters& counters, std::span<const LatencyBucket> ascending,
                 int64_t now_unix_ms);
  // A raw client's batch of `timestamps` carrying `records` records.
  void AddBatch(int64_t timestamps, int64_t records, int64_t now_unix_ms);

  int64_t reports() const { return reports_; }  // windows or batches applied
  int64_t timestamps() const { return timestamps_; }
  const LatencyCounters& counters() const { return counters_; }
  // Covers every window when exact().
  const PercentileIndex& distribution() const { return distribution_; }
  bool exact() const { return exact_; }
  int64_t last_report_unix_ms() const { return last_report_unix_ms_; }

 private:
  void Drop();
  int64_t Charged() const { return static_cast<int64_t>(distribution_.RetainedBytes()); }

  std::shared_ptr<BreakdownBudget> budget_;
  LatencyCounters counters_;
  PercentileIndex distribution_;
  int64_t charged_ = 0;  // bytes charged to budget_
  int64_t reports_ = 0;
  int64_t timestamps_ = 0;
  int64_t last_report_unix_ms_ = 0;
  bool exact_ = true;
};

}  // namespace perld::ingest
