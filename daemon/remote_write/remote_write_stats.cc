#include "daemon/remote_write/remote_write_stats.h"

#include <prometheus/metric_family.h>

#include "absl/strings/str_cat.h"
#include "daemon/http/metric_families.h"

namespace perld::remote_write {
namespace {

template <class T>
double AsDouble(T value) {
  return static_cast<double>(value);
}

}  // namespace

const char* RemoteWriteStats::DropReasonName(DropReason reason) {
  switch (reason) {
    case DropReason::kQueueFull:
      return "queue_full";
    case DropReason::kRejected:
      return "rejected";
    case DropReason::kShutdown:
    case DropReason::kReasons:
      break;
  }
  return "shutdown";
}

void RemoteWriteStats::AddRequest(int status) {
  MutexLock lock(mu_);
  ++requests_[status];
}

uint64_t RemoteWriteStats::requests(int status) const {
  MutexLock lock(mu_);
  const auto it = requests_.find(status);
  return it == requests_.end() ? 0 : it->second;
}

std::vector<prometheus::MetricFamily> RemoteWriteStats::Collect() const {
  using prometheus::MetricType;
  http::MetricFamilies f;
  http::AddSingle(&f, "perld_remote_write_samples_collected_total", MetricType::Counter,
                  "Samples of /metrics' series queued for remote write (remoteWrite.url).",
                  AsDouble(collected()));
  http::AddSingle(&f, "perld_remote_write_samples_sent_total", MetricType::Counter,
                  "Samples the remote-write receiver accepted.", AsDouble(sent()));
  prometheus::MetricFamily& dropped = http::AddFamily(
      &f, "perld_remote_write_samples_dropped_total", MetricType::Counter,
      "Samples never sent, by why: queue_full (oldest dropped at "
      "remoteWrite.maxQueuedSamples), rejected (the receiver refused them: 4xx but 429), "
      "shutdown (still queued after the last flush).");
  for (size_t r = 0; r < static_cast<size_t>(DropReason::kReasons); ++r) {
    const auto reason = static_cast<DropReason>(r);
    http::AddSample(dropped, AsDouble(this->dropped(reason)), {{"reason", DropReasonName(reason)}});
  }
  prometheus::MetricFamily& requests =
      http::AddFamily(&f, "perld_remote_write_requests_total", MetricType::Counter,
                      "Remote-write requests by HTTP status (error: no answer).");
  {
    MutexLock lock(mu_);
    for (const auto& [status, n] : requests_) {
      http::AddSample(requests, AsDouble(n),
                      {{"code", status == 0 ? std::string("error") : absl::StrCat(status)}});
    }
  }
  http::AddSingle(&f, "perld_remote_write_retries_total", MetricType::Counter,
                  "Remote-write requests repeated after 429, 5xx or no answer.",
                  AsDouble(retries()));
  http::AddSingle(&f, "perld_remote_write_queue_samples", MetricType::Gauge,
                  "Samples queued for remote write (waiting and in flight).", AsDouble(queued()));
  http::AddSingle(&f, "perld_remote_write_queue_capacity_samples", MetricType::Gauge,
                  "remoteWrite.maxQueuedSamples.",
                  AsDouble(capacity_.load(std::memory_order_relaxed)));
  http::AddSingle(&f, "perld_remote_write_collections_total", MetricType::Counter,
                  "Collections of /metrics' series for remote write.", AsDouble(collections()));
  http::AddSingle(&f, "perld_remote_write_last_sent_timestamp_seconds", MetricType::Gauge,
                  "Collection time of the newest sample the receiver accepted, Unix seconds.",
                  AsDouble(last_sent_ms_.load(std::memory_order_relaxed)) / 1e3);
  prometheus::MetricFamily& cpu =
      http::AddFamily(&f, "perld_remote_write_cpu_seconds_total", MetricType::Counter,
                      "CPU time of remote write's threads: collect (render and parse /metrics), "
                      "send (encode, compress, HTTP).");
  http::AddSample(cpu, AsDouble(collect_cpu_ns_.load(std::memory_order_relaxed)) / 1e9,
                  {{"thread", "collect"}});
  http::AddSample(cpu, AsDouble(send_cpu_ns_.load(std::memory_order_relaxed)) / 1e9,
                  {{"thread", "send"}});
  return f;
}

}  // namespace perld::remote_write
