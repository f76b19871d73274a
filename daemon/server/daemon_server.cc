#include "daemon/server/daemon_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/resource_quota.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/bench/perlbench_worker.h"
#include "daemon/common/host_port.h"
#include "daemon/common/log.h"
#include "daemon/config/current_config.h"
#include "daemon/config/listen_address.h"
#include "daemon/core/clock.h"
#include "daemon/http/http_server.h"
#include "daemon/http/live_api.h"
#include "daemon/http/openmetrics.h"
#include "daemon/ingest/ingest_checkpointer.h"
#include "daemon/ingest/ingest_workers.h"
#include "daemon/ingest/run_table.h"
#include "daemon/jobs/bench_jobs.h"
#include "daemon/remote_write/remote_writer.h"
#include "daemon/runs/run_manager.h"
#include "daemon/server/daemon_metrics.h"
#include "daemon/server/grpc_drain.h"
#include "daemon/server/lifecycle.h"
#include "daemon/server/memory_budget.h"
#include "daemon/server/memory_trimmer.h"
#include "daemon/server/run_csv_writer.h"
#include "daemon/server/server_security.h"
#include "daemon/service/call_auth.h"
#include "daemon/service/control_service.h"
#include "daemon/service/ingest_service.h"
#include "daemon/service/query_service.h"
#include "daemon/service/sbp_service.h"
#include "daemon/state/node_id.h"
#include "daemon/state/run_history.h"
#include "daemon/state/state_store.h"
#include "daemon/tiers/parent_stream.h"
#include "daemon/tiers/upstream_forwarder.h"
#include "perld/version.h"

namespace perld::server {
namespace {

constexpr const char* kServices[] = {"perld.v1.Query", "perld.v1.Control", "perld.v1.Ingest",
                                     "Service"};

// One line on what protects the listeners, and a warning for every listener
// beyond loopback that lacks TLS or auth (never a secret, only which files).
void LogSecurity(const config::DaemonConfig& config) {
  const config::AuthConfig& auth = config.auth;
  if (auth.enabled()) {
    log::Info("auth: bearer tokens required (ingest token ",
              auth.ingest_token_file.empty() ? "none" : "from " + auth.ingest_token_file,
              ", query token ",
              auth.query_token_file.empty() ? "none" : "from " + auth.query_token_file,
              "; /metrics ", auth.metrics_open ? "open" : "needs a token", "; SBP ",
              auth.sbp_open ? "open to anyone (auth.sbpOpen)" : "needs the ingest token", ")");
  }
  if (config.tls.enabled()) {
    log::Info("tls: the gRPC TCP and HTTP listeners serve TLS with ", config.tls.cert_file,
              config.tls.client_ca_file.empty()
                  ? ""
                  : absl::StrCat("; client certificates signed by ", config.tls.client_ca_file,
                                 " are required"));
  }
  for (const auto& [name, address] :
       {std::pair<const char*, const std::string&>{"gRPC", config.grpc_listen},
        std::pair<const char*, const std::string&>{"HTTP", config.http_listen}}) {
    absl::StatusOr<config::ListenAddress> listen = config::ParseListenAddress(address);
    if (!listen.ok() || common::IsLoopbackHost(listen->host)) continue;
    if (!config.tls.enabled()) {
      log::Warning(name, " listens beyond loopback on ", address, " without TLS",
                   auth.enabled() ? ": tokens and data cross the network in clear text" : "");
    }
    if (!auth.enabled()) {
      log::Warning(name, " listens beyond loopback on ", address,
                   " without auth: anyone who reaches it may read",
                   std::string_view(name) == "gRPC" ? ", start runs and write into them" : " runs");
    }
  }
}

// Leaves server reflection out of a server: with auth on it would describe
// every service to callers without a token (and it has no token check).
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    const std::string reflection = grpc::reflection::ProtoServerReflectionPlugin().name();
    std::erase_if(*plugins, [&](const auto& plugin) { return plugin->name() == reflection; });
  }
};

