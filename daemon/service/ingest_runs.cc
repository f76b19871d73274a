#include "daemon/service/ingest_runs.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/core/clock.h"
#include "daemon/core/run_total.h"
#include "daemon/log/log.h"
#include "daemon/service/ingest_codec.h"
#include "daemon/service/request_limits.h"
#include "daemon/service/run_proto.h"

namespace perld::service {

using Refusal = IngestStats::Refusal;

struct IngestRuns::Client {
  std::string id;
  std::string name;
  v1::IngestOpen::Mode mode = v1::IngestOpen::MODE_UNSPECIFIED;
  int index = 0;  // join order in the run (0, 1, ...)
  // The stream that owns the client now; bumped (under mu_) by a takeover.
  std::atomic<uint64_t> generation{0};
  // Bytes of this client's windows queued and not yet merged.
  std::shared_ptr<std::atomic<int64_t>> charge = std::make_shared<std::atomic<int64_t>>(0);

  std::mutex apply_mu;
  uint64_t applied = 0;                  // apply_mu: highest contiguous sequence applied
  uint64_t duplicates = 0;               // apply_mu
  std::vector<TimeStamp> scratch;        // apply_mu: decoded batch
  std::unique_ptr<ClientTotals> totals;  // apply_mu: the client's own share

  // What the client's stream acknowledges; written after apply_mu's work
  // and by MarkDurable.
  mutable std::mutex progress_mu;
  mutable std::condition_variable progress_cv;
  Progress progress;  // progress_mu

  IngestStream* stream = nullptr;  // mu_: the attached stream, if any
  bool closed = false;             // mu_: sent IngestClose
  uint64_t closed_at = 0;          // mu_: the close's last sequence
  int64_t gone_deadline_ns = 0;    // mu_: > 0 while detached without a close
  bool gone = false;               // mu_: timed out
};

struct IngestRuns::Run {
  runs::RunId id = 0;
  std::string name;
  LatencyConfig latency;
  int max_clients = 0;
  std::shared_ptr<runs::RemoteWindowInbox> inbox;
  bool aggregate = false;            // created by a windows client: SBM's recorders
  bool checkpointed = false;         // messages become durable by checkpoints
  std::atomic<bool> stopped{false};  // Control.StopRun, or shutdown
  std::string stop_cause;            // mu_: why it was stopped
  // Its final total and clients are committed (a repeated close of a
  // client of an ended run is acknowledged only then). Set by the state
  // store's writer thread.
  std::atomic<bool> stored{false};

  // mu_:
  std::map<std::string, std::unique_ptr<Client>> clients;
  int attached = 0;  // streams attached (handlers between Join and Leave)
  bool ending = false;
  // Why the run failed (clients gone without closing); set before EndRun,
  // read by the judge on the dispatcher thread after it.
  std::string failure;
};

namespace {

absl::Status Refuse(IngestStats& stats, Refusal r, absl::Status status) {
  stats.Refused(r);
  return status;
}

// The refusal counted for a decode error (a size limit or malformed data).
Refusal RefusalOf(const absl::Status& s, Refusal limit) {
  return s.code() == absl::StatusCode::kResourceExhausted ? limit : Refusal::kMalformed;
}

// A decode error as the client sees it: a message over a size limit is as
// final as a malformed one (resending it cannot help), so both are
// INVALID_ARGUMENT; RESOURCE_EXHAUSTED is kept for transient limits.
absl::Status Final(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kResourceExhausted) return s;
  return absl::InvalidArgumentError(s.message());
}

// A reconnect to a run that ended before the client closed its part.
absl::Status RunEnded(IngestStats& stats, runs::RunId id, const std::string& name,
                      const v1::IngestOpen& open) {
  return Refuse(stats, Refusal::kRunEnded,
                absl::FailedPreconditionError(absl::StrCat(
                    "run ", id, " '", name, "' ended before client '", open.client_id(),
                    "' closed its part: messages after the ones it was told are durable (",
                    open.durable_sequence(), ") were not applied")));
}

// The daemon holds less of a client than it told the client was durable.
absl::Status DataLoss(IngestStats& stats, runs::RunId id, const std::string& name,
                      const std::string& client_id, uint64_t held, uint64_t durable) {
  log::Error("ingest: run ", id, " '", name, "': client '", client_id, "' was told messages up to ",
             durable, " are durable, but this daemon holds only up to ", held, ": messages ",
             held + 1, "..", durable, " were lost");
  return Refuse(
      stats, Refusal::kDataLoss,
      absl::DataLossError(absl::StrCat(
          "run ", id, " '", name, "': client '", client_id, "' was told messages up to ", durable,
          " are durable, but this daemon holds only up to ", held, ": messages ", held + 1, "..",
          durable,
          " were lost on the daemon's side (its state directory was lost, restored from an older "
          "copy, or cut by a power failure)")));
}

std::string Describe(const IngestRuns::Client& c);

}  // namespace

IngestRuns::IngestRuns(runs::RunManager& manager, const CurrentConfig& config, IngestStats& stats,
                       state::StateStore* store)
    : manager_(manager),
      config_(config),
      stats_(stats),
      store_(store),
      budget_(std::make_shared<BreakdownBudget>(config.Get()->ingest.client_breakdown_max_memory_mb
                                                << 20)),
      reaper_([this] { Reap(); }) {}

IngestRuns::~IngestRuns() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  reap_cv_.notify_all();
  reaper_.join();
}

runs::RunSetup IngestRuns::SetupFor(const std::shared_ptr<Run>& run) {
  runs::RunSetup setup;
  // Every message reaches the recorder through the inbox (whole, with its
  // sequence): the run has no timestamp channels.
  setup.producers = 0;
  setup.inbox = run->inbox;
  setup.aggregate = run->aggregate;
  setup.judge = [run](const runs::WindowRecord&, std::string* reason) {
    if (run->failure.empty()) return runs::RunState::kFinished;
    *reason = run->failure;
    return runs::RunState::kFailed;
  };
  return setup;
}

