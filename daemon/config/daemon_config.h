// DaemonConfig: the effective configuration of one perld daemon, immutable
// once loaded. Filled from config/perld.yaml (every key documented there with
// its default) and then from command-line flags, which override the file.
//
// Plain data. Threads: built once on the main thread, then shared read-only
// (SIGHUP builds a new instance and swaps what may change; see
// ReloadDecision).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/common/log.h"
#include "daemon/core/clock.h"
#include "daemon/core/latency_config.h"
#include "daemon/core/timestamp_channels.h"

namespace perld::config {

// Where finished runs and their windows are kept (memory and SQLite).
struct RetentionConfig {
  int64_t max_finished_runs = 1000;        // key retention.maxFinishedRuns, >= 1
  int64_t max_windows_per_run = 2048;      // key retention.maxWindowsPerRun, >= 1
  int64_t max_bytes = int64_t{256} << 20;  // key retention.maxBytes: history bytes, >= 1 MiB
  // key retention.maxWindowDistributionBytesPerRun: the stored exact
  // distributions of one run's periodic windows (what range queries merge),
  // >= 0 (0: none kept). A window past it is stored without its distribution
  // and a range that includes it is refused, never answered from part of it.
  int64_t max_window_distribution_bytes_per_run = int64_t{1} << 30;
  // key retention.maxTotalSegmentBytesPerRun: the stored exact distributions
  // of one run's total-window segments (a total window that outgrew its
  // memory budget spills each segment; the run's total is their streaming
  // merge), >= 0. Past it the run's total has exact counters and no
  // percentiles (never some computed from part of the run).
  int64_t max_total_segment_bytes_per_run = int64_t{16} << 30;

  bool operator==(const RetentionConfig&) const = default;
};

// What one client or request may ask of the daemon.
struct LimitsConfig {
  int64_t max_running_runs = 16;   // key limits.maxRunningRuns, [1, 4096]
  int64_t max_bench_workers = 64;  // key limits.maxBenchWorkers: writers + readers, [1, 4096]
  int64_t max_bench_payload_bytes = 1 << 20;  // key limits.maxBenchPayloadBytes: per worker
  int64_t max_message_bytes = 4 << 20;        // key limits.maxMessageBytes: gRPC receive limit
  int64_t max_watchers = 256;                 // key limits.maxWatchers: concurrent WatchRun streams
  // Caps on what one request may carry (service/request_limits.h): over one,
  // INVALID_ARGUMENT naming the key.
  int64_t max_labels = 32;               // key limits.maxLabels: labels of a run, [0, 4096]
  int64_t max_label_key_bytes = 128;     // key limits.maxLabelKeyBytes, [1, 65536]
  int64_t max_label_value_bytes = 1024;  // key limits.maxLabelValueBytes, [0, 1048576]
  // key limits.maxNameBytes: run names, client names and client ids, [1, 65536]
  int64_t max_name_bytes = 256;
  // key limits.maxPercentiles: a run's percentile list (IngestOpen, the
  // percentiles key) and a GetPercentiles/GetClients request, [1, 100000]
  int64_t max_percentiles = 1000;
  // key limits.maxMemoryBytes: what every running run together may reserve
  // for its windows and pending timestamps (runs/run_memory_budget.h); 0:
  // automatic (75% of the smaller of physical memory and the cgroup limit).
  int64_t max_memory_bytes = 0;

  bool operator==(const LimitsConfig&) const = default;
};

// The gRPC server's process-wide caps (grpc::ServerBuilder; all need a restart).
struct GrpcConfig {
  // key grpc.maxConcurrentStreams: calls at once on one connection (HTTP/2
  // SETTINGS_MAX_CONCURRENT_STREAMS; more wait in the client), [1, 2^31-1].
  int64_t max_concurrent_streams = 1000;
  // key grpc.keepaliveMinPingIntervalMs: a client pinging more often than this
  // while the server sends nothing gets a strike, [0, 86'400'000].
  int64_t keepalive_min_ping_interval_ms = 10'000;
  // key grpc.keepaliveMaxPingStrikes: strikes before the connection gets
  // GOAWAY (too_many_pings); 0 never, [0, 1000].
  int64_t keepalive_max_ping_strikes = 2;
  // key grpc.maxConnectionAgeMs: a connection older than this gets GOAWAY
  // (clients reconnect); 0 never, [0, 2^31-1].
  int64_t max_connection_age_ms = 0;
  // key grpc.maxConnectionAgeGraceMs: calls open at that point may run this
  // long before the connection closes; 0 no limit, [0, 2^31-1].
  int64_t max_connection_age_grace_ms = 0;
  // key grpc.maxThreads: threads of the gRPC server (grpc::ResourceQuota);
  // every open stream and every call in progress holds one; past it a new
  // call is refused (RESOURCE_EXHAUSTED); 0 no limit, [0, 1'000'000].
  int64_t max_threads = 2048;

