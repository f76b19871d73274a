// Building prometheus-cpp's data model (prometheus::MetricFamily, the input
// of its TextSerializer) for perld's collectables, and writing it as text.
//
// The daemon's own metrics (DaemonMetrics' prometheus::Registry, and the
// collectables that read their sources' atomics at scrape time: ingest, gRPC
// calls, the daemon's state) are prometheus-cpp MetricFamily objects
// serialized by prometheus::TextSerializer. Its values are doubles written
// with 16 significant digits (std::ostream, precision 16): exact for the
// integers these families carry up to 2^53. The run families, whose exact
// integer latencies and counters must survive any size, keep perld's own
// writer (run_metrics.h; the reason and the A/B are in
// tests/bench/PROMETHEUS.md).
//
// Threads: pure functions; any thread.
#pragma once

#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <string>
#include <vector>

namespace perld::http {

using MetricFamilies = std::vector<prometheus::MetricFamily>;
using MetricLabels = std::vector<prometheus::ClientMetric::Label>;

// Appends an empty family and returns it (valid until `families` grows).
prometheus::MetricFamily& AddFamily(MetricFamilies* families, std::string name,
                                    prometheus::MetricType type, std::string help);
// One sample of a counter, gauge or untyped family: the value goes to the
// field the family's type reads.
void AddSample(prometheus::MetricFamily& family, double value, MetricLabels labels = {});
// A family of one sample without labels.
void AddSingle(MetricFamilies* families, std::string name, prometheus::MetricType type,
               std::string help, double value);

// Appends the families of every collectable, in the order given, to `out`.
void CollectInto(const std::vector<const prometheus::Collectable*>& collectables,
                 MetricFamilies* out);
// Appends the TextSerializer text of `families` to `out` (its content and
// capacity kept).
void AppendFamiliesText(const MetricFamilies& families, std::string* out);
std::string FamiliesText(const MetricFamilies& families);

}  // namespace perld::http