absl::StatusOr<std::shared_ptr<IngestRuns::Run>> IngestRuns::CreateLocked(
    const v1::IngestOpen& open, runs::RunSource source, const LatencyConfig& latency,
    const config::DaemonConfig& config) {
  auto run = std::make_shared<Run>();
  run->name = open.run_name();
  run->latency = latency;
  run->max_clients = static_cast<int>(config.ingest.max_clients_per_run);
  run->inbox = std::make_shared<runs::RemoteWindowInbox>();
  // A run opened by a windows client aggregates remote windows (SBM's
  // recorders); a raw run records with PerL's policy, as a local run does.
  run->aggregate = open.mode() == v1::IngestOpen::MODE_WINDOWS;
  run->checkpointed = source == runs::RunSource::kIngest && config.ingest.checkpoints;

  runs::RunSetup setup = SetupFor(run);
  setup.spec.name = open.run_name();
  setup.spec.labels = {open.labels().begin(), open.labels().end()};
  setup.spec.source = source;
  setup.spec.latency = latency;
  setup.spec.reporting_interval_ms = open.has_reporting_interval_ms()
                                         ? open.reporting_interval_ms()
                                         : config.reporting_interval_ms;
  setup.spec.parameters = absl::StrCat("ingest: up to ", run->max_clients, " clients; created by '",
                                       open.client_name(), "' (", open.client_id(), ")");
  absl::StatusOr<runs::CreatedRun> created = manager_.CreateRun(std::move(setup));
  if (!created.ok()) return created.status();
  run->id = created->id;
  return run;
}

absl::StatusOr<IngestRuns::Session> IngestRuns::Join(const v1::IngestOpen& open,
                                                     IngestStream* stream, runs::RunSource source) {
  const std::shared_ptr<const config::DaemonConfig> config = config_.Get();
  if (absl::Status s = CheckIngestOpen(open, config->limits); !s.ok()) {
    return Refuse(stats_, Refusal::kInputLimit, std::move(s));
  }
  if (open.client_id().empty()) {
    return Refuse(stats_, Refusal::kMalformed,
                  absl::InvalidArgumentError("open: client_id must not be empty"));
  }
  if (open.run_name().empty()) {
    return Refuse(stats_, Refusal::kMalformed,
                  absl::InvalidArgumentError("open: run_name must not be empty"));
  }
  if (open.mode() != v1::IngestOpen::MODE_RAW && open.mode() != v1::IngestOpen::MODE_WINDOWS) {
    return Refuse(stats_, Refusal::kMalformed,
                  absl::InvalidArgumentError("open: mode must be MODE_RAW or MODE_WINDOWS"));
  }
  if (open.has_reporting_interval_ms() &&
      (open.reporting_interval_ms() < 10 || open.reporting_interval_ms() > 86'400'000)) {
    return Refuse(
        stats_, Refusal::kMalformed,
        absl::InvalidArgumentError("open: reporting_interval_ms must be in [10, 86400000]"));
  }
  // The latency configuration this client asks for.
  std::optional<TimeUnit> unit = FromProto(open.time_unit(), config->latency.time_unit);
  if (!unit) {
    return Refuse(stats_, Refusal::kMalformed,
                  absl::InvalidArgumentError("open: unknown time_unit"));
  }
  LatencyConfig latency = config->latency;
  if (*unit != config->latency.time_unit) {
    const LatencyConfig unit_defaults = LatencyConfig::ForUnit(*unit);
    latency.time_unit = *unit;
    latency.min_latency = unit_defaults.min_latency;
    latency.max_latency = unit_defaults.max_latency;
  }
  if (open.has_min_latency()) latency.min_latency = open.min_latency();
  if (open.has_max_latency()) latency.max_latency = open.max_latency();
  if (!open.percentiles().empty()) {
    latency.percentiles.assign(open.percentiles().begin(), open.percentiles().end());
  }
  if (absl::Status s = latency.Normalize(); !s.ok()) {
    return Refuse(stats_, Refusal::kMalformed,
                  absl::InvalidArgumentError(absl::StrCat("open: ", s.message())));
  }

  Session session;
  bool ended_lookup = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!accepting_.load(std::memory_order_relaxed)) {
      return Refuse(stats_, Refusal::kShutdown,
                    absl::UnavailableError("perld is shutting down: no new ingest streams"));
    }
    std::shared_ptr<Run> run;
    if (open.run_id() != 0) {
      // A reconnect names its run: answered for that run only, never by name.
      auto it = active_.find(open.run_id());
      if (it != active_.end() && !it->second->ending) {
        run = it->second;
        if (run->name != open.run_name()) {
          return Refuse(stats_, Refusal::kMalformed,
                        absl::InvalidArgumentError(absl::StrCat("open: run_id ", run->id,
                                                                " is run '", run->name, "', not '",
                                                                open.run_name(), "'")));
        }
      } else if (std::shared_ptr<Run> ended = FindEndedLocked(open.run_id())) {
        auto c = ended->clients.find(open.client_id());
        if (c != ended->clients.end() && c->second->closed) return ClosedSession(ended, *c->second);
        return RunEnded(stats_, ended->id, ended->name, open);
      } else {
        ended_lookup = true;  // the registry and the state store answer, outside mu_
      }
    } else if (auto found = by_name_.find(open.run_name()); found != by_name_.end()) {
      run = found->second;
    } else if (open.must_exist()) {
      return Refuse(
          stats_, Refusal::kUnknownRun,
          absl::NotFoundError(absl::StrCat("no running ingest run named '", open.run_name(), "'")));
    } else {
      absl::StatusOr<std::shared_ptr<Run>> made = CreateLocked(open, source, latency, *config);
      if (!made.ok()) {
        const Refusal r =
            made.status().code() == absl::StatusCode::kResourceExhausted ? Refusal::kRuns
            : made.status().code() == absl::StatusCode::kUnavailable     ? Refusal::kShutdown
                                                                         : Refusal::kMalformed;
        return Refuse(stats_, r, made.status());
      }
      run = *made;
      by_name_[run->name] = run;
      active_[run->id] = run;
      session.created = true;
    }
    if (run != nullptr) {
      absl::StatusOr<Session> attached = AttachLocked(open, stream, latency, *config, run);
      if (!attached.ok() || attached->closed) return attached;
      const bool created = session.created;
      session = *std::move(attached);
      session.created = created;
    }
  }
  if (ended_lookup) return JoinEnded(open);
  {
    // Waits for an in-flight message of a replaced stream: after this, that
    // stream sees the new generation and applies nothing more.
    std::lock_guard<std::mutex> apply(session.client->apply_mu);
    session.acked_sequence = session.client->applied;
  }
  if (open.durable_sequence() > session.acked_sequence) {
    const uint64_t held = session.acked_sequence;
    const runs::RunId id = session.run_id;
    const std::string name = session.run->name;
    Leave(session);
    return DataLoss(stats_, id, name, open.client_id(), held, open.durable_sequence());
  }
  stats_.streams.fetch_add(1, std::memory_order_relaxed);
  return session;
}