  bool operator==(const GrpcConfig&) const = default;
};

// Remote clients streaming into runs (perld.v1.Ingest).
struct IngestConfig {
  // key ingest.workers: threads that parse and decode Ingest messages
  // (perld-ingest-N); 0: IngestWorkers::ThreadsFor's default.
  int64_t workers = 0;
  int64_t max_batch_length = 65'536;  // key ingest.maxBatchLength: timestamps per TimestampBatch
  int64_t max_pairs_per_report = 1 << 20;  // key ingest.maxPairsPerReport: pairs per WindowReport
  int64_t max_clients_per_run = 64;        // key ingest.maxClientsPerRun
  int64_t max_streams = 256;               // key ingest.maxStreams: open Ingest streams
  // key ingest.maxClientMemoryBytes: one client's windows received and not
  // yet merged (a stream over it waits for the recorder; one report larger
  // than it is refused).
  int64_t max_client_memory_bytes = int64_t{256} << 20;
  // key ingest.maxMemoryBytes: every client's windows received and not yet
  // merged, all runs together (over it streams wait; one report larger than
  // it is refused).
  int64_t max_memory_bytes = int64_t{1} << 30;
  // key ingest.clientTimeoutMs: how long a client whose stream broke without
  // a close keeps its run open for a reconnect.
  int64_t client_timeout_ms = 30'000;
  // key ingest.clientBreakdownMaxMemoryMB: every windows client's own exact
  // distribution together (Query.GetClients); 0 keeps counters only.
  int64_t client_breakdown_max_memory_mb = 256;
  // key ingest.checkpoints: new ingest runs are checkpointed to the state
  // database at every closed window, and a message is acknowledged durable
  // only once a checkpoint holds it (a crashed perld resumes the run).
  bool checkpoints = true;

  bool operator==(const IngestConfig&) const = default;
};

// The Prometheus exporter (/metrics).
enum class MetricNames { kPerld, kSbk, kBoth };
struct PrometheusConfig {
  // key prometheus.names: perld (perld_* families), sbk (SBK's PrometheusLogger
  // names, so SBK's Grafana dashboard works unchanged) or both.
  MetricNames names = MetricNames::kPerld;
  int64_t max_runs = 100;  // key prometheus.maxRuns: runs exported, most recent first
  // key prometheus.finishedRunSeconds: an ended run is exported this long
  // after its end, then drops out of /metrics (it stays queryable).
  int64_t finished_run_seconds = 600;

  bool operator==(const PrometheusConfig&) const = default;
};

// The HTTP listener's resource bounds (http::HttpServer; README "HTTP
// listener"). All [restart]: the server takes them when it starts.
struct HttpConfig {
  int64_t max_connections = 1024;     // key http.maxConnections: open connections, [1, 65536]
  int64_t handler_threads = 4;        // key http.handlerThreads: threads running routes, [1, 64]
  int64_t max_queued_requests = 256;  // key http.maxQueuedRequests: waiting for one, [1, 65536]
  // key http.headerTimeoutMs: a connection's TLS handshake and request head
  // (a later request's head from its first byte) within this, [50, 1000].
  int64_t header_timeout_ms = 1000;

