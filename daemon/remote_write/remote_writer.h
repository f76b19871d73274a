// RemoteWriter: Prometheus remote write 1.0 of the daemon's /metrics series
// (the remoteWrite: section), for hosts nothing scrapes.
//
// Two threads of its own, started by Start() when remoteWrite.url is set:
//   * the collector ("perld-rw-coll"): every remoteWrite.intervalMs it
//     renders the exposition (`render`: the same text as a /metrics scrape,
//     read from published snapshots, so it never waits for the recorder),
//     turns it into samples stamped with the collection time
//     (ExpositionSamples) and appends them to the bounded SampleQueue; when
//     the queue is full the oldest samples are dropped and counted
//     (dropped{reason="queue_full"}). It never waits for the network: a
//     receiver that is down or slow delays no collection.
//   * the sender ("perld-rw-send"): takes up to maxSamplesPerRequest of the
//     oldest samples, encodes and compresses them (remote_write_encoding.h)
//     and POSTs them (RemoteWriteEndpoint). 2xx: sent. 429, 5xx, no answer:
//     the same batch again after an exponential backoff with jitter
//     (RetryBackoff, Retry-After honoured), newer samples waiting behind it,
//     so each series stays in time order. Other statuses: the batch is
//     dropped and counted (dropped{reason="rejected"}), logged once per
//     status until a request succeeds again.
// The queue and the settings are guarded by one mutex, held only to move
// samples in or out -- never while rendering, encoding or on the network.
//
// Lifecycle (the daemon's): Create checks the configuration's files (a
// missing or unsafe credential stops the start, naming the key); Start;
// Reconfigure on SIGHUP (url, intervalMs, credentials -- re-read --, TLS
// files, maxSamplesPerRequest, timeoutMs; url set/unset starts/stops the
// threads; maxQueuedSamples needs a restart); Stop on SIGTERM, after the
// runs ended: one last collection (the runs' final totals), then sending
// until the queue is empty or `flush_ms` passed (a request in flight then is
// aborted); what is left is counted dropped{reason="shutdown"}.
//
// Threads: Start, Reconfigure and Stop from one thread (the daemon's main
// thread); stats() from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/common/mutex.h"
#include "daemon/config/daemon_config.h"
#include "daemon/remote_write/exposition_samples.h"
#include "daemon/remote_write/remote_write_endpoint.h"
#include "daemon/remote_write/remote_write_stats.h"
#include "daemon/remote_write/sample_queue.h"

namespace perld::remote_write {

class RemoteWriter {
 public:
  struct Options {
    // Renders the exposition (Prometheus text 0.0.4) into `text` (replacing
    // it). Called on the collector thread.
    std::function<void(std::string* text)> render;
    // The collection time (Unix ms); default: the wall clock.
    std::function<int64_t()> now_unix_ms;
    int64_t min_backoff_ms = 100;  // the first retry's wait
    int64_t max_backoff_ms = 5'000;
  };

  static absl::StatusOr<std::unique_ptr<RemoteWriter>> Create(
      const config::RemoteWriteConfig& config, Options options);
  ~RemoteWriter();  // Stop(0)
  RemoteWriter(const RemoteWriter&) = delete;
  RemoteWriter& operator=(const RemoteWriter&) = delete;

  // Starts the threads when the configuration enables remote write.
  void Start();
  // The reloaded section. On an error (a credential file) the running
  // settings stay and the error is returned.
  absl::Status Reconfigure(const config::RemoteWriteConfig& config);
  // One last collection, then send for at most `flush_ms`, then stop.
  // flush_ms 0: no last collection, nothing more sent. Idempotent.
  void Stop(int64_t flush_ms);

  const RemoteWriteStats& stats() const { return stats_; }
  bool running() const;

 private:
  using Clock = std::chrono::steady_clock;
  RemoteWriter(const config::RemoteWriteConfig& config, Options options,
               std::shared_ptr<RemoteWriteEndpoint> endpoint);

  void StartLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CollectLoop();
  // Renders, parses and queues one collection (releases mu_ meanwhile).
  void CollectOnce(std::string* text) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendLoop();
  // The log line of `kind`, once until a request succeeds again.
  bool FirstOf(const std::string& kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  RemoteWriteStats stats_;
  ExpositionSamples series_;  // the collector thread's

  mutable Mutex mu_;
  CondVar collect_cv_;  // wakes the collector: stop, new interval
  CondVar send_cv_;     // wakes the sender: samples, stop
  CondVar done_cv_;     // the sender finished (Stop waits for it)
  config::RemoteWriteConfig config_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<RemoteWriteEndpoint> endpoint_ ABSL_GUARDED_BY(mu_);
  // The endpoint of the request in flight (Stop aborts it at the deadline).
  std::shared_ptr<RemoteWriteEndpoint> sending_ ABSL_GUARDED_BY(mu_);
  SampleQueue queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_collecting_ ABSL_GUARDED_BY(mu_) = false;
  bool final_collection_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_sending_ ABSL_GUARDED_BY(mu_) = false;
  bool sender_done_ ABSL_GUARDED_BY(mu_) = false;
  Clock::time_point flush_deadline_ ABSL_GUARDED_BY(mu_);
  uint64_t interval_changes_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> logged_ ABSL_GUARDED_BY(mu_);  // kinds logged since the last success
  std::thread collector_;
  std::thread sender_;
};

}  // namespace perld::remote_write