absl::StatusOr<IngestRuns::Session> IngestRuns::AttachLocked(const v1::IngestOpen& open,
                                                             IngestStream* stream,
                                                             const LatencyConfig& latency,
                                                             const config::DaemonConfig& config,
                                                             const std::shared_ptr<Run>& run) {
  const LatencyConfig& have = run->latency;
  if (have.time_unit != latency.time_unit || have.min_latency != latency.min_latency ||
      have.max_latency != latency.max_latency) {
    return Refuse(stats_, Refusal::kMismatch,
                  absl::FailedPreconditionError(absl::StrCat(
                      "run '", run->name, "' (id ", run->id, ") records ",
                      TimeUnitName(have.time_unit), " in [", have.min_latency, ", ",
                      have.max_latency, "]; this client asks for ", TimeUnitName(latency.time_unit),
                      " in [", latency.min_latency, ", ", latency.max_latency, "]")));
  }
  Client* client = nullptr;
  auto existing = run->clients.find(open.client_id());
  if (existing == run->clients.end()) {
    if (open.durable_sequence() > 0) {
      // Told that messages of this run are durable, by a daemon that does
      // not know the client now: they were lost.
      return DataLoss(stats_, run->id, run->name, open.client_id(), 0, open.durable_sequence());
    }
    if (static_cast<int>(run->clients.size()) >= run->max_clients) {
      return Refuse(stats_, Refusal::kClientsPerRun,
                    absl::ResourceExhaustedError(absl::StrCat("ingest.maxClientsPerRun: run '",
                                                              run->name, "' has ", run->max_clients,
                                                              " clients already")));
    }
    auto c = std::make_unique<Client>();
    c->id = open.client_id();
    c->name = open.client_name();
    c->mode = open.mode();
    c->index = static_cast<int>(run->clients.size());
    budget_->SetLimit(config.ingest.client_breakdown_max_memory_mb << 20);
    c->totals = std::make_unique<ClientTotals>(budget_);
    client = c.get();
    run->clients[c->id] = std::move(c);
  } else {
    client = existing->second.get();
    if (client->mode != open.mode()) {
      return Refuse(stats_, Refusal::kMismatch,
                    absl::FailedPreconditionError(
                        absl::StrCat("client '", client->id, "' joined run '", run->name, "' in ",
                                     v1::IngestOpen::Mode_Name(client->mode), ", not ",
                                     v1::IngestOpen::Mode_Name(open.mode()))));
    }
    // A reconnect naming this run after its close (the acknowledgement was
    // lost) may repeat the close; a new client reusing the id may not.
    if (client->closed && !client->gone && open.run_id() == run->id) {
      return ClosedSession(run, *client);
    }
    if (client->closed || client->gone) {
      return Refuse(
          stats_, Refusal::kMismatch,
          absl::FailedPreconditionError(absl::StrCat(
              "client '", client->id, "' already ",
              client->closed ? "closed its part of" : "timed out of", " run '", run->name, "'")));
    }
    // Under mu_: a stream lives until its handler has left.
    if (client->stream != nullptr) client->stream->Cancel();
    stats_.resumed.fetch_add(1, std::memory_order_relaxed);
  }
  Session session;
  session.generation = client->generation.fetch_add(1, std::memory_order_relaxed) + 1;
  client->stream = stream;
  client->gone_deadline_ns = 0;
  ++run->attached;
  session.run_id = run->id;
  session.run = run;
  session.client = client;
  session.max_memory_bytes = config.ingest.max_client_memory_bytes;
  return session;
}