  bool operator==(const HttpConfig&) const = default;
};

// SBK's Storage Benchmark Protocol (SbpService): perld as a drop-in SBM.
// SBK's EnumAction, in its numbering.
enum class SbpAction {
  kWriting,
  kReading,
  kWriteReading,
  kWriteOnlyReading,
  kReadWriting,
  kReadOnlyWriting
};
struct SbpConfig {
  // key sbp.storageName: the storage SBK clients must name (case-insensitive).
  std::string storage_name = "PerlBench";
  SbpAction action = SbpAction::kWriting;  // key sbp.action: SBK's action name
  int64_t max_connections = 1000;          // key sbp.maxConnections: clients at once
  int64_t max_record_size_mb = 16;         // key sbp.maxRecordSizeMB: an SBP cap (MB)

  bool operator==(const SbpConfig&) const = default;
};

// Tiers: forward every run's closed windows to a parent perld (UpstreamForwarder).
struct UpstreamConfig {
  // key upstream.target: the parent's gRPC address (HOST:PORT or unix:PATH);
  // "" (default): no forwarding.
  std::string target;
  // key upstream.nodeId: this daemon's name at the parent (its client ids are
  // "<nodeId>/<run id>"); "" -> $PERLD_NODE_ID, else a UUID kept in the
  // state directory (state/node_id.h).
  std::string node_id;
  int64_t max_pairs_per_report = 65'536;  // key upstream.maxPairsPerReport: a window is split
  int64_t max_queued_windows = 10'000;    // key upstream.maxQueuedWindows: unacknowledged, all runs
  int64_t close_timeout_ms = 10'000;      // key upstream.closeTimeoutMs: a run's final acks
  // The parent's security (client side of README "Security").
  bool tls = false;        // key upstream.tls: TLS with system roots even without caFile
  std::string ca_file;     // key upstream.caFile: PEM roots for the parent's certificate
  std::string cert_file;   // key upstream.certFile: this daemon's client certificate (mTLS)
  std::string key_file;    // key upstream.keyFile: its private key (a secret file)
  std::string token_file;  // key upstream.tokenFile: the parent's ingest token

  bool operator==(const UpstreamConfig&) const = default;
};

// Bearer tokens (README "Security"). Auth is on when either token file is
// set: every gRPC call and every HTTP route except /healthz and /readyz (and
// /metrics while metricsOpen) then needs "authorization: Bearer <token>".
// The ingest token may do everything; the query token may only read.
struct AuthConfig {
  std::string ingest_token_file;  // key auth.ingestTokenFile: Ingest, Control (and Query)
  std::string query_token_file;   // key auth.queryTokenFile: Query and the HTTP read routes
  bool metrics_open = true;       // key auth.metricsOpen: /metrics without a token
  // key auth.sbpOpen: SBK's SBP service without a token (SBK cannot send one);
  // while false and auth is on, SBP calls need the ingest token.
  bool sbp_open = false;

  bool enabled() const { return !ingest_token_file.empty() || !query_token_file.empty(); }
  bool operator==(const AuthConfig&) const = default;
};

// TLS for the gRPC TCP listener and the HTTP listener (the Unix socket stays
// plaintext: its file mode decides who connects).
struct TlsConfig {
  std::string cert_file;       // key tls.certFile: PEM certificate chain ("" no TLS)
  std::string key_file;        // key tls.keyFile: its private key (a secret file)
  std::string client_ca_file;  // key tls.clientCaFile: mutual TLS: clients need a certificate
                               // signed by these roots ("" no client certificates)

  bool enabled() const { return !cert_file.empty(); }
  bool operator==(const TlsConfig&) const = default;
};

// Prometheus remote write 1.0 (remote_write/remote_writer.h): the series of
// /metrics pushed to a receiver, for hosts nothing scrapes. Off unless url is
// set. Everything but maxQueuedSamples is [reload]: SIGHUP re-reads the
// credential files too.
struct RemoteWriteConfig {
  // key remoteWrite.url: http(s)://HOST[:PORT]/PATH of the receiver (Prometheus:
  // /api/v1/write); "" (default): no remote write.
  std::string url;
  int64_t interval_ms = 5'000;    // key remoteWrite.intervalMs: collect every, [100, 3'600'000]
  std::string bearer_token_file;  // key remoteWrite.bearerTokenFile: "Authorization: Bearer"
  // key remoteWrite.basicAuth.username / remoteWrite.basicAuth.passwordFile:
  // HTTP basic auth (given together; not with bearerTokenFile).
  std::string basic_auth_username;
  std::string basic_auth_password_file;
  std::string tls_ca_file;    // key remoteWrite.tls.caFile: PEM roots (default: the system's)
  std::string tls_cert_file;  // key remoteWrite.tls.certFile: client certificate (mutual TLS)
  std::string tls_key_file;   // key remoteWrite.tls.keyFile: its key (a secret file)
  // key remoteWrite.maxQueuedSamples: samples waiting to be sent; past it the
  // oldest are dropped and counted, [1, 100'000'000]. [restart]
  int64_t max_queued_samples = 500'000;
  // key remoteWrite.maxSamplesPerRequest: samples in one request, [1, 1'000'000].
  int64_t max_samples_per_request = 5'000;
  // key remoteWrite.timeoutMs: one request's connect, send and answer, [100, 600'000].
  int64_t timeout_ms = 10'000;