// The gRPC server's process-wide caps (grpc.*): streams per connection,
// keepalive enforcement, connection age and the thread quota.
void ApplyGrpcCaps(const config::DaemonConfig& config, grpc::ServerBuilder* builder) {
  const config::GrpcConfig& g = config.grpc;
  const auto arg = [builder](const char* name, int64_t value) {
    builder->AddChannelArgument(name, static_cast<int>(std::min<int64_t>(value, INT32_MAX)));
  };
  arg(GRPC_ARG_MAX_CONCURRENT_STREAMS, g.max_concurrent_streams);
  arg(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, g.keepalive_min_ping_interval_ms);
  arg(GRPC_ARG_HTTP2_MAX_PING_STRIKES, g.keepalive_max_ping_strikes);
  // A client may ping at that interval also with no call open (else gRPC
  // allows one ping per two hours then).
  arg(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  if (g.max_connection_age_ms > 0) {
    arg(GRPC_ARG_MAX_CONNECTION_AGE_MS, g.max_connection_age_ms);
    arg(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
        g.max_connection_age_grace_ms > 0 ? g.max_connection_age_grace_ms : INT32_MAX);
  }
  if (g.max_threads > 0) {
    grpc::ResourceQuota quota("perld");
    quota.SetMaxThreads(static_cast<int>(g.max_threads));
    builder->SetResourceQuota(quota);
  }
}

// `route` behind `auth` (HTTP routes only read: Access::kRead).
http::HttpRoute Guarded(const service::CallAuth& auth, http::HttpRoute route) {
  if (!auth.enabled()) return route;
  route.handler = [&auth, handler = std::move(route.handler)](const http::HttpRequest& request) {
    switch (auth.Check(request.authorization, service::Access::kRead)) {
      case service::AuthVerdict::kAllowed:
        return handler(request);
      case service::AuthVerdict::kPermissionDenied:
        return http::HttpResponse{403, "this token may not read\n"};
      case service::AuthVerdict::kUnauthenticated:
        break;
    }
    return http::HttpResponse{401,
                              "this perld requires a token: send 'Authorization: Bearer <token>' "
                              "(the live page: open /#token=<token>)\n"};
  };
  return route;
}

// Logs run lifecycle events (dispatcher thread).
class RunLog final : public runs::RunObserver {
 public:
  void OnRunStarted(const runs::RunInfo& info) override {
    log::Info("run ", info.id, " '", info.spec.name, "' started (source ",
              runs::RunSourceName(info.spec.source), ", ",
              TimeUnitSymbol(info.spec.latency.time_unit), ", ", info.spec.parameters, ")");
  }
  void OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord& total) override {
    log::Info("run ", info.id, " '", info.spec.name, "' ", runs::RunStateName(info.state), ": ",
              total.snapshot.records, " records, ", total.snapshot.invalid, " invalid",
              info.failure_reason.empty() ? "" : absl::StrCat(" (", info.failure_reason, ")"));
  }
};

}  // namespace

// The daemon's components. Members are destroyed after every step stopped
// (`lifecycle` is declared last, so it is destroyed first).
struct DaemonServer::Parts {
  Parts(const config::DaemonConfig& config, LifecycleHooks hooks)
      : current(config), lifecycle(std::move(hooks)) {}

  config::CurrentConfig current;
  bench::BenchClocks clocks;  // by `clock` (config) or a bench's own --clock
  RunLog run_log;
  std::unique_ptr<state::RunHistory> history;
  std::unique_ptr<RunCsvWriter> csv;
  std::unique_ptr<service::CallAuth> auth;
  std::shared_ptr<grpc::ServerCredentials> grpc_credentials;
  http::HttpTls https;
  std::shared_ptr<grpc::Channel> upstream_channel;     // null: no upstream.target
  std::unique_ptr<tiers::UpstreamForwarder> upstream;  // null: no upstream.target
  std::unique_ptr<runs::RunManager> manager;
  std::vector<state::StoredRun> resumable;  // from "runs" to "resume"
  std::unique_ptr<jobs::BenchJobs> jobs;
  std::unique_ptr<service::QueryService> query;
  std::unique_ptr<service::ControlService> control;
  ingest::IngestStats ingest_stats;
  std::unique_ptr<ingest::RunTable> ingest_runs;
  std::unique_ptr<ingest::IngestCheckpointer> checkpointer;
  std::unique_ptr<service::IngestService> ingest;
  std::unique_ptr<service::SbpService> sbp;
  service::GrpcCallStats grpc_stats;
  std::unique_ptr<MemoryTrimmer> trimmer;
  std::unique_ptr<DaemonMetrics> metrics;
  // Idle (no thread) without remoteWrite.url.
  std::unique_ptr<remote_write::RemoteWriter> remote_write;
  http::HttpServerStats http_stats;  // written by `http`, read by `metrics`
  int64_t start_mono_ns = MonotonicNanos();
  GrpcDrain grpc_drain;  // counts the calls of `grpc`: outlives it
  std::unique_ptr<grpc::Server> grpc;
  std::unique_ptr<http::HttpServer> http;
  std::atomic<bool> ready{false};
  Listeners listeners;
  bool shut_down = false;
  Lifecycle lifecycle;  // last: destroyed first, stopping every step
};

