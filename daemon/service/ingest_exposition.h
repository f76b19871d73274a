// IngestCollector: the ingest service's counters (IngestStats, relaxed
// atomics the ingest paths bump) as a prometheus::Collectable, read at scrape
// time: perld_ingest_streams_open and perld_ingest_queued_window_bytes
// (gauges), the perld_ingest_*_total counters, and refusals labelled by
// reason (IngestStats::RefusalName). The ingest paths never touch
// prometheus-cpp.
//
// Threads: Collect from any thread; `stats` must outlive the collector.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <vector>

#include "daemon/ingest/ingest_stats.h"

namespace perld::service {

class IngestCollector final : public prometheus::Collectable {
 public:
  explicit IngestCollector(const ingest::IngestStats& stats) : stats_(stats) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const ingest::IngestStats& stats_;
};

}  // namespace perld::service
