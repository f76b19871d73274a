#include "daemon/ingest/run_table.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/common/log.h"
#include "daemon/common/mutex.h"
#include "daemon/config/input_limits.h"
#include "daemon/core/clock.h"
#include "daemon/core/thread_name.h"
#include "daemon/ingest/refusals.h"

namespace perld::ingest {

// A client's membership in its run (its apply side is the ClientSession).
struct RunTable::Member {
  std::unique_ptr<ClientSession> session;
  IngestStream* stream = nullptr;  // mu_: the attached stream, if any
  bool closed = false;             // mu_: sent its close
  uint64_t closed_at = 0;          // mu_: the close's last sequence
  int64_t gone_deadline_ns = 0;    // mu_: > 0 while detached without a close
  bool gone = false;               // mu_: timed out or given up
};

struct RunTable::Run {
  RunContext context;  // the clients' view of the run (id set once created)
  std::string name;
  std::string slo;  // RunSpec::slo and abort_on_fail, fixed at creation
  bool abort_on_fail = false;
  int max_clients = 0;
  bool aggregate = false;            // created by a windows client: SBM's recorders
  std::atomic<bool> stopped{false};  // Control.StopRun, or shutdown
  // Its final total and clients are committed (a repeated close of a
  // client of an ended run is acknowledged only then). Set by the state
  // store's writer thread.
  std::atomic<bool> stored{false};

