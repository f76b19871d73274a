#include "daemon/config/daemon_config.h"

namespace perld::config {
namespace {

bool SameLatency(const LatencyConfig& a, const LatencyConfig& b) {
  return a.time_unit == b.time_unit && a.min_latency == b.min_latency &&
         a.max_latency == b.max_latency && a.percentiles == b.percentiles &&
         a.max_array_size_mb == b.max_array_size_mb &&
         a.max_hash_map_size_mb == b.max_hash_map_size_mb &&
         a.total_max_hash_map_size_mb == b.total_max_hash_map_size_mb &&
         a.exact_latency_page_bits == b.exact_latency_page_bits &&
         a.exact_latency_sparse_page_entries == b.exact_latency_sparse_page_entries &&
         a.exact_latency_max_memory_mb == b.exact_latency_max_memory_mb &&
         a.exact_total_latency_max_memory_mb == b.exact_total_latency_max_memory_mb;
}

bool SameChannels(const ChannelOptions& a, const ChannelOptions& b) {
  return a.queue == b.queue && a.max_qs == b.max_qs && a.q_per_worker == b.q_per_worker &&
         a.max_pending_per_worker == b.max_pending_per_worker && a.overflow == b.overflow &&
         a.producer_idle_ns == b.producer_idle_ns;
}

}  // namespace

bool operator==(const DaemonConfig& a, const DaemonConfig& b) {
  return a.grpc_listen == b.grpc_listen && a.http_listen == b.http_listen &&
         a.state_dir == b.state_dir && a.log_level == b.log_level &&
         a.drain_timeout_ms == b.drain_timeout_ms && a.csv_dir == b.csv_dir &&
         a.reporting_interval_ms == b.reporting_interval_ms && SameLatency(a.latency, b.latency) &&
         SameChannels(a.channels, b.channels) && a.idle_ns == b.idle_ns &&
         a.malloc_trim_interval_ms == b.malloc_trim_interval_ms &&
         a.bench_worker_yield_us == b.bench_worker_yield_us && a.clock == b.clock &&
         a.retention == b.retention && a.limits == b.limits && a.grpc == b.grpc &&
         a.grpc_unix == b.grpc_unix && a.ingest == b.ingest && a.prometheus == b.prometheus &&
         a.http == b.http && a.sbp == b.sbp && a.upstream == b.upstream && a.auth == b.auth &&
         a.tls == b.tls && a.remote_write == b.remote_write;
}

}  // namespace perld::config