absl::StatusOr<IngestRuns::Session> IngestRuns::JoinEnded(const v1::IngestOpen& open) {
  const runs::RunId id = open.run_id();
  absl::StatusOr<runs::RunInfo> info = manager_.registry().Info(id);
  if (!info.ok()) {
    log::Warning("ingest: client '", open.client_id(), "' reconnected to run ", id, " '",
                 open.run_name(), "', which this daemon does not know");
    return Refuse(
        stats_, Refusal::kUnknownRun,
        absl::NotFoundError(absl::StrCat(
            "run ", id, " '", open.run_name(),
            "' is unknown to this daemon: deleted by retention, or lost with its state directory; "
            "the client's messages were not applied")));
  }
  if (info->spec.source == runs::RunSource::kBench || info->state == runs::RunState::kRunning ||
      info->spec.name != open.run_name()) {
    return Refuse(
        stats_, Refusal::kMalformed,
        absl::InvalidArgumentError(absl::StrCat(
            "open: run_id ", id, " is ", runs::RunSourceName(info->spec.source), " run '",
            info->spec.name, "', not the remote run '", open.run_name(), "' this client was in")));
  }
  std::vector<state::CheckpointClient> rows;
  if (store_ != nullptr) {
    absl::StatusOr<std::vector<state::CheckpointClient>> loaded = store_->LoadRunClients(id);
    if (!loaded.ok()) return loaded.status();
    rows = *std::move(loaded);
  }
  for (const state::CheckpointClient& row : rows) {
    if (row.id != open.client_id() || !row.closed) continue;
    // Its close was applied and stored with the run: answer for the run.
    auto run = std::make_shared<Run>();
    run->id = id;
    run->name = info->spec.name;
    run->stored = true;
    auto c = std::make_unique<Client>();
    c->id = row.id;
    c->name = row.name;
    c->mode = row.raw ? v1::IngestOpen::MODE_RAW : v1::IngestOpen::MODE_WINDOWS;
    c->index = row.index;
    c->applied = row.applied;
    c->closed = true;
    c->closed_at = row.applied;
    Client& client = *c;
    run->clients[c->id] = std::move(c);
    return ClosedSession(run, client);
  }
  return RunEnded(stats_, id, info->spec.name, open);
}

std::shared_ptr<IngestRuns::Run> IngestRuns::FindEndedLocked(runs::RunId id) const {
  if (auto it = active_.find(id); it != active_.end() && it->second->ending) return it->second;
  for (const auto& run : ended_) {
    if (run->id == id) return run;
  }
  return nullptr;
}

absl::StatusOr<IngestRuns::Applied> IngestRuns::ApplyBatch(const Session& session,
                                                           const v1::TimestampBatch& batch,
                                                           const IngestStream& stream) {
  Client& c = *session.client;
  if (c.mode != v1::IngestOpen::MODE_RAW) {
    return Refuse(stats_, Refusal::kMalformed,
                  absl::InvalidArgumentError("a MODE_WINDOWS client sent a TimestampBatch"));
  }
  const std::shared_ptr<const config::DaemonConfig> config = config_.Get();  // one read per batch
  std::lock_guard<std::mutex> apply(c.apply_mu);
  if (c.generation.load(std::memory_order_relaxed) != session.generation) {
    return Refuse(stats_, Refusal::kSuperseded,
                  absl::AbortedError("a newer stream of this client took over"));
  }
  Applied out;
  if (batch.sequence() == 0) {
    return Refuse(stats_, Refusal::kMalformed,
                  absl::InvalidArgumentError("batch: sequence numbers start at 1"));
  }
  if (batch.sequence() <= c.applied) {
    ++c.duplicates;
    stats_.duplicates.fetch_add(1, std::memory_order_relaxed);
    out.duplicate = true;
  } else if (batch.sequence() != c.applied + 1) {
    return Refuse(stats_, Refusal::kSequenceGap,
                  absl::OutOfRangeError(absl::StrCat("sequence gap: expected ", c.applied + 1,
                                                     ", got ", batch.sequence())));
  } else {
    if (absl::Status s = DecodeBatch(batch, config->ingest.max_batch_length, &c.scratch); !s.ok()) {
      return Refuse(stats_, RefusalOf(s, Refusal::kBatchLength), Final(s));
    }
    runs::RemoteWindow w;
    int64_t records = 0;
    for (const TimeStamp& ts : c.scratch) records += ts.records;
    const auto timestamps = static_cast<int64_t>(c.scratch.size());
    w.timestamps = std::move(c.scratch);  // the next batch decodes into a new vector
    c.scratch = {};
    if (absl::Status s = WaitForRoom(session, c, w.bytes(), batch.sequence(), *config, stream);
        !s.ok()) {
      return s;
    }
    Push(session, c, std::move(w), batch.sequence());
    c.totals->AddBatch(timestamps, records, absl::ToUnixMillis(absl::Now()));
    stats_.batches.fetch_add(1, std::memory_order_relaxed);
    stats_.timestamps.fetch_add(static_cast<uint64_t>(timestamps), std::memory_order_relaxed);
  }
  Advanced(session, c);
  out.acked_sequence = c.applied;
  out.duplicates = c.duplicates;
  return out;
}

absl::StatusOr<IngestRuns::Applied> IngestRuns::ApplyWindow(const Session& session,
                                                            const v1::WindowReport& report,
                                                            const IngestStream& stream) {
  return ApplyWindow(
      session, report.sequence(),
      [&](const LatencyConfig& run, int64_t max_pairs) {
        return DecodeWindow(report, max_pairs, run.min_latency, run.max_latency);
      },
      stream);
}