namespace {

using Parts = DaemonServer::Parts;

// The steps' start and stop functions, in start order. A start either
// succeeds or leaves nothing its own stop would have to undo.

// "security": a token or key file others can read, or a certificate that
// does not load, stops the start before anything listens.
absl::Status LoadSecurity(Parts* p, const config::DaemonConfig& config) {
  absl::StatusOr<std::unique_ptr<service::CallAuth>> auth = service::CallAuth::Create(config.auth);
  if (!auth.ok()) return auth.status();
  p->auth = std::move(*auth);
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> grpc_credentials =
      GrpcServerCredentials(config.tls);
  if (!grpc_credentials.ok()) return grpc_credentials.status();
  p->grpc_credentials = std::move(*grpc_credentials);
  absl::StatusOr<http::HttpTls> https = HttpsFiles(config.tls);
  if (!https.ok()) return https.status();
  p->https = std::move(*https);
  // Remote write's credentials and TLS files (its threads start after "http").
  remote_write::RemoteWriter::Options rw;
  rw.render = [p](std::string* text) {
    p->metrics->Render(text, DaemonMetrics::Reader::kRemoteWrite);
  };
  absl::StatusOr<std::unique_ptr<remote_write::RemoteWriter>> writer =
      remote_write::RemoteWriter::Create(config.remote_write, std::move(rw));
  if (!writer.ok()) return writer.status();
  p->remote_write = std::move(*writer);
  if (!config.upstream.target.empty()) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        tiers::OpenParentChannel(config.upstream);
    if (!channel.ok()) return channel.status();
    p->upstream_channel = std::move(*channel);
  }
  LogSecurity(config);
  return absl::OkStatus();
}

// "state": the state directory; an unusable one (or one another perld
// holds) stops the start.
absl::Status OpenState(Parts* p, const config::DaemonConfig& config, const std::string& state_dir) {
  state::StateStoreOptions store_options;
  store_options.log = [](std::string_view line) { log::Error("state: ", std::string(line)); };
  absl::StatusOr<std::unique_ptr<state::StateStore>> store =
      state::StateStore::Open(state_dir, config.retention, store_options);
  if (!store.ok()) return store.status();
  p->history = std::make_unique<state::RunHistory>(std::move(*store));
  return absl::OkStatus();
}

void FlushState(Parts* p) {
  if (absl::Status s = p->history->store().Flush(); !s.ok()) {
    log::Error("state: not everything was stored: ", s.message());
  }
}

