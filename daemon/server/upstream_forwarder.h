// UpstreamForwarder: tiers of perld. A daemon configured with an
// `upstream.target` forwards every run's closed periodic windows -- exact
// latency/count pairs and counters -- to a parent perld, which merges the
// windows of every edge exactly (the merge is associative: any tree gives
// the percentiles of one daemon fed everything).
//
// Each local run is one client of the parent's run of the same name:
// perld.v1.Ingest in windows mode, client id "<nodeId>/<run id>", the run's
// time unit, range, percentiles and interval, sequence numbers 1, 2, ... per
// local run (IngestSender: resends after a reconnect, the parent drops
// duplicates). A window larger than upstream.maxPairsPerReport is sent in
// parts (EncodeWindowParts) that merge to it exactly. Total segments and the
// run total are not sent: the parent builds its own from the windows. When
// the local run ends, its last window is sent and the stream closed (the
// parent's run ends once every client closed).
//
// Backpressure: windows wait in one queue while the parent is slow or down;
// past upstream.maxQueuedWindows a window is dropped, counted and logged as
// an error (a durable spool is the durability issue's). Nothing else in the
// daemon waits for the parent.
//
// Threads: the RunObserver callbacks only queue (OnRunStarted may run under
// the run manager's lock); one worker thread owns the streams. Counters()
// from any thread. Stop() sends what is queued, closes every stream (each
// waits up to upstream.closeTimeoutMs for its acknowledgements) and joins.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "client/lib/ingest_sender.h"
#include "daemon/config/daemon_config.h"
#include "daemon/runs/run_observer.h"

namespace perld::server {

class UpstreamForwarder final : public runs::RunObserver {
 public:
  struct Counters {
    uint64_t runs = 0;             // runs forwarded (streams opened)
    uint64_t open_streams = 0;     // runs whose stream is not closed yet
    uint64_t windows_sent = 0;     // WindowReports handed to a stream (parts counted)
    uint64_t messages_acked = 0;   // acknowledged by the parent
    uint64_t windows_dropped = 0;  // windows lost: queue full or the parent refused the run
    uint64_t queued = 0;           // windows waiting now
  };

  // REQUIRES: !config.target.empty(); `channel` reaches it (OpenChannel with
  // the upstream's TLS and token, see UpstreamSecurity). The node id is
  // config.node_id, else $PERLD_NODE_ID, else the host name.
  UpstreamForwarder(config::UpstreamConfig config, std::shared_ptr<grpc::Channel> channel);
  ~UpstreamForwarder() override;  // Stop()
  UpstreamForwarder(const UpstreamForwarder&) = delete;
  UpstreamForwarder& operator=(const UpstreamForwarder&) = delete;

  void OnRunStarted(const runs::RunInfo& info) override;
  void OnWindow(const runs::RunInfo& info, const runs::WindowRecord& window) override;
  void OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord& total) override;

  // Sends everything queued, closes every stream, joins the worker. Idempotent.
  void Stop();
  Counters counters() const;
  const std::string& node_id() const { return node_id_; }

 private:
  struct Task {
    enum class Kind { kStart, kWindow, kEnd };
    Kind kind = Kind::kStart;
    runs::RunInfo info;         // kStart
    runs::WindowRecord window;  // kWindow
    runs::RunId run_id = 0;
  };
  void Work();
  void Start(const runs::RunInfo& info);
  void Send(runs::RunId id, const runs::WindowRecord& window);
  void End(runs::RunId id);

  const config::UpstreamConfig config_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::string node_id_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;                  // mu_
  std::atomic<int64_t> queued_windows_{0};  // kWindow tasks in tasks_ (changed under mu_)
  bool stopping_ = false;                   // mu_
  std::thread worker_;

  // The worker's streams; senders_mu_ guards the map for Counters().
  mutable std::mutex senders_mu_;
  std::map<runs::RunId, std::unique_ptr<client::IngestSender>> senders_;
  std::set<runs::RunId> refused_;  // worker: runs whose parent refused them (logged once)
  std::atomic<uint64_t> runs_{0};
  std::atomic<uint64_t> windows_sent_{0};
  std::atomic<uint64_t> closed_acked_{0};  // acked messages of closed streams
  std::atomic<uint64_t> windows_dropped_{0};
};

}  // namespace perld::server
