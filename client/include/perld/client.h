// perld::Client: a benchmark process's connection to a perld daemon
// (perld.v1.Ingest). The public API of the perld client library
// (`find_package(perld)`, target `perld::client`).
//
//   perld::ClientOptions o;
//   o.target = "perld.example:9717";        // or "unix:/run/perld/perld.sock"
//   o.run = "kafka-write";
//   o.mode = perld::IngestMode::kWindows;   // or kRaw
//   std::string error;
//   std::unique_ptr<perld::Client> client = perld::Client::Create(o, &error);
//   perld::Recorder* r = client->NewRecorder();          // one per thread
//   r->Record(start_ns, end_ns, /*records=*/1, /*bytes=*/1024);
//   perld::FlushResult done = client->Close(std::chrono::seconds(30));
//
// Recording. Record() is the core's channel Send: no lock, no allocation at
// steady state. Each Recorder belongs to one thread at a time. Locally the
// client runs perld's own pipeline -- channels, one recorder thread, exact
// windows -- so it always knows its own exact total (Total()).
//
// Sending. raw mode: every timestamp is sent (TimestampBatch, up to
// batch_length per message, or what the daemon allows); windows mode: each
// closed local window (every reporting_interval_ms) is sent as a
// WindowReport. A background thread owns the stream: sequence numbers from 1,
// cumulative acks, reconnect with backoff (50 ms doubling to 2 s) and resend
// of everything after the sequence the daemon acknowledged, so a record is
// neither lost nor counted twice across a broken connection.
//
// A message is kept until the daemon reports it durable (a committed
// checkpoint of the daemon holds it: see ingest.checkpoints), and replayed
// to a daemon that crashed and resumed from its checkpoint.
//
// Bounded memory while disconnected (never a silent loss): at most
// max_unacked_messages messages in flight beyond what the daemon applied
// (without a spool), and at most max_undurable_bytes of messages kept until
// durable; at either bound the local recorder thread waits (counted in
// Counters::outbox_full_waits), so the channels fill up and Record() blocks at
// the pending bound. Record() then returns only when the daemon is back. With
// a spool, recording goes on while the daemon is away until the spool
// (spool_max_bytes) or max_undurable_bytes is full.
//
// Errors the daemon reports as final (INVALID_ARGUMENT, FAILED_PRECONDITION,
// NOT_FOUND, RESOURCE_EXHAUSTED, OUT_OF_RANGE, ABORTED) stop the sending;
// Flush/Close then report them. UNAVAILABLE and broken connections are
// retried.
//
// Threads: Create/NewRecorder/Flush/Close/counters/Total from any thread;
// Record from the recorder's own thread. Close() REQUIRES that no Record call
// is running or will run.
//
// This header has one layout and one behaviour whatever the includer's
// NDEBUG: it holds no perld internals (pimpl).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace perld {
namespace client {
struct RecorderAccess;
}

enum class IngestMode { kRaw, kWindows };
enum class LatencyUnit { kMs, kUs, kNs };

struct ClientOptions {
  std::string target = "127.0.0.1:9717";  // HOST:PORT or unix:PATH
  std::string run = "perld-client";       // the run to join or create
  bool must_exist = false;   // join only: NOT_FOUND unless a running ingest run `run` exists
  bool must_create = false;  // create only: ALREADY_EXISTS if a running ingest run `run` exists
  std::map<std::string, std::string> labels;
  IngestMode mode = IngestMode::kRaw;
  LatencyUnit time_unit = LatencyUnit::kNs;  // unit of Record's start and end
  std::optional<int64_t> min_latency;        // default: perld's default for the unit
  std::optional<int64_t> max_latency;
  std::vector<double> percentiles;       // default: SBK's set
  int64_t reporting_interval_ms = 1000;  // windows mode: local window length (>= 10)
  std::string client_id;                 // stable across reconnects; default host/pid/random
  std::string client_name;               // default: the host name
  // The clock Record's start and end come from, for people reading the run
  // (perlctl clients / show), e.g. "CLOCK_MONOTONIC"; "" and 0: not reported.
  // Sent cut to 256 bytes (ending "..."), the daemon's default bound.
  std::string clock;
  int64_t clock_resolution_ns = 0;
  // An SLO for the run this client creates (perlctl check's terms, e.g.
  // "p99<=2ms,invalid=0"), evaluated by perld at every window and at the
  // end; slo_abort_on_fail stops the run once a term fails for good. A run
  // that exists already must have the same one ("": join whatever it has).
  std::string slo;
  bool slo_abort_on_fail = false;
  // Non-empty: Record's latencies are not raw measurements but values
  // standing for them (e.g. HdrHistogram bucket values), and why: the run
  // is marked bucketed with this reason (IngestOpen.bucketed_reason).
  std::string bucketed_reason;
  // > 0: the clients of the run generate load at this many operations per
  // second together (open model; Record(intended_start, ...)): the run this
  // client creates keeps response time beside service time and counts its
  // schedule; a run it joins must have the same rate. late_threshold_ns: an
  // operation started more than this after its slot is late (0: 1 ms).
  double target_rate = 0;
  int64_t late_threshold_ns = 0;
  int max_recorders = 64;                            // NewRecorder calls allowed
  int64_t max_pending_per_recorder = 1 << 16;        // timestamps in flight per Recorder
  int64_t max_unacked_messages = 256;                // messages awaiting their ack
  int64_t max_undurable_bytes = int64_t{256} << 20;  // messages kept until durable
  int batch_length = 4096;                           // raw: timestamps per message (upper bound)
  // Security (see README "Security"): TLS when `tls` or any of ca_file /
  // cert_file is set; a bearer token from token_file on every call. Secret
  // files (token, key) must grant nothing to others.
  bool tls = false;
  std::string ca_file;     // PEM roots for the daemon's certificate ("" system roots)
  std::string cert_file;   // PEM client certificate for mutual TLS (with key_file)
  std::string key_file;    // its private key
  std::string token_file;  // the daemon's ingest token
  // Durable spool (README "Durable spool"): every message is written to
  // files in spool_dir before it is sent and released once durable; a
  // client created again on the same directory (after a crash) first
  // replays what the daemon had not made durable, under the same client id.
  // synced: fdatasync per message; else group commits every
  // spool_batch_appends messages or spool_batch_ms. Full (spool_max_bytes):
  // the recorder waits for acknowledgements (Counters::spool_full_waits).
  std::string spool_dir;  // "" no spool (memory only)
  bool spool_synced = false;
  int64_t spool_batch_appends = 64;
  int64_t spool_batch_ms = 10;
  int64_t spool_max_bytes = int64_t{1} << 30;
};

