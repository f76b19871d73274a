#include "daemon/server/memory_trimmer.h"

#include <malloc.h>

#include <chrono>

#include "daemon/common/mutex.h"
#include "daemon/core/thread_name.h"
#include "daemon/http/metric_families.h"

namespace perld::server {

MemoryTrimmer::MemoryTrimmer(const config::CurrentConfig& config)
    : config_(config), thread_([this] {
        NameThisThread("perld-trim");
        Loop();
      }) {}

MemoryTrimmer::~MemoryTrimmer() { Stop(); }

void MemoryTrimmer::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void MemoryTrimmer::Loop() {
  // Off (0): look at the config again this often, for a reload that turns it on.
  constexpr int64_t kOffRecheckMs = 10'000;
  for (;;) {
    const int64_t interval_ms = config_.Get()->malloc_trim_interval_ms;
    {
      MutexLock lock(mu_);
      if (cv_.WaitFor(mu_, std::chrono::milliseconds(interval_ms > 0 ? interval_ms : kOffRecheckMs),
                      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; })) {
        return;
      }
    }
    if (config_.Get()->malloc_trim_interval_ms <= 0) continue;  // off (or turned off meanwhile)
    const auto start = std::chrono::steady_clock::now();
    malloc_trim(0);
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count();
    trim_ns_.fetch_add(ns, std::memory_order_relaxed);
    if (ns > max_trim_ns()) max_trim_ns_.store(ns, std::memory_order_relaxed);
    trims_.fetch_add(1, std::memory_order_relaxed);
  }
}

std::vector<prometheus::MetricFamily> MemoryTrimmer::Collect() const {
  http::MetricFamilies f;
  http::AddSingle(&f, "perld_malloc_trims_total", prometheus::MetricType::Counter,
                  "Times the daemon handed the allocator's free pages back to the kernel "
                  "(mallocTrimIntervalMs).",
                  static_cast<double>(trims()));
  http::AddSingle(&f, "perld_malloc_trim_seconds_total", prometheus::MetricType::Counter,
                  "Time spent handing the allocator's free pages back, seconds.",
                  static_cast<double>(trim_ns()) / 1e9);
  http::AddSingle(&f, "perld_malloc_trim_max_seconds", prometheus::MetricType::Gauge,
                  "The longest a trim took since the daemon started, seconds.",
                  static_cast<double>(max_trim_ns()) / 1e9);
  return f;
}

}  // namespace perld::server