// "runs": the bench clock and the run manager (not running yet) with the
// stored runs: finished runs come back, the ingest runs the daemon was
// running are kept for "resume".
absl::Status BuildRuns(Parts* p, const config::DaemonConfig& config) {
  // The bench clock (`clock`): made now, so a refused `clock: tsc` stops
  // the start with the measured reason.
  absl::StatusOr<const bench::BenchClock*> clock = p->clocks.Get(config.clock);
  if (!clock.ok()) return clock.status();
  if ((*clock)->forced()) {
    log::Warning("bench clock: ", (*clock)->info().description);
  } else {
    log::Info("bench clock: ", (*clock)->info().description);
  }

  runs::RunManager::Options options;
  options.recorder.idle_ns = config.idle_ns;
  options.retention = config.retention;
  options.max_running_runs = config.limits.max_running_runs;
  const MemoryBudget budget = ResolveMemoryBudget(config.limits.max_memory_bytes);
  options.max_memory_bytes = budget.bytes;
  log::Info("runs' memory budget: ", budget.bytes, " bytes (", budget.source, ")");
  options.first_id = p->history->NextRunId();
  state::StateStore* store_for_ids = &p->history->store();
  options.reserve_ids = [store_for_ids](runs::RunId through) {
    return store_for_ids->ReserveRunIds(through);
  };
  options.stored_totals.final_total = [store_for_ids](runs::RunId id, int64_t segments,
                                                      const PercentileSet& set,
                                                      LatencySnapshot* out) {
    return store_for_ids->MergeTotalSegments(id, segments, set, out);
  };
  options.stored_totals.running_total = [store_for_ids](
                                            runs::RunId id, const runs::RunningTotalParts& parts,
                                            const PercentileSet& set, LatencySnapshot* out) {
    return store_for_ids->MergeRunningTotal(id, parts, set, out);
  };

  p->manager = std::make_unique<runs::RunManager>(options);
  absl::StatusOr<std::vector<state::StoredRun>> resumable =
      p->history->Restore(p->manager->registry());
  if (!resumable.ok()) return resumable.status();
  p->resumable = std::move(*resumable);
  return absl::OkStatus();
}

// "upstream" (upstream.target only): the forwarder to the parent, with the
// streams a previous process stored.
absl::Status BuildUpstream(Parts* p, const config::DaemonConfig& config,
                           const std::string& state_dir) {
  if (config.upstream.target.empty()) return absl::OkStatus();
  // The edge's name at its parent: configured, $PERLD_NODE_ID, or the
  // UUID kept in the state directory.
  config::UpstreamConfig upstream = config.upstream;
  absl::StatusOr<std::string> node_id = state::ResolveNodeId(
      upstream.node_id, std::getenv("PERLD_NODE_ID"),  // NOLINT(concurrency-mt-unsafe)
      state_dir);
  if (!node_id.ok()) return node_id.status();
  upstream.node_id = *std::move(node_id);
  absl::StatusOr<std::vector<state::UpstreamBacklog>> backlog = p->history->store().LoadUpstream();
  if (!backlog.ok()) return backlog.status();
  // Asked at a run's first window ("ingest" has built ingest_runs by then).
  p->upstream = std::make_unique<tiers::UpstreamForwarder>(
      std::move(upstream), p->upstream_channel, &p->history->store(),
      [p](runs::RunId id) { return p->ingest_runs->Checkpointed(id); });
  p->upstream->Restore(*backlog);
  p->history->SetUpstreamJournal(p->upstream.get());
  return absl::OkStatus();
}

// "ingest": the ingest domain (ingest runs, their checkpoints).
absl::Status BuildIngest(Parts* p) {
  p->ingest_runs = std::make_unique<ingest::RunTable>(*p->manager, p->current, p->ingest_stats,
                                                      &p->history->store());
  p->checkpointer = std::make_unique<ingest::IngestCheckpointer>(
      *p->ingest_runs, p->manager->registry(), p->history->store(), p->ingest_stats,
      p->upstream.get());
  ingest::IngestCheckpointer* checkpointer = p->checkpointer.get();
  p->ingest_runs->SetCloseHook([checkpointer](runs::RunId id, int index, uint64_t last) {
    checkpointer->OnClientClosed(id, index, last);
  });
  return absl::OkStatus();
}

// "recorder": the recorder thread and the dispatcher, with every observer.
absl::Status StartRecorder(Parts* p) {
  p->manager->AddObserver(p->history.get());
  p->manager->AddObserver(p->checkpointer.get());
  p->manager->AddObserver(&p->run_log);
  p->csv = std::make_unique<RunCsvWriter>(p->current);
  p->manager->AddObserver(p->csv.get());
  if (p->upstream) p->manager->AddObserver(p->upstream.get());
  // abortOnFail: the run's producers are asked to stop (neither call blocks).
  // Bench runs exist only once BuildServices made p->jobs.
  p->manager->OnSloAbort([p](const runs::RunInfo& info, const std::string& why) {
    log::Warning("run ", info.id, " ('", info.spec.name,
                 "'): stopping it: its SLO failed for good: ", why);
    const absl::Status s = info.spec.source == runs::RunSource::kBench
                               ? (p->jobs ? p->jobs->Stop(info.id) : absl::OkStatus())
                               : p->ingest_runs->Stop(info.id, "stopped by its SLO: " + why);
    if (!s.ok()) log::Warning("run ", info.id, ": ", s.message());
  });
  p->manager->Start();
  return absl::OkStatus();
}

