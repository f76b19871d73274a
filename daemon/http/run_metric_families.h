// RunsCollectable: perld's run families (perld names, run_metrics.h) as a
// prometheus::Collectable -- prometheus-cpp MetricFamily objects for its
// TextSerializer: each run's exact percentiles as the quantile values of a
// summary (perld's own numbers, never prometheus-cpp's approximate Summary),
// _sum and _count, and the counters and gauges, with the same names, labels,
// help texts and family order as RenderPerldRun/WritePerldFamilies.
//
// It is the prometheus-cpp arm of the exporter's A/B (tests/bench/PROMETHEUS.md:
// metrics_bench, and the daemon built with -DPERLD_RUNS_VIA_PROMETHEUS_CPP=ON);
// the daemon serves its run families with perld's own writer, because this
// data model holds every value as a double and TextSerializer prints 16
// significant digits: integer latencies and counters are no longer exact
// decimals (997421 ns becomes 0.0009974210000000001, and above 2^53 another
// number), and it is slower. The text differs from perld's writer only in
// number formatting (7e-09 for 0.000000007, Nan for NaN) and in a summary's
// line order (_count, _sum, then the quantiles).
//
// Threads: Collect from any thread; the runs must outlive the collectable.
#pragma once

#include <span>
#include <vector>

#include "daemon/http/metric_families.h"
#include "daemon/http/run_metrics.h"

namespace perld::http {

class RunsCollectable final : public prometheus::Collectable {
 public:
  explicit RunsCollectable(std::span<const RunMetrics> runs) : runs_(runs) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::span<const RunMetrics> runs_;
};

// The label pairs of a Labels text (`k="v",...`, values unescaped).
MetricLabels LabelPairs(const Labels& labels);

}  // namespace perld::http
