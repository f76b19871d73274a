// A configuration file that sets every key to a non-default value, and the
// DaemonConfig it must load to. Shared by the loader and reload tests.
#pragma once

#include "daemon/config/daemon_config.h"

namespace perld::config::testing {

inline constexpr char kEveryKeyYaml[] = R"(# every key, none at its default
grpcListen: "[::1]:19717"
httpListen: 0.0.0.0:19718
grpcUnix: /run/perld-test/perld.sock
stateDir: /var/lib/perld-test
logLevel: debug
drainTimeoutMs: 2500
csvDir: /tmp/perld-csv
reportingIntervalMs: 1000
timeUnit: ns
minLatency: 7
maxLatency: 5000000000
percentiles: [99.9, 50, 99]
maxArraySizeMB: 32
maxHashMapSizeMB: 96
totalMaxHashMapSizeMB: 128
exactLatencyPageBits: 10
exactLatencySparsePageEntries: 64
exactLatencyMaxMemoryMB: 512
exactTotalLatencyMaxMemoryMB: 4096
maxQs: 1
qPerWorker: 3
maxPendingPerWorker: 1024
overflow: drop
queue: library
idleNS: 20000
mallocTrimIntervalMs: 0
benchWorkerYieldUs: 0
clock: monotonic
retention:
  maxFinishedRuns: 10
  maxWindowsPerRun: 100
  maxBytes: 2097152
  maxWindowDistributionBytesPerRun: 4096
  maxTotalSegmentBytesPerRun: 8192
limits:
  maxRunningRuns: 2
  maxBenchWorkers: 8
  maxBenchPayloadBytes: 4096
  maxMessageBytes: 65536
  maxWatchers: 4
  maxLabels: 3
  maxLabelKeyBytes: 16
  maxLabelValueBytes: 40
  maxNameBytes: 64
  maxPercentiles: 12
  maxMemoryBytes: 1073741824
grpc:
  maxConcurrentStreams: 50
  keepaliveMinPingIntervalMs: 20000
  keepaliveMaxPingStrikes: 5
  maxConnectionAgeMs: 3600000
  maxConnectionAgeGraceMs: 60000
  maxThreads: 300
ingest:
  workers: 3
  maxBatchLength: 512
  maxPairsPerReport: 2048
  maxClientsPerRun: 5
  maxStreams: 6
  maxClientMemoryBytes: 2097152
  maxMemoryBytes: 3145728
  clientTimeoutMs: 700
  clientBreakdownMaxMemoryMB: 12
  checkpoints: false
prometheus:
  names: both
  maxRuns: 7
  finishedRunSeconds: 30
http:
  maxConnections: 300
  handlerThreads: 2
  maxQueuedRequests: 17
  headerTimeoutMs: 250
sbp:
  storageName: Kafka
  action: Read_Writing
  maxConnections: 9
  maxRecordSizeMB: 4
upstream:
  target: root.example:9717
  nodeId: edge-7
  maxPairsPerReport: 4096
  maxQueuedWindows: 77
  closeTimeoutMs: 1500
  tls: true
  caFile: /etc/perld/root-ca.pem
  certFile: /etc/perld/edge.pem
  keyFile: /etc/perld/edge.key
  tokenFile: /etc/perld/root.token
auth:
  ingestTokenFile: /etc/perld/ingest.token
  queryTokenFile: /etc/perld/query.token
  metricsOpen: false
  sbpOpen: true
tls:
  certFile: /etc/perld/server.pem
  keyFile: /etc/perld/server.key
  clientCaFile: /etc/perld/clients-ca.pem
remoteWrite:
  url: https://prom.example:9090/api/v1/write
  intervalMs: 2000
  basicAuth:
    username: perld
    passwordFile: /etc/perld/remote-write.password
  tls:
    caFile: /etc/perld/prom-ca.pem
    certFile: /etc/perld/rw.pem
    keyFile: /etc/perld/rw.key
  maxQueuedSamples: 1000
  maxSamplesPerRequest: 250
  timeoutMs: 3000
)";