  bool enabled() const { return !url.empty(); }
  bool operator==(const RemoteWriteConfig&) const = default;
};

struct DaemonConfig {
  // Listeners and files.
  std::string grpc_listen = "127.0.0.1:9717";  // key grpcListen / --grpc-listen, HOST:PORT
  std::string http_listen = "127.0.0.1:9719";  // key httpListen / --http-listen, HOST:PORT
  // key grpcUnix / --grpc-unix: a Unix socket path for gRPC as well ("" off;
  // under systemd the daemon defaults it to $RUNTIME_DIRECTORY/perld.sock).
  std::string grpc_unix;
  std::string state_dir;  // key stateDir / --state-dir; "" -> $STATE_DIRECTORY or ./perld-state
  log::Level log_level = log::Level::kInfo;  // key logLevel
  int64_t drain_timeout_ms = 10'000;
  std::string csv_dir;  // key csvDir: "" none; else each run writes DIR/run-<id>.csv (SBK CSV) //
                        // key drainTimeoutMs: SIGTERM grace for open streams

  // Defaults for new runs (SBK PerL properties). `latency.max_latency` is
  // DefaultMaxLatency(timeUnit) unless maxLatency is given.
  int64_t reporting_interval_ms = 5'000;  // key reportingIntervalMs, [10, 86'400'000]
  LatencyConfig latency;     // timeUnit, minLatency, maxLatency, percentiles, maxArraySizeMB,
                             // maxHashMapSizeMB, totalMaxHashMapSizeMB, exactLatencyPageBits,
                             // exactLatencySparsePageEntries, exactLatencyMaxMemoryMB,
                             // exactTotalLatencyMaxMemoryMB
  ChannelOptions channels;   // maxQs, qPerWorker, maxPendingPerWorker, overflow (block|drop),
                             // queue (mpsc|library); producer_idle_ns is not a key (default)
  int64_t idle_ns = 10'000;  // key idleNS: the recorder's first park when idle
  // key mallocTrimIntervalMs, [0, 86'400'000]: how often the allocator's
  // free pages go back to the kernel (server::MemoryTrimmer); 0 never.
  // [reload: from the next interval]
  int64_t malloc_trim_interval_ms = 60'000;
  // key benchWorkerYieldUs, [0, 1'000'000]: in-process bench workers offer
  // their core to other threads about this often (bench::WorkerPlan::
  // yield_every_ns); 0 never.
  int64_t bench_worker_yield_us = 200;
  // key clock: auto | tsc | monotonic (daemon/core/clock.h ClockSource), the
  // clock of in-process benches that do not give --clock. tsc is refused
  // (at start: the daemon does not start; on SIGHUP: the old one is kept)
  // when the CPU lacks an invariant TSC or its CPUs disagree. [reload: new
  // benches]
  ClockSource clock = ClockSource::kAuto;

  RetentionConfig retention;
  LimitsConfig limits;
  GrpcConfig grpc;
  IngestConfig ingest;
  PrometheusConfig prometheus;
  HttpConfig http;
  SbpConfig sbp;
  UpstreamConfig upstream;
  AuthConfig auth;
  TlsConfig tls;
  RemoteWriteConfig remote_write;
};

// Field-by-field equality, LatencyConfig and ChannelOptions included
// (percentiles compared in order: load and Normalize() sort them).
bool operator==(const DaemonConfig& a, const DaemonConfig& b);

}  // namespace perld::config