  // mu_:
  std::string stop_cause;  // why it was stopped
  std::map<std::string, std::unique_ptr<Member>> clients;
  int attached = 0;  // streams attached (between Join and Leave)
  bool ending = false;
  // Why the run failed (clients gone without closing); set before EndRun,
  // read by the judge on the dispatcher thread after it.
  std::string failure;
  // > 0: resumed from before its first checkpoint, with no client known;
  // it waits for its clients to come back until then (ingest.clientTimeoutMs)
  // and does not end before, however many came back and closed.
  int64_t rejoin_deadline_ns = 0;
};

namespace {

// The client's clock as people read it: "tsc, 2.99 GHz (resolution 1 ns)".
std::string ClockText(const OpenRequest& open) {
  if (open.clock.empty() || open.clock_resolution_ns <= 0 ||
      absl::StrContains(open.clock, "resolution")) {
    return open.clock;
  }
  return absl::StrCat(open.clock, " (resolution ", open.clock_resolution_ns, " ns)");
}

std::string Describe(const ClientSession& c) {
  return absl::StrCat("'", c.name(), "' (", c.id(), ")");
}

// A reconnect to a run that ended before the client closed its part.
// `why`: how it ended, when known ("stopped by its SLO: invalid=0: 1").
absl::Status RunEnded(IngestStats& stats, runs::RunId id, const std::string& name,
                      const OpenRequest& open, const std::string& why) {
  return Refuse(stats, Refusal::kRunEnded,
                absl::FailedPreconditionError(absl::StrCat(
                    "run ", id, " '", name, "' ended", why.empty() ? "" : " (" + why + ")",
                    " before client '", open.client_id,
                    "' closed its part: messages after the ones it was told are durable (",
                    open.durable_sequence, ") were not applied")));
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

}  // namespace

absl::Status CheckOpenLimits(const OpenRequest& open, const config::LimitsConfig& limits) {
  if (absl::Status s = config::CheckName("open: run_name", open.run_name, limits); !s.ok()) {
    return s;
  }
  if (absl::Status s = config::CheckName("open: client_id", open.client_id, limits); !s.ok()) {
    return s;
  }
  if (absl::Status s = config::CheckName("open: client_name", open.client_name, limits); !s.ok()) {
    return s;
  }
  if (absl::Status s = config::CheckName("open: clock", open.clock, limits); !s.ok()) return s;
  if (absl::Status s = config::CheckName("open: slo.expression", open.slo, limits); !s.ok()) {
    return s;
  }
  if (absl::Status s = config::CheckName("open: bucketed_reason", open.bucketed_reason, limits);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = config::CheckLabels("open: labels", open.labels, limits); !s.ok()) return s;
  return config::CheckPercentileCount("open: percentiles",
                                      static_cast<int64_t>(open.percentiles.size()), limits);
}

RunTable::RunTable(runs::RunManager& manager, const config::CurrentConfig& config,
                   IngestStats& stats, state::StateStore* store)
    : manager_(manager),
      config_(config),
      stats_(stats),
      store_(store),
      shared_{config, stats, std::make_shared<RoomNotifier>(),
              std::make_shared<BreakdownBudget>(config.Get()->ingest.client_breakdown_max_memory_mb
                                                << 20)},
      reaper_([this] {
        NameThisThread("perld-reaper");
        Reap();
      }) {}

RunTable::~RunTable() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  reap_cv_.NotifyAll();
  reaper_.join();
}

runs::RunSetup RunTable::SetupFor(const std::shared_ptr<Run>& run) {
  runs::RunSetup setup;
  // Every message reaches the recorder through the inbox (whole, with its
  // sequence): the run has no timestamp channels.
  setup.producers = 0;
  setup.inbox = run->context.inbox;
  setup.aggregate = run->aggregate;
  setup.judge = [run](const runs::WindowRecord&, std::string* reason) {
    if (run->failure.empty()) return runs::RunState::kFinished;
    *reason = run->failure;
    return runs::RunState::kFailed;
  };
  return setup;
}

std::unique_ptr<ClientSession> RunTable::NewClient(const Run& run, std::string id, std::string name,
                                                   std::string clock, ClientMode mode, int index) {
  shared_.budget->SetLimit(config_.Get()->ingest.client_breakdown_max_memory_mb << 20);
  return std::make_unique<ClientSession>(std::move(id), std::move(name), std::move(clock), mode,
                                         index, run.context, shared_);
}

absl::StatusOr<std::shared_ptr<RunTable::Run>> RunTable::CreateLocked(
    const OpenRequest& open, runs::RunSource source, const LatencyConfig& latency,
    const config::DaemonConfig& config) {
  auto run = std::make_shared<Run>();
  run->name = open.run_name;
  run->slo = open.slo;
  run->abort_on_fail = open.abort_on_fail;
  run->context.latency = latency;
  run->context.inbox = std::make_shared<runs::RemoteWindowInbox>();
  run->context.paced = open.target_rate > 0;
  run->context.checkpointed = source == runs::RunSource::kIngest && config.ingest.checkpoints;
  run->max_clients = static_cast<int>(config.ingest.max_clients_per_run);
  // A run opened by a windows client aggregates remote windows (SBM's
  // recorders); a raw run records with PerL's policy, as a local run does.
  run->aggregate = open.mode == ClientMode::kWindows;

  runs::RunSetup setup = SetupFor(run);
  setup.spec.name = open.run_name;
  setup.spec.labels = open.labels;
  setup.spec.source = source;
  setup.spec.latency = latency;
  setup.spec.reporting_interval_ms =
      open.reporting_interval_ms.value_or(config.reporting_interval_ms);
  setup.spec.checkpointed = run->context.checkpointed;
  setup.spec.parameters = absl::StrCat("ingest: up to ", run->max_clients, " clients; created by '",
                                       open.client_name, "' (", open.client_id, ")");
  // Every client times its records with its own clock (perlctl clients
  // lists each); the run names the first.
  setup.spec.clock = source == runs::RunSource::kSbp
                         ? "the SBK clients' own (SBP does not report them)"
                         : absl::StrCat("the clients' own; the first, '", open.client_name,
                                        "': ", open.clock.empty() ? "not reported" : open.clock);
  setup.spec.clock_resolution_ns = open.clock_resolution_ns;
  setup.spec.slo = open.slo;
  setup.spec.abort_on_fail = open.abort_on_fail;
  setup.spec.bucketed_reason = open.bucketed_reason;
  setup.spec.target_rate = open.target_rate;
  if (open.late_threshold_ns > 0) setup.spec.late_threshold_ns = open.late_threshold_ns;
  absl::StatusOr<runs::CreatedRun> created = manager_.CreateRun(std::move(setup));
  if (!created.ok()) return created.status();
  run->context.id = created->id;
  return run;
}

absl::StatusOr<RunTable::Session> RunTable::Join(const OpenRequest& open, IngestStream* stream,
                                                 runs::RunSource source) {
  const std::shared_ptr<const config::DaemonConfig> config = config_.Get();
  if (absl::Status s = CheckOpenLimits(open, config->limits); !s.ok()) {
    return Refuse(stats_, Refusal::kInputLimit, std::move(s));
  }
  if (open.client_id.empty()) {
    return Refuse(stats_, Refusal::kMalformed,
                  absl::InvalidArgumentError("open: client_id must not be empty"));
  }
  if (open.run_name.empty()) {
    return Refuse(stats_, Refusal::kMalformed,
                  absl::InvalidArgumentError("open: run_name must not be empty"));
  }
  if (open.reporting_interval_ms &&
      (*open.reporting_interval_ms < 10 || *open.reporting_interval_ms > 86'400'000)) {
    return Refuse(
        stats_, Refusal::kMalformed,
        absl::InvalidArgumentError("open: reporting_interval_ms must be in [10, 86400000]"));
  }
  // The latency configuration this client asks for.
  LatencyConfig latency = config->latency;
  if (open.time_unit && *open.time_unit != config->latency.time_unit) {
    const LatencyConfig unit_defaults = LatencyConfig::ForUnit(*open.time_unit);
    latency.time_unit = *open.time_unit;
    latency.min_latency = unit_defaults.min_latency;
    latency.max_latency = unit_defaults.max_latency;
  }
  if (open.min_latency) latency.min_latency = *open.min_latency;
  if (open.max_latency) latency.max_latency = *open.max_latency;
  if (!open.percentiles.empty()) latency.percentiles = open.percentiles;
  if (absl::Status s = latency.Normalize(); !s.ok()) {
    return Refuse(stats_, Refusal::kMalformed,
                  absl::InvalidArgumentError(absl::StrCat("open: ", s.message())));
  }

  Session session;
  bool created = false;
  bool ended_lookup = false;
  {
    MutexLock lock(mu_);
    if (!accepting_.load(std::memory_order_relaxed)) {
      return Refuse(stats_, Refusal::kShutdown,
                    absl::UnavailableError("perld is shutting down: no new ingest streams"));
    }
    std::shared_ptr<Run> run;
    if (open.run_id != 0) {
      // A reconnect names its run: answered for that run only, never by name.
      auto it = active_.find(open.run_id);
      if (it != active_.end() && !it->second->ending) {
        run = it->second;
        if (run->name != open.run_name) {
          return Refuse(
              stats_, Refusal::kMalformed,
              absl::InvalidArgumentError(absl::StrCat("open: run_id ", run->context.id, " is run '",
                                                      run->name, "', not '", open.run_name, "'")));
        }
      } else if (std::shared_ptr<Run> ended = FindEndedLocked(open.run_id)) {
        auto m = ended->clients.find(open.client_id);
        if (m != ended->clients.end() && m->second->closed) return ClosedSession(ended, *m->second);
        return RunEnded(stats_, ended->context.id, ended->name, open, ended->stop_cause);
      } else {
        ended_lookup = true;  // the registry and the state store answer, outside mu_
      }
    } else if (auto found = by_name_.find(open.run_name); found != by_name_.end()) {
      if (open.must_create) {
        return Refuse(stats_, Refusal::kRunExists,
                      absl::AlreadyExistsError(absl::StrCat(
                          "run '", open.run_name, "' (id ", found->second->context.id,
                          ") is running: this client must create a new run (--new); join it "
                          "without --new, or choose another name")));
      }
      run = found->second;
    } else if (open.must_exist) {
      return Refuse(
          stats_, Refusal::kUnknownRun,
          absl::NotFoundError(absl::StrCat("no running ingest run named '", open.run_name, "'")));
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
      active_[run->context.id] = run;
      created = true;
    }
    if (run != nullptr) {
      absl::StatusOr<Session> attached = AttachLocked(open, stream, latency, *config, run);
      if (!attached.ok() || attached->closed) return attached;
      session = *std::move(attached);
      session.created = created;
      session.paced_client = open.target_rate > 0;
    }
  }
  if (ended_lookup) return JoinEnded(open);
  // The reaper watches an attached windows client's breakdown row.
  if (session.client->mode() == ClientMode::kWindows) reap_cv_.NotifyAll();
  session.acked_sequence = session.client->TakeOver();
  if (open.durable_sequence > session.acked_sequence) {
    const uint64_t held = session.acked_sequence;
    const runs::RunId id = session.run_id;
    const std::string name = session.run->name;
    Leave(session);
    return DataLoss(stats_, id, name, open.client_id, held, open.durable_sequence);
  }
  stats_.streams.fetch_add(1, std::memory_order_relaxed);
  return session;
}

absl::StatusOr<RunTable::Session> RunTable::AttachLocked(const OpenRequest& open,
                                                         IngestStream* stream,
                                                         const LatencyConfig& latency,
                                                         const config::DaemonConfig& config,
                                                         const std::shared_ptr<Run>& run) {
  const LatencyConfig& have = run->context.latency;
  if (have.time_unit != latency.time_unit || have.min_latency != latency.min_latency ||
      have.max_latency != latency.max_latency) {
    return Refuse(
        stats_, Refusal::kMismatch,
        absl::FailedPreconditionError(absl::StrCat(
            "run '", run->name, "' (id ", run->context.id, ") records ",
            TimeUnitSymbol(have.time_unit), " in [", have.min_latency, ", ", have.max_latency,
            "]; this client asks for ", TimeUnitSymbol(latency.time_unit), " in [",
            latency.min_latency, ", ", latency.max_latency, "]")));
  }
  if (!open.slo.empty() && (open.slo != run->slo || open.abort_on_fail != run->abort_on_fail)) {
    return Refuse(
        stats_, Refusal::kMismatch,
        absl::FailedPreconditionError(absl::StrCat(
            "run '", run->name, "' (id ", run->context.id, ") has the SLO '", run->slo,
            run->abort_on_fail ? "' with abortOnFail" : "'", "; this client asks for '", open.slo,
            open.abort_on_fail ? "' with abortOnFail" : "'", " (give the same, or none to join)")));
  }
  // A bucketed client makes the run bucketed (its values are no longer
  // all raw); a client of raw values leaves a bucketed run so.
  if (!open.bucketed_reason.empty()) {
    manager_.registry().MarkBucketed(run->context.id, open.bucketed_reason);
  }
  Member* member = nullptr;
  auto existing = run->clients.find(open.client_id);
  if (existing == run->clients.end()) {
    if (open.durable_sequence > 0) {
      // Told that messages of this run are durable, by a daemon that does
      // not know the client now: they were lost.
      return DataLoss(stats_, run->context.id, run->name, open.client_id, 0, open.durable_sequence);
    }
    if (static_cast<int>(run->clients.size()) >= run->max_clients) {
      return Refuse(stats_, Refusal::kClientsPerRun,
                    absl::ResourceExhaustedError(absl::StrCat("ingest.maxClientsPerRun: run '",
                                                              run->name, "' has ", run->max_clients,
                                                              " clients already")));
    }
    auto m = std::make_unique<Member>();
    m->session = NewClient(*run, open.client_id, open.client_name, ClockText(open), open.mode,
                           static_cast<int>(run->clients.size()));
    member = m.get();
    run->clients[open.client_id] = std::move(m);
  } else {
    member = existing->second.get();
    const ClientSession& c = *member->session;
    if (c.mode() != open.mode) {
      return Refuse(stats_, Refusal::kMismatch,
                    absl::FailedPreconditionError(absl::StrCat(
                        "client '", c.id(), "' joined run '", run->name, "' in ",
                        ClientModeName(c.mode()), ", not ", ClientModeName(open.mode))));
    }
    // A reconnect naming this run after its close (the acknowledgement was
    // lost) may repeat the close; a new client reusing the id may not.
    if (member->closed && !member->gone && open.run_id == run->context.id) {
      return ClosedSession(run, *member);
    }
    if (member->closed || member->gone) {
      return Refuse(
          stats_, Refusal::kMismatch,
          absl::FailedPreconditionError(absl::StrCat(
              "client '", c.id(), "' already ",
              member->closed ? "closed its part of" : "timed out of", " run '", run->name, "'")));
    }
    // Under mu_: a stream lives until its handler has left.
    if (member->stream != nullptr) member->stream->Cancel();
    stats_.resumed.fetch_add(1, std::memory_order_relaxed);
  }
  Session session;
  session.generation = member->session->NewGeneration();
  member->stream = stream;
  member->gone_deadline_ns = 0;
  ++run->attached;
  session.run_id = run->context.id;
  session.run = run;
  session.client = member->session.get();
  session.member = member;
  session.max_memory_bytes = config.ingest.max_client_memory_bytes;
  return session;
}

absl::StatusOr<RunTable::Session> RunTable::JoinEnded(const OpenRequest& open) {
  const runs::RunId id = open.run_id;
  absl::StatusOr<runs::RunInfo> info = manager_.registry().Info(id);
  if (!info.ok()) {
    log::Warning("ingest: client '", open.client_id, "' reconnected to run ", id, " '",
                 open.run_name, "', which this daemon does not know");
    return Refuse(
        stats_, Refusal::kUnknownRun,
        absl::NotFoundError(absl::StrCat(
            "run ", id, " '", open.run_name,
            "' is unknown to this daemon: deleted by retention, or lost with its state directory; "
            "the client's messages were not applied")));
  }
  if (info->spec.source == runs::RunSource::kBench || info->state == runs::RunState::kRunning ||
      info->spec.name != open.run_name) {
    return Refuse(
        stats_, Refusal::kMalformed,
        absl::InvalidArgumentError(absl::StrCat(
            "open: run_id ", id, " is ", runs::RunSourceName(info->spec.source), " run '",
            info->spec.name, "', not the remote run '", open.run_name, "' this client was in")));
  }
  std::vector<state::CheckpointClient> rows;
  if (store_ != nullptr) {
    absl::StatusOr<std::vector<state::CheckpointClient>> loaded = store_->LoadRunClients(id);
    if (!loaded.ok()) return loaded.status();
    rows = *std::move(loaded);
  }
  for (const state::CheckpointClient& row : rows) {
    if (row.id != open.client_id || !row.closed) continue;
    // Its close was applied and stored with the run: answer for the run.
    auto run = std::make_shared<Run>();
    run->context.id = id;
    run->name = info->spec.name;
    run->stored.store(true, std::memory_order_relaxed);
    auto m = std::make_unique<Member>();
    m->session = NewClient(*run, row.id, row.name, /*clock=*/"",
                           row.raw ? ClientMode::kRaw : ClientMode::kWindows, row.index);
    m->session->SetApplied(row.applied);
    m->closed = true;
    m->closed_at = row.applied;
    Member& member = *m;
    run->clients[row.id] = std::move(m);
    MutexLock lock(mu_);
    return ClosedSession(run, member);
  }
  std::string why;
  if (info->end_reason == runs::EndReason::kStopped) why = "stopped by Control.StopRun";
  if (info->end_reason == runs::EndReason::kSloFailed) {
    why = "stopped by its SLO";
    for (const runs::SloStatus::Verdict& v : info->slo_status.verdicts) {
      if (!v.held) {
        absl::StrAppend(&why, ": ", v.line.substr(5));  // without "FAIL "
        break;
      }
    }
  }
  return RunEnded(stats_, id, info->spec.name, open, why);
}

std::shared_ptr<RunTable::Run> RunTable::FindEndedLocked(runs::RunId id) const {
  if (auto it = active_.find(id); it != active_.end() && it->second->ending) return it->second;
  for (const auto& run : ended_) {
    if (run->context.id == id) return run;
  }
  return nullptr;
}

RunTable::Session RunTable::ClosedSession(const std::shared_ptr<Run>& run, Member& m) {
  Session session;
  session.run = run;
  session.client = m.session.get();
  session.member = &m;
  session.run_id = run->context.id;
  session.acked_sequence = m.closed_at;
  session.closed = true;
  stats_.streams.fetch_add(1, std::memory_order_relaxed);
  return session;
}

absl::StatusOr<Offered> RunTable::OfferWindow(const Session& session, uint64_t sequence,
                                              WindowBuilder build, OnApplied on_applied) {
  return session.client->OfferWindow(session.generation, sequence, build, session.max_memory_bytes,
                                     std::move(on_applied));
}

absl::StatusOr<Offered> RunTable::OfferBatch(const Session& session, uint64_t sequence,
                                             BatchBuilder build, OnApplied on_applied) {
  return session.client->OfferBatch(session.generation, sequence, build, session.max_memory_bytes,
                                    std::move(on_applied));
}

absl::StatusOr<Applied> RunTable::Close(const Session& session, uint64_t last_sequence) {
  absl::StatusOr<Applied> out = session.client->Close(session.generation, last_sequence);
  if (!out.ok()) return out;
  bool ending = false;
  {
    MutexLock lock(mu_);
    session.member->closed = true;
    session.member->closed_at = last_sequence;
    // The last client to close ends the run now, while its stream waits for
    // the acknowledgement: the stored end makes every close durable.
    if (ReadyToEndLocked(*session.run, MonotonicNanos())) {
      to_end_.push_back(session.run);
      ending = true;
    }
  }
  if (!session.run->context.checkpointed || !close_hook_) {
    session.client->MarkCloseDurable();
  } else if (!ending) {
    close_hook_(session.run_id, session.client->index(), last_sequence);
  }
  if (ending) reap_cv_.NotifyAll();
  return out;
}

Progress RunTable::CurrentProgress(const Session& session) const {
  return session.client->progress();
}

uint64_t RunTable::AddProgressListener(const Session& session, std::function<void()> on_change) {
  return session.client->AddListener(std::move(on_change));
}

void RunTable::RemoveProgressListener(const Session& session, uint64_t token) {
  session.client->RemoveListener(token);
}

bool RunTable::CloseDurable(const Session& session) const {
  return session.client->progress().close_durable ||
         session.run->stored.load(std::memory_order_acquire);
}

namespace {

// Where a stored run resumes from its checkpoint (no clients).
runs::RunResume ResumeOf(runs::RunInfo info, std::vector<runs::WindowRecord> history,
                         state::Checkpoint& checkpoint) {
  runs::RunResume resume;
  resume.info = std::move(info);
  resume.history = std::move(history);
  resume.base = CountersOf(checkpoint.total.snapshot);
  resume.base_distribution = std::move(checkpoint.total.distribution);
  resume.base_seconds = checkpoint.total.seconds;
  resume.base_start_time = checkpoint.total.snapshot.start_time;
  resume.recorder.schedule = checkpoint.total.schedule;
  resume.recorder.periodic_seq = checkpoint.periodic_seq;
  resume.recorder.segment_seq = checkpoint.segment_seq;
  return resume;
}

}  // namespace

absl::Status RunTable::Resume(runs::RunInfo info, std::vector<runs::WindowRecord> history,
                              state::Checkpoint checkpoint,
                              std::vector<state::StoredRun> response_view) {
  const std::shared_ptr<const config::DaemonConfig> config = config_.Get();
  auto run = std::make_shared<Run>();
  run->name = info.spec.name;
  run->slo = info.spec.slo;
  run->abort_on_fail = info.spec.abort_on_fail;
  run->context.latency = info.spec.latency;
  run->context.inbox = std::make_shared<runs::RemoteWindowInbox>();
  run->context.checkpointed = true;
  run->context.paced = info.spec.target_rate > 0;
  if (run->context.paced != (response_view.size() == 1)) {
    return absl::DataLossError(absl::StrCat("run ", info.id,
                                            ": rate-controlled runs resume with "
                                            "their response view, others without one"));
  }
  run->max_clients = static_cast<int>(std::max<int64_t>(
      config->ingest.max_clients_per_run, static_cast<int64_t>(checkpoint.clients.size())));
  // Its recorders say how it was created (a windows client's ns run
  // aggregates in hybrid pages, the only thing `aggregate` decides), also
  // when the checkpoint knows no client yet.
  run->aggregate = info.spec.periodic_recorder == RecorderKind::kHybridPaged;

  runs::RunSetup setup = SetupFor(run);
  runs::RunResume& resume =
      setup.resume.emplace(ResumeOf(std::move(info), std::move(history), checkpoint));
  for (state::StoredRun& view : response_view) {
    resume.response_view.push_back(
        ResumeOf(std::move(view.info), std::move(view.windows), *view.checkpoint));
  }
  for (const state::CheckpointClient& c : checkpoint.clients) {
    const auto index = static_cast<size_t>(c.index);
    if (index >= resume.recorder.client_applied.size()) {
      resume.recorder.client_applied.resize(index + 1, 0);
    }
    resume.recorder.client_applied[index] = c.applied;
  }
  absl::StatusOr<runs::CreatedRun> created = manager_.CreateRun(std::move(setup));
  if (!created.ok()) return created.status();
  run->context.id = created->id;

  const int64_t deadline = MonotonicNanos() + config->ingest.client_timeout_ms * 1'000'000 + 1;
  for (const state::CheckpointClient& cut : checkpoint.clients) {
    auto m = std::make_unique<Member>();
    // Checkpoints do not keep a client's clock: "not reported" after a crash.
    m->session = NewClient(*run, cut.id, cut.name, /*clock=*/"",
                           cut.raw ? ClientMode::kRaw : ClientMode::kWindows, cut.index);
    m->session->SetApplied(cut.applied);
    m->session->SetProgress(Progress{cut.applied, cut.applied, 0, cut.closed});
    m->closed = cut.closed;
    m->closed_at = cut.applied;
    m->gone_deadline_ns = cut.closed ? 0 : deadline;
    run->clients[cut.id] = std::move(m);
  }
  if (checkpoint.clients.empty()) run->rejoin_deadline_ns = deadline;
  {
    MutexLock lock(mu_);
    by_name_[run->name] = run;
    active_[run->context.id] = run;
  }
  reap_cv_.NotifyAll();
  stats_.runs_resumed.fetch_add(1, std::memory_order_relaxed);
  if (checkpoint.clients.empty()) {
    log::Info("ingest: run ", run->context.id, " '", run->name,
              "' resumed empty: perld stopped before its first checkpoint, so no client was "
              "told anything is durable; its clients replay everything (it waits up to "
              "ingest.clientTimeoutMs for them)");
  } else {
    log::Info("ingest: run ", run->context.id, " '", run->name,
              "' resumed from its checkpoint (window ", checkpoint.periodic_seq, ", ",
              checkpoint.total.snapshot.records, " records, ", checkpoint.clients.size(),
              " client(s))");
  }
  return absl::OkStatus();
}

bool RunTable::Checkpointed(runs::RunId id) const {
  MutexLock lock(mu_);
  auto it = active_.find(id);
  return it != active_.end() && it->second->context.checkpointed;
}

std::vector<state::CheckpointClient> RunTable::CutClients(
    runs::RunId id, const std::vector<uint64_t>& applied) const {
  std::vector<state::CheckpointClient> out;
  MutexLock lock(mu_);
  auto it = active_.find(id);
  if (it == active_.end()) return out;
  out.resize(it->second->clients.size());
  for (const auto& [cid, m] : it->second->clients) {
    const ClientSession& c = *m->session;
    state::CheckpointClient& cut = out[static_cast<size_t>(c.index())];
    cut.index = c.index();
    cut.id = c.id();
    cut.name = c.name();
    cut.raw = c.mode() == ClientMode::kRaw;
    const auto index = static_cast<size_t>(c.index());
    cut.applied = index < applied.size() ? applied[index] : 0;
    // Under mu_, `closed` implies the close's last sequence was applied
    // (Close checks it under the apply lock before taking mu_).
    cut.closed = m->closed && m->closed_at <= cut.applied;
  }
  return out;
}

void RunTable::MarkDurable(runs::RunId id, const std::vector<state::CheckpointClient>& clients) {
  std::shared_ptr<Run> run;  // keeps the members alive below
  std::vector<std::pair<ClientSession*, const state::CheckpointClient*>> marked;
  {
    MutexLock lock(mu_);
    auto it = active_.find(id);
    if (it == active_.end()) return;
    run = it->second;
    for (const state::CheckpointClient& cut : clients) {
      auto found = run->clients.find(cut.id);
      if (found != run->clients.end()) marked.emplace_back(found->second->session.get(), &cut);
    }
  }
  // Outside mu_: the clients' listeners write acknowledgements.
  for (auto& [client, cut] : marked) client->MarkDurable(cut->applied, cut->closed);
}

void RunTable::CancelParked(const Session& session) {
  if (session.client != nullptr && !session.closed)
    session.client->CancelParked(session.generation);
}

void RunTable::Leave(Session& session) {
  if (session.run == nullptr) return;
  if (session.closed) {  // never attached
    session.run.reset();
    session.client = nullptr;
    session.member = nullptr;
    return;
  }
  // A message this stream parked is dropped first, outside mu_ (the
  // notifier's retry takes the client's apply lock).
  session.client->Detach(session.generation);
  {
    MutexLock lock(mu_);
    Run& run = *session.run;
    Member& m = *session.member;
    if (!session.client->Superseded(session.generation)) {
      m.stream = nullptr;
      if (!m.closed) {
        const int64_t timeout_ms = config_.Get()->ingest.client_timeout_ms;
        m.gone_deadline_ns = MonotonicNanos() + timeout_ms * 1'000'000 + 1;
      }
    }
    --run.attached;
    // Ended on the reaper thread: a stream's thread (a gRPC callback
    // thread) never waits for the recorder and the dispatcher.
    if (ReadyToEndLocked(run, MonotonicNanos())) to_end_.push_back(session.run);
  }
  reap_cv_.NotifyAll();
  session.run.reset();
  session.client = nullptr;
  session.member = nullptr;
}

absl::StatusOr<runs::RunInfo> RunTable::Info(const Session& session) const {
  return manager_.registry().Info(session.run_id);
}

bool RunTable::Superseded(const Session& session) const {
  return session.client->Superseded(session.generation);
}

bool RunTable::RunStopped(const Session& session) const {
  return session.run->stopped.load(std::memory_order_relaxed);
}

bool RunTable::ReadyToEndLocked(Run& run, int64_t now_ns) {
  if (run.ending) return false;
  // A detached client times out even while other clients' streams are
  // attached (else the reaper would wake for its past deadline at once,
  // again and again, until they leave).
  bool waiting = false;  // a client may still come back
  if (!run.stopped.load(std::memory_order_relaxed)) {
    for (auto& [id, m] : run.clients) {
      if (m->closed || m->gone) continue;
      if (m->gone_deadline_ns > 0 && now_ns >= m->gone_deadline_ns) {
        m->gone = true;
        stats_.clients_gone.fetch_add(1, std::memory_order_relaxed);
        log::Warning("ingest: run ", run.context.id, " '", run.name, "': ", Describe(*m->session),
                     " did not come back within ingest.clientTimeoutMs");
        departures_.push_back({run.context.id, id});
        continue;
      }
      waiting = true;
    }
  }
  // Resumed empty: which clients it had is unknown, so it waits out the
  // rejoin deadline for every one of them (the first to come back and
  // close does not end it).
  if (run.rejoin_deadline_ns > 0 && !run.stopped.load(std::memory_order_relaxed)) {
    if (now_ns < run.rejoin_deadline_ns) return false;
  }
  if (run.clients.empty() && run.rejoin_deadline_ns > 0 &&
      !run.stopped.load(std::memory_order_relaxed)) {
    run.failure =
        "resumed after perld stopped before its first checkpoint, and none of its clients came "
        "back within ingest.clientTimeoutMs";
    log::Warning("ingest: run ", run.context.id, " '", run.name, "': ", run.failure);
  }
  // A closed client's stream still attached only waits for its close's
  // acknowledgement: it sends nothing more (ClientSession::Close).
  int sending = run.attached;
  for (const auto& [id, m] : run.clients) sending -= m->closed && m->stream != nullptr;
  if (waiting || sending > 0) return false;
  std::vector<std::string> lost;
  for (auto& [id, m] : run.clients) {
    if (!m->closed) lost.push_back(Describe(*m->session));
  }
  if (!lost.empty()) {
    run.failure =
        absl::StrCat(run.stop_cause.empty() ? "" : run.stop_cause + " while ", lost.size(),
                     " client(s) had not closed: ", absl::StrJoin(lost, ", "));
  }
  // Ending: reconnects naming it find it ended (FindEndedLocked) from now
  // on, in the same critical section that takes it out of by_name_.
  run.ending = true;
  auto named = by_name_.find(run.name);
  if (named != by_name_.end() && named->second.get() == &run) by_name_.erase(named);
  return true;
}

void RunTable::End(const std::shared_ptr<Run>& run) {
  manager_.EndRun(run->context.id);
  // The dispatcher queues the final total to the state store; the clients
  // queued after it commit in the same transaction or a later one.
  manager_.WaitEnded(run->context.id, absl::InfiniteDuration());
  std::vector<state::CheckpointClient> rows;
  std::vector<ClientSession*> sessions;
  {
    MutexLock lock(mu_);
    rows = ClientRowsLocked(*run);
    for (const auto& [id, m] : run->clients) sessions.push_back(m->session.get());
  }
  // Every client's breakdown row holds all its windows from now on (outside
  // mu_: a flush takes the client's apply lock).
  for (ClientSession* session : sessions) session->FlushBreakdown();
  // Once stored, the final total holds every message applied and every
  // close: the clients' streams acknowledge them durable (the last close
  // ended the run while its stream waited; repeated closes wait for it).
  const auto stored = [run, rows] {
    run->stored.store(true, std::memory_order_release);
    for (const auto& [id, m] : run->clients) {
      const state::CheckpointClient& row = rows[static_cast<size_t>(m->session->index())];
      m->session->MarkDurable(row.applied, row.closed);
    }
  };
  if (store_ != nullptr) {
    store_->SaveRunClients(run->context.id, std::move(rows), stored);
  } else {
    stored();
  }
  {
    MutexLock lock(mu_);
    active_.erase(run->context.id);
    ended_.push_back(run);
    if (ended_.size() > kEndedBreakdowns) ended_.pop_front();
    departures_.push_back({run->context.id, ""});
  }
  reap_cv_.NotifyAll();
}

void RunTable::SetDepartureHook(DepartureHook hook) {
  MutexLock lock(mu_);
  departure_hook_ = std::move(hook);
}

absl::Status RunTable::Abandon(runs::RunId id, const std::string& client_id) {
  std::shared_ptr<Run> run;
  {
    MutexLock lock(mu_);
    auto it = active_.find(id);
    if (it == active_.end()) return absl::OkStatus();  // ended already
    run = it->second;
    auto found = run->clients.find(client_id);
    if (found == run->clients.end()) {
      return absl::NotFoundError(absl::StrCat("run ", id, " has no client '", client_id, "'"));
    }
    Member& m = *found->second;
    if (m.closed || m.gone) return absl::OkStatus();
    if (m.stream != nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("client '", client_id, "' of run ", id, " is streaming"));
    }
    m.gone = true;
    m.gone_deadline_ns = 0;
    stats_.clients_gone.fetch_add(1, std::memory_order_relaxed);
    log::Warning("ingest: run ", id, " '", run->name, "': ", Describe(*m.session),
                 " gave its part up without closing it");
    departures_.push_back({id, client_id});
    if (ReadyToEndLocked(*run, MonotonicNanos())) to_end_.push_back(run);
  }
  reap_cv_.NotifyAll();
  return absl::OkStatus();
}

