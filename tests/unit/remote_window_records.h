// Test helper for the ingest tests (run_table_test, ingest_close_test): a
// remote window as a client's decoder builds it.
#pragma once

#include <cstdint>

#include "daemon/runs/remote_window_inbox.h"

namespace perld::ingest::testing {

// `n` valid records, every one of latency `latency`.
inline runs::RemoteWindow RemoteWindowAt(int64_t latency, int64_t n) {
  runs::RemoteWindow w;
  w.counters.records = n;
  w.counters.valid = n;
  w.counters.min_latency = latency;
  w.counters.max_latency = latency;
  w.counters.total_latency = n * latency;
  w.buckets.push_back({latency, n});
  return w;
}

}  // namespace perld::ingest::testing