absl::StatusOr<IngestRuns::Applied> IngestRuns::ApplyWindow(const Session& session,
                                                            uint64_t sequence, WindowBuilder build,
                                                            const IngestStream& stream) {
  Client& c = *session.client;
  if (c.mode != v1::IngestOpen::MODE_WINDOWS) {
    return Refuse(stats_, Refusal::kMalformed,
                  absl::InvalidArgumentError("a MODE_RAW client sent a WindowReport"));
  }
  const std::shared_ptr<const config::DaemonConfig> config = config_.Get();  // one read per report
  std::lock_guard<std::mutex> apply(c.apply_mu);
  if (c.generation.load(std::memory_order_relaxed) != session.generation) {
    return Refuse(stats_, Refusal::kSuperseded,
                  absl::AbortedError("a newer stream of this client took over"));
  }
  Applied out;
  if (sequence == 0) {
    return Refuse(stats_, Refusal::kMalformed,
                  absl::InvalidArgumentError("window: sequence numbers start at 1"));
  }
  if (sequence <= c.applied) {
    ++c.duplicates;
    stats_.duplicates.fetch_add(1, std::memory_order_relaxed);
    out.duplicate = true;
  } else if (sequence != c.applied + 1) {
    return Refuse(stats_, Refusal::kSequenceGap,
                  absl::OutOfRangeError(
                      absl::StrCat("sequence gap: expected ", c.applied + 1, ", got ", sequence)));
  } else {
    absl::StatusOr<runs::RemoteWindow> w =
        build(session.run->latency, config->ingest.max_pairs_per_report);
    if (!w.ok()) return Refuse(stats_, RefusalOf(w.status(), Refusal::kPairs), Final(w.status()));
    const int64_t pairs = static_cast<int64_t>(w->buckets.size());
    if (absl::Status s = WaitForRoom(session, c, w->bytes(), sequence, *config, stream); !s.ok()) {
      return s;
    }
    // Counted in the breakdown only now: a refused or cancelled message is
    // resent and must not count twice.
    c.totals->AddWindow(w->counters, w->buckets, absl::ToUnixMillis(absl::Now()));
    Push(session, c, *std::move(w), sequence);
    stats_.windows.fetch_add(1, std::memory_order_relaxed);
    stats_.pairs.fetch_add(static_cast<uint64_t>(pairs), std::memory_order_relaxed);
  }
  Advanced(session, c);
  out.acked_sequence = c.applied;
  out.duplicates = c.duplicates;
  return out;
}