inline DaemonConfig EveryKeyConfig() {
  DaemonConfig c;
  c.grpc_listen = "[::1]:19717";
  c.http_listen = "0.0.0.0:19718";
  c.state_dir = "/var/lib/perld-test";
  c.log_level = log::Level::kDebug;
  c.drain_timeout_ms = 2500;
  c.csv_dir = "/tmp/perld-csv";
  c.reporting_interval_ms = 1000;
  c.latency.time_unit = TimeUnit::kNs;
  c.latency.min_latency = 7;
  c.latency.max_latency = 5'000'000'000;
  c.latency.percentiles = {50, 99, 99.9};  // sorted by the loader
  c.latency.max_array_size_mb = 32;
  c.latency.max_hash_map_size_mb = 96;
  c.latency.total_max_hash_map_size_mb = 128;
  c.latency.exact_latency_page_bits = 10;
  c.latency.exact_latency_sparse_page_entries = 64;
  c.latency.exact_latency_max_memory_mb = 512;
  c.latency.exact_total_latency_max_memory_mb = 4096;
  c.channels.max_qs = 1;
  c.channels.q_per_worker = 3;
  c.channels.max_pending_per_worker = 1024;
  c.channels.overflow = OverflowPolicy::kDrop;
  c.channels.queue = QueueKind::kLibrary;
  c.idle_ns = 20'000;
  c.malloc_trim_interval_ms = 0;
  c.bench_worker_yield_us = 0;
  c.clock = ClockSource::kMonotonic;
  c.retention.max_finished_runs = 10;
  c.retention.max_windows_per_run = 100;
  c.retention.max_bytes = 2'097'152;
  c.retention.max_window_distribution_bytes_per_run = 4096;
  c.retention.max_total_segment_bytes_per_run = 8192;
  c.limits.max_running_runs = 2;
  c.limits.max_bench_workers = 8;
  c.limits.max_bench_payload_bytes = 4096;
  c.limits.max_message_bytes = 65536;
  c.limits.max_watchers = 4;
  c.limits.max_labels = 3;
  c.limits.max_label_key_bytes = 16;
  c.limits.max_label_value_bytes = 40;
  c.limits.max_name_bytes = 64;
  c.limits.max_percentiles = 12;
  c.limits.max_memory_bytes = int64_t{1} << 30;
  c.grpc.max_concurrent_streams = 50;
  c.grpc.keepalive_min_ping_interval_ms = 20'000;
  c.grpc.keepalive_max_ping_strikes = 5;
  c.grpc.max_connection_age_ms = 3'600'000;
  c.grpc.max_connection_age_grace_ms = 60'000;
  c.grpc.max_threads = 300;
  c.grpc_unix = "/run/perld-test/perld.sock";
  c.ingest.workers = 3;
  c.ingest.max_batch_length = 512;
  c.ingest.max_pairs_per_report = 2048;
  c.ingest.max_clients_per_run = 5;
  c.ingest.max_streams = 6;
  c.ingest.max_client_memory_bytes = 2'097'152;
  c.ingest.max_memory_bytes = 3'145'728;
  c.ingest.client_timeout_ms = 700;
  c.ingest.client_breakdown_max_memory_mb = 12;
  c.ingest.checkpoints = false;
  c.prometheus.names = MetricNames::kBoth;
  c.prometheus.max_runs = 7;
  c.prometheus.finished_run_seconds = 30;
  c.http.max_connections = 300;
  c.http.handler_threads = 2;
  c.http.max_queued_requests = 17;
  c.http.header_timeout_ms = 250;
  c.sbp.storage_name = "Kafka";
  c.sbp.action = SbpAction::kReadWriting;
  c.sbp.max_connections = 9;
  c.sbp.max_record_size_mb = 4;
  c.upstream.target = "root.example:9717";
  c.upstream.node_id = "edge-7";
  c.upstream.max_pairs_per_report = 4096;
  c.upstream.max_queued_windows = 77;
  c.upstream.close_timeout_ms = 1500;
  c.upstream.tls = true;
  c.upstream.ca_file = "/etc/perld/root-ca.pem";
  c.upstream.cert_file = "/etc/perld/edge.pem";
  c.upstream.key_file = "/etc/perld/edge.key";
  c.upstream.token_file = "/etc/perld/root.token";
  c.auth.ingest_token_file = "/etc/perld/ingest.token";
  c.auth.query_token_file = "/etc/perld/query.token";
  c.auth.metrics_open = false;
  c.auth.sbp_open = true;
  c.tls.cert_file = "/etc/perld/server.pem";
  c.tls.key_file = "/etc/perld/server.key";
  c.tls.client_ca_file = "/etc/perld/clients-ca.pem";
  // remoteWrite.bearerTokenFile excludes basicAuth: the one key left at its
  // default here (remote_write_config_test covers it).
  c.remote_write.url = "https://prom.example:9090/api/v1/write";
  c.remote_write.interval_ms = 2000;
  c.remote_write.basic_auth_username = "perld";
  c.remote_write.basic_auth_password_file = "/etc/perld/remote-write.password";
  c.remote_write.tls_ca_file = "/etc/perld/prom-ca.pem";
  c.remote_write.tls_cert_file = "/etc/perld/rw.pem";
  c.remote_write.tls_key_file = "/etc/perld/rw.key";
  c.remote_write.max_queued_samples = 1000;
  c.remote_write.max_samples_per_request = 250;
  c.remote_write.timeout_ms = 3000;
  return c;
}

}  // namespace perld::config::testing