// "services": the gRPC services, bench jobs and metrics (nothing listens yet).
absl::Status BuildServices(Parts* p) {
  p->jobs = std::make_unique<jobs::BenchJobs>(*p->manager, p->clocks, p->current);
  p->query = std::make_unique<service::QueryService>(p->manager->registry(), p->current, *p->auth,
                                                     p->ingest_runs.get(), &p->history->store());
  p->control = std::make_unique<service::ControlService>(*p->manager, *p->jobs, *p->ingest_runs,
                                                         p->current, *p->auth);
  p->ingest = std::make_unique<service::IngestService>(
      *p->ingest_runs, p->ingest_stats, p->current, *p->auth,
      ingest::IngestWorkers::ThreadsFor(p->current.Get()->ingest.workers));
  p->sbp =
      std::make_unique<service::SbpService>(*p->ingest_runs, p->ingest_stats, p->current, *p->auth);
  p->ingest_runs->SetDepartureHook(p->sbp->DepartureHook());
  p->metrics = std::make_unique<DaemonMetrics>(
      *p->manager, *p->ingest_runs, p->ingest_stats, p->grpc_stats, p->current, p->upstream.get(),
      p->auth.get(), &p->http_stats, p->sbp.get(), &p->history->store(),
      std::vector<const prometheus::Collectable*>{&p->remote_write->stats(), p->trimmer.get()});
  return absl::OkStatus();
}

// "http": /metrics, the live page (/, /api/runs, /api/run, /api/spectrum), /healthz,
// /readyz (503 until "serve" and again from Shutdown on).
absl::Status StartHttp(Parts* p, const config::DaemonConfig& config) {
  absl::StatusOr<config::ListenAddress> http_listen =
      config::ParseListenAddress(config.http_listen);
  if (!http_listen.ok()) return http_listen.status();
  Parts* raw = p;
  std::vector<http::HttpRoute> routes;
  routes.push_back({"/metrics", [raw](const http::HttpRequest& request) {
                      // One buffer per HTTP thread, reused while no response
                      // still sends from it: a ~1 MB text costs no regrowth.
                      thread_local std::shared_ptr<std::string> buffer;
                      if (!buffer || buffer.use_count() > 1) {
                        buffer = std::make_shared<std::string>();
                      }
                      raw->metrics->Render(buffer.get());
                      http::HttpResponse response;
                      response.content_type = http::kExpositionContentType;
                      // OpenMetrics when the scraper prefers it (openmetrics.h):
                      // the 0.0.4 text converted family by family.
                      if (http::NegotiateExposition(request.Header("accept")) ==
                          http::ExpositionFormat::kOpenMetrics100) {
                        thread_local std::string text004;
                        text004.swap(*buffer);
                        buffer->clear();
                        http::AppendOpenMetrics(text004, {}, buffer.get());
                        response.content_type = http::kOpenMetricsContentType;
                      }
                      response.shared_body = buffer;
                      return response;
                    }});
  routes.push_back({"/", [](const http::HttpRequest&) { return http::LivePage(); }});
  routes.push_back({"/api/runs", [raw](const http::HttpRequest&) {
                      http::DaemonFacts facts;
                      facts.version = PERLD_VERSION;
                      facts.uptime_seconds =
                          static_cast<double>(MonotonicNanos() - raw->start_mono_ns) / 1e9;
                      facts.now_unix_ms = absl::ToUnixMillis(absl::Now());
                      return http::RunsJson(raw->manager->registry(), facts);
                    }});
  routes.push_back({"/api/run", [raw](const http::HttpRequest& request) {
                      return http::RunJson(raw->manager->registry(), request);
                    }});
  // Ranges come from the stored window distributions, as GetPercentiles'.
  http::WindowRangeReader read_range = [raw](runs::RunId id, const http::SpectrumRange& range) {
    state::StateStore::WindowRange asked;
    if (range.first_window > 0) asked.first_seq = range.first_window;
    if (range.last_window > 0) asked.last_seq = range.last_window;
    if (range.from_unix_ms > 0) asked.from_unix_ms = range.from_unix_ms;
    if (range.to_unix_ms > 0) asked.to_unix_ms = range.to_unix_ms;
    return raw->history->store().ReadWindowRange(id, asked);
  };
  routes.push_back({"/api/spectrum", [raw, read_range](const http::HttpRequest& request) {
                      return http::SpectrumJson(raw->manager->registry(), read_range, request);
                    }});
  routes.push_back({"/healthz", [](const http::HttpRequest&) {
                      return http::HttpResponse{200, "ok\n"};
                    }});
  routes.push_back({"/readyz", [raw](const http::HttpRequest&) {
                      return raw->ready.load(std::memory_order_relaxed)
                                 ? http::HttpResponse{200, "ready\n"}
                                 : http::HttpResponse{503, "not ready\n"};
                    }});
  // With auth on, every route but the probes and the page's static shell
  // (its /api/* calls carry the token) needs a token; /metrics unless open.
  for (http::HttpRoute& route : routes) {
    const bool open = route.path == "/" || route.path == "/healthz" || route.path == "/readyz" ||
                      (route.path == "/metrics" && config.auth.metrics_open);
    if (!open) route = Guarded(*p->auth, std::move(route));
  }
  http::HttpServerOptions http_options;
  http_options.max_connections = static_cast<int>(config.http.max_connections);
  http_options.handler_threads = static_cast<int>(config.http.handler_threads);
  http_options.max_queued_requests = static_cast<int>(config.http.max_queued_requests);
  http_options.header_timeout_ms = static_cast<int>(config.http.header_timeout_ms);
  http_options.stats = &p->http_stats;
  absl::StatusOr<std::unique_ptr<http::HttpServer>> http_server = http::HttpServer::Start(
      http_listen->host, http_listen->port, std::move(routes), p->https, http_options);
  if (!http_server.ok()) return http_server.status();
  p->http = std::move(*http_server);
  // Each HTTP connection is a file descriptor: a cap the process cannot
  // reach leaves accept failing (EMFILE) before the cap answers 503.
  if (rlimit files{}; getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY &&
                      files.rlim_cur < static_cast<rlim_t>(config.http.max_connections) + 256) {
    log::Warning("http.maxConnections ", config.http.max_connections,
                 " is close to or above the open-file limit ", files.rlim_cur,
                 " (ulimit -n; the systemd unit sets LimitNOFILE=65536)");
  }
  p->listeners.http = common::JoinHostPort(http_listen->host, p->http->port());
  return absl::OkStatus();
}