std::vector<state::CheckpointClient> RunTable::ClientRowsLocked(const Run& run) {
  std::vector<state::CheckpointClient> rows(run.clients.size());
  for (const auto& [cid, m] : run.clients) {
    const ClientSession& c = *m->session;
    state::CheckpointClient& row = rows[static_cast<size_t>(c.index())];
    row.index = c.index();
    row.id = c.id();
    row.name = c.name();
    row.raw = c.mode() == ClientMode::kRaw;
    row.applied = m->closed ? m->closed_at : c.progress().applied;
    row.closed = m->closed;
  }
  return rows;
}

void RunTable::Reap() {
  MutexLock lock(mu_);
  while (!stopping_) {
    int64_t next = 0;
    const auto wake_by = [&next](int64_t t) { next = next == 0 ? t : std::min(next, t); };
    std::vector<std::shared_ptr<Run>> ready;
    ready.swap(to_end_);
    // Attached windows clients whose breakdown row leaves windows out: a
    // busy one merges them with its next window once due, a quiet one never
    // would, so the reaper merges them (FlushBreakdown). The run keeps its
    // sessions alive while that runs outside mu_.
    std::vector<std::pair<std::shared_ptr<Run>, ClientSession*>> quiet;
    bool windows_attached = false;
    const int64_t now = MonotonicNanos();
    const int64_t now_unix_ms = ClientTotals::NowUnixMs();
    for (auto& [id, run] : active_) {
      if (ReadyToEndLocked(*run, now)) {
        ready.push_back(run);
        continue;
      }
      if (run->stopped.load(std::memory_order_relaxed)) continue;  // ends as its streams leave
      if (run->rejoin_deadline_ns > 0 && run->rejoin_deadline_ns > now) {
        wake_by(run->rejoin_deadline_ns);
      }
      for (auto& [cid, m] : run->clients) {
        if (m->gone_deadline_ns > 0 && !m->gone && !m->closed && m->stream == nullptr) {
          wake_by(m->gone_deadline_ns);
        }
        if (m->stream == nullptr || m->session->mode() != ClientMode::kWindows) continue;
        windows_attached = true;
        if (m->session->QuietWithWindowsWaiting(now_unix_ms)) {
          quiet.emplace_back(run, m->session.get());
        }
      }
    }
    // A windows client may leave windows out of its row at any message:
    // look again every ClientTotals::kRefreshMs while one is attached (a
    // row takes a quiet client's last window at most two of them after it).
    if (windows_attached) wake_by(now + ClientTotals::kRefreshMs * 1'000'000);
    if (!ready.empty()) {
      lock.Unlock();
      for (const auto& run : ready) End(run);
      lock.Lock();
      continue;
    }
    if (!departures_.empty()) {  // reported outside the lock, in order
      std::vector<Departure> departed;
      departed.swap(departures_);
      const DepartureHook hook = departure_hook_;
      lock.Unlock();
      if (hook) {
        for (const Departure& d : departed) hook(d);
      }
      lock.Lock();
      continue;
    }
    if (!quiet.empty()) {  // a flush takes the client's apply lock: outside mu_
      lock.Unlock();
      for (const auto& [run, session] : quiet) session->FlushBreakdown();
      quiet.clear();
      lock.Lock();
      if (stopping_) break;
      // Ends and departures queued meanwhile: their notice came unlocked.
      if (!to_end_.empty() || !departures_.empty()) continue;
    }
    if (next == 0) {
      reap_cv_.Wait(mu_);
    } else {
      reap_cv_.WaitFor(mu_, std::chrono::nanoseconds(next - now));
    }
  }
}

