// LatencySnapshot: the immutable result of one closed latency window.
//
// This is the only form in which window data leaves the core: the console
// line, CSV row, Prometheus exposition and gRPC mappers read snapshots and
// never touch a live recorder. Plain data, copyable, no pointers into any
// recorder; safe to hand to another thread once built. Times are in the
// caller's clock (the one passed to Reset / SetEndTime); latencies, totals
// and percentile values in the run's time unit.
#pragma once

#include <cstdint>
#include <vector>

namespace perld {

struct LatencySnapshot {
  int64_t start_time = 0;  // window start (Reset time)
  int64_t end_time = 0;    // window end (close time)

  int64_t records = 0;         // every accepted record (valid + discards + invalid)
  int64_t bytes = 0;           // bytes of every accepted record
  int64_t total_latency = 0;   // sum of latency x records over non-negative latencies
  int64_t min_latency = 0;     // smallest non-negative latency, 0 if none (SBK print rule)
  int64_t max_latency = 0;     // largest non-negative latency, 0 if none
  int64_t invalid = 0;         // records with negative latency
  int64_t lower_discard = 0;   // records with 0 <= latency < minLatency
  int64_t higher_discard = 0;  // records with latency > maxLatency
  int64_t valid = 0;           // records in [minLatency, maxLatency]: the distribution's total
  int64_t rejected = 0;        // timestamps refused outright because records < 1

  bool overflow = false;     // SBK total limits exceeded (see LatencyWindow::IsOverflow)
  bool closed_full = false;  // closed early by the IsFull policy, not by its interval
  int64_t full_closes = 0;   // early closes of this window series so far, this one included

  // Requested percentiles, ascending, in percent (e.g. 99.9) and as the
  // fraction actually used (percent / 100.0). values[i] is the exact latency
  // at fractions[i]; counts[i] is the number of records that have exactly
  // that latency (SBK's "percentile count"). Both are 0 for an empty window.
  std::vector<double> percents;
  std::vector<double> fractions;
  std::vector<int64_t> values;
  std::vector<int64_t> counts;
  int64_t median = 0;  // latency at index valid / 2 (SBK medianIndex = valid >> 1)
  // False for a run total whose distribution outgrew its memory budget
  // (RunTotal): its percentiles and median are unknown, never computed from
  // part of the data -- percents, fractions, values and counts are empty and
  // median is 0. The counters stay exact.
  bool percentiles_exact = true;

  // SBK's average: total_latency / (valid + lower_discard + higher_discard),
  // 0 when there is no non-negative latency.
  double AvgLatency() const {
    const int64_t n = valid + lower_discard + higher_discard;
    return n > 0 ? static_cast<double>(total_latency) / static_cast<double>(n) : 0.0;
  }
  int64_t Elapsed() const { return end_time - start_time; }

  // Adds the counters of the window that follows this one (a running sum of
  // consecutive windows): every count, min/max over windows that had a
  // non-negative latency, end_time and full_closes from `next`. Percentiles
  // and the median are left alone: counters cannot merge them.
  void AddCountersOf(const LatencySnapshot& next) {
    const bool had_latency = valid + lower_discard + higher_discard > 0;
    if (next.valid + next.lower_discard + next.higher_discard > 0) {
      min_latency = had_latency && min_latency < next.min_latency ? min_latency : next.min_latency;
      max_latency = had_latency && max_latency > next.max_latency ? max_latency : next.max_latency;
    }
    end_time = next.end_time;
    records += next.records;
    bytes += next.bytes;
    total_latency += next.total_latency;
    invalid += next.invalid;
    lower_discard += next.lower_discard;
    higher_discard += next.higher_discard;
    valid += next.valid;
    rejected += next.rejected;
    overflow = overflow || next.overflow;
    full_closes = next.full_closes;
  }

  bool operator==(const LatencySnapshot&) const = default;
};

}  // namespace perld