absl::Status IngestRuns::WaitForRoom(const Session& session, Client& c, int64_t bytes,
                                     uint64_t sequence, const config::DaemonConfig& config,
                                     const IngestStream& stream) {
  // Larger than the limit itself: no wait can make room, a resend cannot
  // help (INVALID_ARGUMENT, final for the client).
  if (bytes > session.max_memory_bytes) {
    return Refuse(stats_, Refusal::kClientMemory,
                  absl::InvalidArgumentError(
                      absl::StrCat("ingest.maxClientMemoryBytes: message ", sequence, " needs ",
                                   bytes, " bytes, the limit is ", session.max_memory_bytes)));
  }
  const int64_t max_total = config.ingest.max_memory_bytes;
  if (bytes > max_total) {
    return Refuse(stats_, Refusal::kMemory,
                  absl::InvalidArgumentError(
                      absl::StrCat("ingest.maxMemoryBytes: message ", sequence, " needs ", bytes,
                                   " bytes, the limit for all clients is ", max_total)));
  }
  // Backpressure: wait for the recorder to merge this client's earlier
  // messages before queueing more than its share, and every client's before
  // queueing more than all of them may hold. (Two streams may pass the total
  // check at once: it is exceeded by at most one message each.)
  std::atomic<int64_t>& total = *stats_.queued_window_bytes;
  if (c.charge->load(std::memory_order_relaxed) + bytes > session.max_memory_bytes) {
    stats_.memory_waits.fetch_add(1, std::memory_order_relaxed);
    while (c.charge->load(std::memory_order_relaxed) + bytes > session.max_memory_bytes) {
      if (stream.IsCancelled()) return absl::CancelledError("stream cancelled");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (total.load(std::memory_order_relaxed) + bytes > max_total) {
    stats_.global_memory_waits.fetch_add(1, std::memory_order_relaxed);
    while (total.load(std::memory_order_relaxed) + bytes > max_total) {
      if (stream.IsCancelled()) return absl::CancelledError("stream cancelled");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return absl::OkStatus();
}

void IngestRuns::Push(const Session& session, Client& c, runs::RemoteWindow w, uint64_t sequence) {
  w.charge = c.charge;
  w.total_charge = stats_.queued_window_bytes;
  w.client = c.index;
  w.sequence = sequence;
  session.run->inbox->Push(std::move(w));
  c.applied = sequence;
}

void IngestRuns::Advanced(const Session& session, Client& c) const {
  {
    std::lock_guard<std::mutex> lock(c.progress_mu);
    c.progress.applied = c.applied;
    c.progress.duplicates = c.duplicates;
    if (!session.run->checkpointed) c.progress.durable = c.applied;
  }
  c.progress_cv.notify_all();
}

absl::StatusOr<IngestRuns::Applied> IngestRuns::Close(const Session& session,
                                                      uint64_t last_sequence) {
  Client& c = *session.client;
  Applied out;
  {
    std::lock_guard<std::mutex> apply(c.apply_mu);
    if (c.generation.load(std::memory_order_relaxed) != session.generation) {
      return Refuse(stats_, Refusal::kSuperseded,
                    absl::AbortedError("a newer stream of this client took over"));
    }
    if (last_sequence != c.applied) {
      return Refuse(stats_, Refusal::kSequenceGap,
                    absl::OutOfRangeError(absl::StrCat("close: last_sequence is ", last_sequence,
                                                       " but ", c.applied, " is applied")));
    }
    out.acked_sequence = c.applied;
    out.duplicates = c.duplicates;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    c.closed = true;
    c.closed_at = last_sequence;
  }
  if (!session.run->checkpointed || !close_hook_) {
    {
      std::lock_guard<std::mutex> lock(c.progress_mu);
      c.progress.close_durable = true;
    }
    c.progress_cv.notify_all();
  } else {
    close_hook_(session.run_id, c.index, last_sequence);
  }
  return out;
}

absl::Status IngestRuns::Resume(runs::RunInfo info, std::vector<runs::WindowRecord> history,
                                state::Checkpoint checkpoint) {
  const std::shared_ptr<const config::DaemonConfig> config = config_.Get();
  auto run = std::make_shared<Run>();
  run->name = info.spec.name;
  run->latency = info.spec.latency;
  run->max_clients = static_cast<int>(std::max<int64_t>(
      config->ingest.max_clients_per_run, static_cast<int64_t>(checkpoint.clients.size())));
  run->inbox = std::make_shared<runs::RemoteWindowInbox>();
  run->aggregate = !checkpoint.clients.empty() && !checkpoint.clients.front().raw;
  run->checkpointed = true;

  runs::RunSetup setup = SetupFor(run);
  runs::RunResume& resume = setup.resume.emplace();
  resume.info = std::move(info);
  resume.history = std::move(history);
  resume.base = CountersOf(checkpoint.total.snapshot);
  resume.base_distribution = std::move(checkpoint.total.distribution);
  resume.base_seconds = checkpoint.total.seconds;
  resume.base_start_time = checkpoint.total.snapshot.start_time;
  resume.recorder.periodic_seq = checkpoint.periodic_seq;
  resume.recorder.segment_seq = checkpoint.segment_seq;
  for (const state::CheckpointClient& c : checkpoint.clients) {
    const auto index = static_cast<size_t>(c.index);
    if (index >= resume.recorder.client_applied.size()) {
      resume.recorder.client_applied.resize(index + 1, 0);
    }
    resume.recorder.client_applied[index] = c.applied;
  }
  absl::StatusOr<runs::CreatedRun> created = manager_.CreateRun(std::move(setup));
  if (!created.ok()) return created.status();
  run->id = created->id;

  const int64_t deadline = MonotonicNanos() + config->ingest.client_timeout_ms * 1'000'000 + 1;
  for (const state::CheckpointClient& cut : checkpoint.clients) {
    auto c = std::make_unique<Client>();
    c->id = cut.id;
    c->name = cut.name;
    c->mode = cut.raw ? v1::IngestOpen::MODE_RAW : v1::IngestOpen::MODE_WINDOWS;
    c->index = cut.index;
    c->applied = cut.applied;
    c->totals = std::make_unique<ClientTotals>(budget_);
    c->closed = cut.closed;
    c->closed_at = cut.applied;
    c->gone_deadline_ns = cut.closed ? 0 : deadline;
    c->progress = Progress{cut.applied, cut.applied, 0, cut.closed};
    run->clients[c->id] = std::move(c);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    by_name_[run->name] = run;
    active_[run->id] = run;
  }
  reap_cv_.notify_all();
  stats_.runs_resumed.fetch_add(1, std::memory_order_relaxed);
  log::Info("ingest: run ", run->id, " '", run->name, "' resumed from its checkpoint (window ",
            checkpoint.periodic_seq, ", ", checkpoint.total.snapshot.records, " records, ",
            checkpoint.clients.size(), " client(s))");
  return absl::OkStatus();
}

IngestRuns::Progress IngestRuns::WaitProgress(const Session& session, const Progress& seen,
                                              const std::atomic<bool>& stop,
                                              std::chrono::milliseconds timeout) const {
  const Client& c = *session.client;
  std::unique_lock<std::mutex> lock(c.progress_mu);
  c.progress_cv.wait_for(
      lock, timeout, [&] { return c.progress != seen || stop.load(std::memory_order_relaxed); });
  return c.progress;
}

IngestRuns::Progress IngestRuns::CurrentProgress(const Session& session) const {
  const Client& c = *session.client;
  std::lock_guard<std::mutex> lock(c.progress_mu);
  return c.progress;
}

void IngestRuns::WakeProgress(const Session& session) const {
  const Client& c = *session.client;
  { std::lock_guard<std::mutex> lock(c.progress_mu); }
  c.progress_cv.notify_all();
}

bool IngestRuns::Checkpointed(runs::RunId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(id);
  return it != active_.end() && it->second->checkpointed;
}

std::vector<state::CheckpointClient> IngestRuns::CutClients(
    runs::RunId id, const std::vector<uint64_t>& applied) const {
  std::vector<state::CheckpointClient> out;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(id);
  if (it == active_.end()) return out;
  out.resize(it->second->clients.size());
  for (const auto& [cid, c] : it->second->clients) {
    state::CheckpointClient& cut = out[static_cast<size_t>(c->index)];
    cut.index = c->index;
    cut.id = c->id;
    cut.name = c->name;
    cut.raw = c->mode == v1::IngestOpen::MODE_RAW;
    const auto index = static_cast<size_t>(c->index);
    cut.applied = index < applied.size() ? applied[index] : 0;
    // Under mu_, `closed` implies the close's last sequence was applied
    // (Close checks it under the apply lock before taking mu_).
    cut.closed = c->closed && c->closed_at <= cut.applied;
  }
  return out;
}

void IngestRuns::MarkDurable(runs::RunId id, const std::vector<state::CheckpointClient>& clients) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(id);
  if (it == active_.end()) return;
  for (const state::CheckpointClient& cut : clients) {
    auto found = it->second->clients.find(cut.id);
    if (found == it->second->clients.end()) continue;
    Client& c = *found->second;
    {
      std::lock_guard<std::mutex> progress(c.progress_mu);
      c.progress.durable = std::max(c.progress.durable, cut.applied);
      c.progress.close_durable |= cut.closed;
    }
    c.progress_cv.notify_all();
  }
}

IngestRuns::Session IngestRuns::ClosedSession(const std::shared_ptr<Run>& run, Client& c) {
  Session session;
  session.run = run;
  session.client = &c;
  session.run_id = run->id;
  session.acked_sequence = c.closed_at;
  session.closed = true;
  stats_.streams.fetch_add(1, std::memory_order_relaxed);
  return session;
}

bool IngestRuns::CloseDurable(const Session& session) const {
  {
    std::lock_guard<std::mutex> progress(session.client->progress_mu);
    if (session.client->progress.close_durable) return true;
  }
  return session.run->stored.load(std::memory_order_acquire);
}

void IngestRuns::Leave(Session& session) {
  if (session.run == nullptr) return;
  if (session.closed) {  // never attached
    session.run.reset();
    session.client = nullptr;
    return;
  }
  bool end = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Run& run = *session.run;
    Client& c = *session.client;
    if (c.generation.load(std::memory_order_relaxed) == session.generation) {
      c.stream = nullptr;
      if (!c.closed) {
        const int64_t timeout_ms = config_.Get()->ingest.client_timeout_ms;
        c.gone_deadline_ns = MonotonicNanos() + timeout_ms * 1'000'000 + 1;
      }
    }
    --run.attached;
    end = ReadyToEndLocked(run, MonotonicNanos());
  }
  reap_cv_.notify_all();
  if (end) End(session.run);
  session.run.reset();
  session.client = nullptr;
}

absl::StatusOr<runs::RunInfo> IngestRuns::Info(const Session& session) const {
  return manager_.registry().Info(session.run_id);
}

bool IngestRuns::Superseded(const Session& session) const {
  return session.client->generation.load(std::memory_order_relaxed) != session.generation;
}

bool IngestRuns::RunStopped(const Session& session) const {
  return session.run->stopped.load(std::memory_order_relaxed);
}

bool IngestRuns::ReadyToEndLocked(Run& run, int64_t now_ns) {
  if (run.ending) return false;
  // A detached client times out even while other clients' streams are
  // attached (else the reaper would wake for its past deadline at once,
  // again and again, until they leave).
  bool waiting = false;  // a client may still come back
  if (!run.stopped.load(std::memory_order_relaxed)) {
    for (auto& [id, c] : run.clients) {
      if (c->closed || c->gone) continue;
      if (c->gone_deadline_ns > 0 && now_ns >= c->gone_deadline_ns) {
        c->gone = true;
        stats_.clients_gone.fetch_add(1, std::memory_order_relaxed);
        log::Warning("ingest: run ", run.id, " '", run.name, "': ", Describe(*c),
                     " did not come back within ingest.clientTimeoutMs");
        departures_.push_back({run.id, c->id});
        continue;
      }
      waiting = true;
    }
  }
  if (waiting || run.attached > 0) return false;
  std::vector<std::string> lost;
  for (auto& [id, c] : run.clients) {
    if (!c->closed) lost.push_back(Describe(*c));
  }
  if (!lost.empty()) {
    run.failure =
        absl::StrCat(run.stop_cause.empty() ? "" : run.stop_cause + " while ", lost.size(),
                     " client(s) had not closed: ", absl::StrJoin(lost, ", "));
  }
  run.ending = true;
  auto named = by_name_.find(run.name);
  if (named != by_name_.end() && named->second.get() == &run) by_name_.erase(named);
  return true;
}

void IngestRuns::End(const std::shared_ptr<Run>& run) {
  manager_.EndRun(run->id);
  // The dispatcher queues the final total to the state store; the clients
  // queued after it commit in the same transaction or a later one.
  manager_.WaitEnded(run->id, absl::InfiniteDuration());
  std::vector<state::CheckpointClient> rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rows = ClientRowsLocked(*run);
  }
  if (store_ != nullptr) {
    store_->SaveRunClients(run->id, std::move(rows),
                           [run] { run->stored.store(true, std::memory_order_release); });
  } else {
    run->stored.store(true, std::memory_order_release);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_.erase(run->id);
    ended_.push_back(run);
    if (ended_.size() > kEndedBreakdowns) ended_.pop_front();
    departures_.push_back({run->id, ""});
  }
  reap_cv_.notify_all();
}

void IngestRuns::SetDepartureHook(DepartureHook hook) {
  std::lock_guard<std::mutex> lock(mu_);
  departure_hook_ = std::move(hook);
}

absl::Status IngestRuns::Abandon(runs::RunId id, const std::string& client_id) {
  std::shared_ptr<Run> run;
  bool end = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(id);
    if (it == active_.end()) return absl::OkStatus();  // ended already
    run = it->second;
    auto found = run->clients.find(client_id);
    if (found == run->clients.end()) {
      return absl::NotFoundError(absl::StrCat("run ", id, " has no client '", client_id, "'"));
    }
    Client& c = *found->second;
    if (c.closed || c.gone) return absl::OkStatus();
    if (c.stream != nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("client '", client_id, "' of run ", id, " is streaming"));
    }
    c.gone = true;
    c.gone_deadline_ns = 0;
    stats_.clients_gone.fetch_add(1, std::memory_order_relaxed);
    log::Warning("ingest: run ", run->id, " '", run->name, "': ", Describe(c),
                 " gave its part up without closing it");
    departures_.push_back({run->id, c.id});
    end = ReadyToEndLocked(*run, MonotonicNanos());
  }
  reap_cv_.notify_all();
  if (end) End(run);
  return absl::OkStatus();
}