absl::Status RunTable::Stop(runs::RunId id, std::string cause) {
  std::shared_ptr<Run> run;
  {
    MutexLock lock(mu_);
    auto it = active_.find(id);
    if (it == active_.end()) {
      return absl::NotFoundError(absl::StrCat("run ", id, " is not a running ingest run"));
    }
    run = it->second;
    if (run->stop_cause.empty()) run->stop_cause = std::move(cause);
    run->stopped.store(true, std::memory_order_relaxed);
    auto named = by_name_.find(run->name);
    if (named != by_name_.end() && named->second == run) by_name_.erase(named);
    // Cancel under mu_: a stream stays valid until its handler has left
    // (Leave takes mu_).
    for (auto& [cid, m] : run->clients) {
      if (m->stream != nullptr) m->stream->Cancel();
    }
    if (ReadyToEndLocked(*run, MonotonicNanos())) to_end_.push_back(run);
  }
  reap_cv_.NotifyAll();
  return absl::OkStatus();
}

void RunTable::StopAccepting() {
  MutexLock lock(mu_);
  accepting_.store(false, std::memory_order_relaxed);
}

void RunTable::EndAll() {
  std::vector<std::shared_ptr<Run>> ending;
  std::vector<runs::RunId> ids;
  {
    MutexLock lock(mu_);
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

std::map<runs::RunId, Connections> RunTable::ConnectionCounts() const {
  MutexLock lock(mu_);
  std::map<runs::RunId, Connections> out;
  for (const auto& [id, run] : active_) {
    out[id] = {run->attached, static_cast<int>(run->clients.size())};
  }
  return out;
}

absl::StatusOr<std::vector<ClientView>> RunTable::Clients(runs::RunId id,
                                                          const PercentileSet& set) const {
  std::shared_ptr<Run> run;
  std::vector<std::pair<const ClientSession*, const char*>> clients;  // client, state
  {
    MutexLock lock(mu_);
    if (auto it = active_.find(id); it != active_.end()) run = it->second;
    for (const auto& r : ended_) {
      if (r->context.id == id) run = r;
    }
    if (run == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          "run ", id, " is not a remote run perld holds clients for (running, or one of the last ",
          kEndedBreakdowns, " that ended)"));
    }
    for (const auto& [cid, m] : run->clients) {
      const char* state = m->closed   ? "closed"
                          : m->gone   ? "gone"
                          : m->stream ? "streaming"
                                      : "detached";
      clients.emplace_back(m->session.get(), state);
    }
  }
  std::sort(clients.begin(), clients.end(),
            [](const auto& a, const auto& b) { return a.first->index() < b.first->index(); });
  std::vector<ClientView> out;
  out.reserve(clients.size());
  for (const auto& [c, state] : clients) {
    out.push_back(c->View(set));  // its published view: never its apply lock
    out.back().state = state;
  }
  return out;
}

}  // namespace perld::ingest