// "resume": ingest runs the daemon was running when it stopped resume from
// their checkpoints before any client can connect (gRPC starts next); then
// the upstream's restored streams of runs that will not run again are
// resent and closed.
absl::Status ResumeRuns(Parts* p) {
  for (state::StoredRun& run : p->resumable) {
    p->checkpointer->Seed(run.info, *run.checkpoint);
    for (const state::StoredRun& view : run.response_view) {
      p->checkpointer->Seed(view.info, *view.checkpoint);
    }
    absl::Status resumed =
        p->ingest_runs->Resume(run.info, run.windows, *run.checkpoint, run.response_view);
    if (!resumed.ok()) {
      p->checkpointer->OnRunEnded(run.info, {});
      p->history->Abandon(p->manager->registry(), std::move(run), resumed.ToString());
    }
  }
  p->resumable.clear();
  if (p->upstream) {
    // Streams of runs that will not run again: resent and closed.
    const runs::RunRegistry& registry = p->manager->registry();
    p->upstream->DeliverRestored([&registry](runs::RunId id) -> std::optional<runs::RunInfo> {
      absl::StatusOr<runs::RunInfo> info = registry.Info(id);
      if (!info.ok()) return std::nullopt;
      return *std::move(info);
    });
  }
  return absl::OkStatus();
}

// The stop of "resume": every run has ended by then ("grpc" ended the ingest
// runs; a failed start leaves the resumed ones to resume again), so the
// upstream sends the last windows and closes its streams.
void StopUpstream(Parts* p) {
  if (p->upstream) p->upstream->Stop();
}