std::vector<state::CheckpointClient> IngestRuns::ClientRowsLocked(const Run& run) {
  std::vector<state::CheckpointClient> rows(run.clients.size());
  for (const auto& [cid, c] : run.clients) {
    state::CheckpointClient& row = rows[static_cast<size_t>(c->index)];
    row.index = c->index;
    row.id = c->id;
    row.name = c->name;
    row.raw = c->mode == v1::IngestOpen::MODE_RAW;
    {
      std::lock_guard<std::mutex> progress(c->progress_mu);  // after mu_, as MarkDurable
      row.applied = c->closed ? c->closed_at : c->progress.applied;
    }
    row.closed = c->closed;
  }
  return rows;
}

void IngestRuns::Reap() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    int64_t next = 0;
    std::vector<std::shared_ptr<Run>> ready;
    const int64_t now = MonotonicNanos();
    for (auto& [id, run] : active_) {
      if (ReadyToEndLocked(*run, now)) {
        ready.push_back(run);
        continue;
      }
      if (run->stopped.load(std::memory_order_relaxed)) continue;  // ends as its streams leave
      for (auto& [cid, c] : run->clients) {
        if (c->gone_deadline_ns > 0 && !c->gone && !c->closed && c->stream == nullptr) {
          next = next == 0 ? c->gone_deadline_ns : std::min(next, c->gone_deadline_ns);
        }
      }
    }
    if (!ready.empty()) {
      lock.unlock();
      for (const auto& run : ready) End(run);
      lock.lock();
      continue;
    }
    if (!departures_.empty()) {  // reported outside the lock, in order
      std::vector<Departure> departed;
      departed.swap(departures_);
      const DepartureHook hook = departure_hook_;
      lock.unlock();
      if (hook) {
        for (const Departure& d : departed) hook(d);
      }
      lock.lock();
      continue;
    }
    if (next == 0) {
      reap_cv_.wait(lock);
    } else {
      reap_cv_.wait_for(lock, std::chrono::nanoseconds(next - now));
    }
  }
}