class Recorder {
 public:
  // Hot path: one completed operation, start and end in the client's time
  // unit (latency = end - start), `records` records (>= 1) and `bytes`
  // bytes. Returns true (timestamps are never dropped; it blocks instead).
  // A rate-controlled client (ClientOptions::target_rate > 0) times it from
  // its actual start: its intended start is taken to be `start`.
  bool Record(int64_t start, int64_t end, int32_t records, int32_t bytes);
  // Rate-controlled load (README "Rate-controlled runs"): one operation whose
  // slot on the client's schedule was `intended_start` (<= start; a later
  // one is taken as start). The run gets its service time (end - start) and
  // its response time (end - intended_start), both exact, and the start lag
  // in its schedule. A closed-loop client (target_rate 0) records service
  // time only. Same thread rules as Record(start, ...).
  bool Record(int64_t intended_start, int64_t start, int64_t end, int32_t records, int32_t bytes);

 private:
  friend class Client;
  friend struct client::RecorderAccess;
  explicit Recorder(void* producer) : producer_(producer) {}
  void* producer_;
};

struct Counters {
  int64_t records = 0;             // records the local recorder consumed
  uint64_t messages = 0;           // messages made (sequence numbers used)
  uint64_t acked_sequence = 0;     // highest sequence the daemon acknowledged
  uint64_t durable_sequence = 0;   // highest sequence a daemon checkpoint holds
  uint64_t duplicates = 0;         // resends the daemon recognised
  uint64_t reconnects = 0;         // streams opened after the first
  uint64_t outbox_full_waits = 0;  // times the recorder waited for acks
  uint64_t run_id = 0;             // the daemon's run (0 until opened)
  bool opened = false;             // a stream of this process was opened by the daemon
  bool run_created = false;        // that open created the run (else it joined it)
  // The run's response view (RunInfo.response_run): 0 when the run is
  // closed-loop -- a rate-controlled client that joined it then adds its
  // service time only.
  uint64_t response_run = 0;
  int64_t acked_records = 0;      // records in the acknowledged messages
  int64_t unsent_records = 0;     // records in messages given up on (Abandon, Close deadline)
  std::string last_stream_error;  // why the last stream ended early ("" if none)
  uint64_t spool_replayed = 0;    // messages replayed from the spool at Create
  uint64_t spool_full_waits = 0;  // messages that waited for room in a full spool
};

struct FlushResult {
  bool acked = false;  // everything made so far is acknowledged
  uint64_t unacked_messages = 0;
  std::string error;  // a final daemon error, or "timed out"
};

// The client's own exact total: every counter and the distribution.
struct LocalTotal {
  int64_t records = 0, bytes = 0, valid = 0, invalid = 0, lower_discard = 0, higher_discard = 0,
          rejected = 0, min_latency = 0, max_latency = 0, total_latency = 0;
  std::vector<std::pair<int64_t, int64_t>> latency_counts;  // ascending latency -> count
};

class Client {
 public:
  // Validates the options and starts the local pipeline and the sender; the
  // connection is made in the background. nullptr with `error` set on bad
  // options.
  static std::unique_ptr<Client> Create(const ClientOptions& options, std::string* error);
  ~Client();  // Close(0) if not closed
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // A new recording handle (owned by the client), or nullptr once
  // max_recorders were made or after Close.
  Recorder* NewRecorder();
  // Returns when every record whose Record call returned before this call
  // is acknowledged (the local recorder takes everything published when it
  // sees the request, a few ms after the call), or at the deadline, or on a
  // final error. In windows mode it closes the current local window early.
  FlushResult Flush(std::chrono::milliseconds timeout);
  // Ends recording (REQUIRES: no Record running or to come), sends what is
  // left and IngestClose, and returns when the daemon acknowledged it all
  // and ended the stream, or at the deadline, or on a final error.
  FlushResult Close(std::chrono::milliseconds timeout);

  // Stops waiting for the daemon `grace` from now: from then on nothing
  // blocks on it (a full outbox no longer holds the recorder back; messages
  // that find no room are counted as unsent, never dropped silently) and
  // Close returns by then, whatever its timeout. For an interrupted load
  // generator: call it, stop the Record calls, then Close.
  void Abandon(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

  Counters counters() const;
  // The error that stopped the client for good ("" while it can go on): the
  // daemon refused its messages (e.g. DATA_LOSS, NOT_FOUND, a run that
  // ended), or its spool failed. Nothing more will be acknowledged: a load
  // generator stops recording, then Closes (which reports the same error).
  std::string FinalError() const;
  // The client's exact total: filled by Close (empty before).
  LocalTotal Total() const;
  // A rate-controlled client's exact response-time total (end - intended
  // start of the same operations): filled by Close; empty otherwise.
  LocalTotal ResponseTotal() const;

  struct Impl;

 private:
  friend struct client::RecorderAccess;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace perld