// "grpc": Query, Control, Ingest, SBP (the generic service), health,
// reflection (not while auth is on); TCP and optionally a Unix socket.
absl::Status StartGrpc(Parts* p, const config::DaemonConfig& config) {
  absl::StatusOr<config::ListenAddress> grpc_listen =
      config::ParseListenAddress(config.grpc_listen);
  if (!grpc_listen.ok()) return grpc_listen.status();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (p->auth->enabled()) builder.SetOption(std::make_unique<WithoutReflection>());
  int grpc_port = 0;
  builder.AddListeningPort(config.grpc_listen, p->grpc_credentials, &grpc_port);
  if (!config.grpc_unix.empty()) {
    builder.AddListeningPort("unix:" + config.grpc_unix, grpc::InsecureServerCredentials());
  }
  // Twice the limit: a message between the limit and twice it reaches the
  // Ingest handler, which refuses it with a counted RESOURCE_EXHAUSTED;
  // gRPC itself refuses anything larger.
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<int64_t>(config.limits.max_message_bytes * 2, INT32_MAX)));
  ApplyGrpcCaps(config, &builder);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(p->grpc_stats.InterceptorFactory());
  interceptors.push_back(p->grpc_drain.InterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  builder.RegisterService(p->query.get());
  builder.RegisterService(p->control.get());
  builder.RegisterService(p->ingest.get());
  builder.RegisterCallbackGenericService(p->sbp.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || grpc_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for gRPC on ", config.grpc_listen,
                     config.grpc_unix.empty() ? "" : " and unix:" + config.grpc_unix,
                     " (address in use, not an address of this host, or a socket path that "
                     "cannot be created)"));
  }
  if (!config.grpc_unix.empty()) {
    // The socket file's group decides who may connect.
    if (chmod(config.grpc_unix.c_str(), 0660) != 0) {
      const int err = errno;
      server->Shutdown(std::chrono::system_clock::now());
      return absl::ErrnoToStatus(
          err, absl::StrCat("cannot set mode 0660 on the gRPC socket ", config.grpc_unix));
    }
    p->listeners.grpc_unix = config.grpc_unix;
  }
  for (const char* name : kServices) {
    server->GetHealthCheckService()->SetServingStatus(name, true);
  }
  p->grpc = std::move(server);
  p->listeners.grpc = common::JoinHostPort(grpc_listen->host, grpc_port);
  return absl::OkStatus();
}

// The stop of "grpc": calls in flight finish within drainTimeoutMs (the
// rest are cancelled; idle connections do not wait, see GrpcDrain); then
// the ingest runs, whose streams have all ended, end.
void StopGrpc(Parts* p) {
  const int64_t drain_ms = p->current.Get()->drain_timeout_ms;
  const int64_t cancelled =
      p->grpc_drain.Shutdown(*p->grpc, absl::Now() + absl::Milliseconds(drain_ms));
  if (cancelled > 0) {
    log::Info(cancelled, " gRPC call(s) still open after drainTimeoutMs (", drain_ms,
              " ms): cancelled");
  }
  // Every ingest stream has ended now: end their runs (clients that had not
  // closed are named in the run's failure reason; every acknowledged
  // message is in its total).
  p->ingest_runs->EndAll();
}

// "serve": ready (/readyz 200).
absl::Status StartServing(Parts* p) {
  p->ready.store(true, std::memory_order_relaxed);
  return absl::OkStatus();
}

// The stop of "serve", the first of a Shutdown: no new runs or streams,
// /readyz and gRPC health say not serving, every running bench run ends
// (its last window and total are published and stored; its watchers
// receive the total and finish).
void StopServing(Parts* p) {
  p->ready.store(false, std::memory_order_relaxed);
  log::Info("shutting down: no new runs; stopping ", p->jobs->running(), " running run(s)");
  p->grpc->GetHealthCheckService()->Shutdown();
  p->manager->StopAccepting();
  p->ingest_runs->StopAccepting();
  p->jobs->StopAll();
}

}  // namespace