absl::Status IngestRuns::Stop(runs::RunId id) {
  std::shared_ptr<Run> run;
  bool end = false;
  std::vector<IngestStream*> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(id);
    if (it == active_.end()) {
      return absl::NotFoundError(absl::StrCat("run ", id, " is not a running ingest run"));
    }
    run = it->second;
    if (run->stop_cause.empty()) run->stop_cause = "stopped by Control.StopRun";
    run->stopped.store(true, std::memory_order_relaxed);
    auto named = by_name_.find(run->name);
    if (named != by_name_.end() && named->second == run) by_name_.erase(named);
    for (auto& [cid, c] : run->clients) {
      if (c->stream != nullptr) streams.push_back(c->stream);
    }
    // Cancel under mu_: a stream stays valid until its handler has left
    // (Leave takes mu_).
    for (IngestStream* s : streams) s->Cancel();
    end = ReadyToEndLocked(*run, MonotonicNanos());
  }
  if (end) End(run);
  return absl::OkStatus();
}

void IngestRuns::StopAccepting() {
  std::lock_guard<std::mutex> lock(mu_);
  accepting_.store(false, std::memory_order_relaxed);
}

void IngestRuns::EndAll() {
  std::vector<std::shared_ptr<Run>> ending;
  std::vector<runs::RunId> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, run] : active_) {
      ids.push_back(id);
      if (run->ending) continue;
      if (run->stop_cause.empty()) run->stop_cause = "perld shut down";
      run->stopped.store(true, std::memory_order_relaxed);  // no waiting for gone clients
      if (ReadyToEndLocked(*run, MonotonicNanos())) ending.push_back(run);
    }
  }
  for (const auto& run : ending) End(run);
  for (runs::RunId id : ids) manager_.WaitEnded(id, absl::InfiniteDuration());
}

namespace {

std::string Describe(const IngestRuns::Client& c) {
  return absl::StrCat("'", c.name, "' (", c.id, ")");
}

}  // namespace

std::map<runs::RunId, IngestRuns::Connections> IngestRuns::ConnectionCounts() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<runs::RunId, Connections> out;
  for (const auto& [id, run] : active_) {
    out[id] = {run->attached, static_cast<int>(run->clients.size())};
  }
  return out;
}

absl::Status IngestRuns::Clients(runs::RunId id, const PercentileSet& set,
                                 google::protobuf::RepeatedPtrField<v1::RemoteClient>* out) const {
  std::shared_ptr<Run> run;
  std::vector<std::pair<Client*, const char*>> clients;  // client, state
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = active_.find(id); it != active_.end()) run = it->second;
    for (const auto& r : ended_) {
      if (r->id == id) run = r;
    }
    if (run == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          "run ", id, " is not a remote run perld holds clients for (running, or one of the last ",
          kEndedBreakdowns, " that ended)"));
    }
    for (const auto& [cid, c] : run->clients) {
      const char* state = c->closed   ? "closed"
                          : c->gone   ? "gone"
                          : c->stream ? "streaming"
                                      : "detached";
      clients.emplace_back(c.get(), state);
    }
  }
  std::sort(clients.begin(), clients.end(),
            [](const auto& a, const auto& b) { return a.first->index < b.first->index; });
  for (auto& [c, state] : clients) {
    v1::RemoteClient* row = out->Add();
    row->set_client_id(c->id);
    row->set_client_name(c->name);
    row->set_mode(c->mode == v1::IngestOpen::MODE_WINDOWS ? "windows" : "raw");
    row->set_state(state);
    std::lock_guard<std::mutex> apply(c->apply_mu);
    row->set_acked_sequence(c->applied);
    row->set_duplicates(c->duplicates);
    const ClientTotals& t = *c->totals;
    row->set_reports(t.reports());
    row->set_timestamps(t.timestamps());
    const LatencyCounters& k = t.counters();
    row->set_records(k.records);
    row->set_bytes(k.bytes);
    row->set_valid_latency_records(k.valid);
    row->set_invalid_latency_records(k.invalid);
    row->set_lower_latency_discard_records(k.lower_discard);
    row->set_higher_latency_discard_records(k.higher_discard);
    row->set_min_latency(k.min_latency == kNoMinLatency ? 0 : k.min_latency);
    row->set_max_latency(k.max_latency);
    row->set_total_latency(k.total_latency);
    row->set_exact(t.exact());
    row->set_last_report_unix_ms(t.last_report_unix_ms());
    if (t.exact()) {
      LatencySnapshot s;
      FillPercentiles(set, t.distribution(), &s);
      AddPercentiles(s, row->mutable_percentiles());
    }
  }
  return absl::OkStatus();
}

}  // namespace perld::service
