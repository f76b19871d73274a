#include "daemon/http/metrics_exposition.h"

#include <utility>

#include "daemon/common/mutex.h"

namespace perld::http {
namespace {

// The counters of a window without its percentiles (a sum of windows has none).
ExpositionWindow CountersOnly(const LatencySnapshot& snapshot, double seconds) {
  ExpositionWindow w{snapshot, seconds};
  w.snapshot.percents.clear();
  w.snapshot.fractions.clear();
  w.snapshot.values.clear();
  w.snapshot.counts.clear();
  w.snapshot.median = 0;
  return w;
}

}  // namespace

LatestMetrics::LatestMetrics(RunMetrics run, config::MetricNames names)
    : names_(names), run_(std::move(run)) {}

void LatestMetrics::Publish(const LatencySnapshot& snapshot, double seconds, bool total) {
  MutexLock lock(mu_);
  if (total) {
    run_.total = ExpositionWindow{snapshot, seconds};
    run_.total_final = true;
    running_.reset();
    return;
  }
  run_.latest = ExpositionWindow{snapshot, seconds};
  if (!running_) {
    running_ = CountersOnly(snapshot, seconds);
  } else {
    running_->snapshot.AddCountersOf(snapshot);
    running_->seconds += seconds;
  }
  run_.total = *running_;
  run_.total_final = false;
}

std::string LatestMetrics::Render() const {
  PrometheusText out;
  MutexLock lock(mu_);
  WriteRunFamilies(std::span<const RunMetrics>(&run_, 1), names_, out);
  return out.Take();
}

}  // namespace perld::http