DaemonServer::DaemonServer(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

DaemonServer::~DaemonServer() { Shutdown(); }

const Listeners& DaemonServer::listeners() const { return parts_->listeners; }

uint64_t DaemonServer::recorder_ticks() const { return parts_->manager->recorder_ticks(); }

absl::StatusOr<std::unique_ptr<DaemonServer>> DaemonServer::Start(
    const config::DaemonConfig& config, const std::string& state_dir, LifecycleHooks hooks) {
  log::SetLevel(config.log_level);
  auto owned = std::make_unique<Parts>(config, std::move(hooks));
  Parts* const p = owned.get();
  // The components in start order, one step each. A failed start stops the
  // steps started before it in reverse, once. Shutdown stops every step in
  // reverse: serve, grpc, resume, remoteWrite, http, services, recorder, state, trim.
  Lifecycle& steps = p->lifecycle;
  steps.Add({.name = "security", .start = [&] { return LoadSecurity(p, config); }});
  steps.Add({.name = "trim",
             .start =
                 [p] {
                   p->trimmer = std::make_unique<MemoryTrimmer>(p->current);
                   return absl::OkStatus();
                 },
             .stop = [p] { p->trimmer->Stop(); }});
  steps.Add({.name = "state",
             .start = [&] { return OpenState(p, config, state_dir); },
             .stop = [p] { FlushState(p); }});
  steps.Add({.name = "runs", .start = [&] { return BuildRuns(p, config); }});
  steps.Add({.name = "upstream", .start = [&] { return BuildUpstream(p, config, state_dir); }});
  steps.Add({.name = "ingest", .start = [p] { return BuildIngest(p); }});
  steps.Add({.name = "recorder",
             .start = [p] { return StartRecorder(p); },
             .stop = [p] { p->manager->Stop(); }});
  steps.Add({.name = "services",
             .start = [p] { return BuildServices(p); },
             .stop = [p] { p->query->CancelWatches(); }});
  steps.Add({.name = "http",
             .start = [&] { return StartHttp(p, config); },
             .stop = [p] { p->http->Stop(); }});
  // Remote write stops after every run ended ("grpc", "serve"): its last
  // collection holds the runs' final totals; it flushes within drainTimeoutMs.
  steps.Add({.name = "remoteWrite",
             .start =
                 [p] {
                   p->remote_write->Start();
                   return absl::OkStatus();
                 },
             .stop = [p] { p->remote_write->Stop(p->current.Get()->drain_timeout_ms); }});
  steps.Add(
      {.name = "resume", .start = [p] { return ResumeRuns(p); }, .stop = [p] { StopUpstream(p); }});
  steps.Add({.name = "grpc",
             .start = [&] { return StartGrpc(p, config); },
             .stop = [p] { StopGrpc(p); }});
  steps.Add(
      {.name = "serve", .start = [p] { return StartServing(p); }, .stop = [p] { StopServing(p); }});
  if (absl::Status s = steps.Start(); !s.ok()) return s;
  return std::unique_ptr<DaemonServer>(new DaemonServer(std::move(owned)));
}

void DaemonServer::Reload(const config::DaemonConfig& reloaded) {
  config::DaemonConfig next = reloaded;
  if (next.clock != parts_->current.Get()->clock) {
    // A clock the machine refuses is not taken: new benches keep the old.
    if (absl::StatusOr<const bench::BenchClock*> clock = parts_->clocks.Get(next.clock);
        !clock.ok()) {
      next.clock = parts_->current.Get()->clock;
      log::Error("SIGHUP: clock: ", clock.status().message(),
                 "; keeping clock: ", ClockSourceName(next.clock));
    } else {
      log::Warning("bench clock for new benches: ", (*clock)->info().description);
    }
  }
  log::SetLevel(next.log_level);
  const MemoryBudget budget = ResolveMemoryBudget(next.limits.max_memory_bytes);
  parts_->manager->SetLimits(next.limits.max_running_runs, budget.bytes);
  parts_->manager->registry().SetRetention(next.retention);
  parts_->history->store().SetRetention(next.retention);
  // Remote write re-reads its credential files at every SIGHUP.
  if (absl::Status s = parts_->remote_write->Reconfigure(next.remote_write); !s.ok()) {
    log::Error("SIGHUP: remote write keeps its running settings: ", s.message());
  }
  parts_->current.Set(next);
}

void DaemonServer::Shutdown() {
  if (parts_->shut_down) return;
  parts_->shut_down = true;
  parts_->lifecycle.Stop();
  log::Info("stopped");
}

}  // namespace perld::server
