// IngestSender: the client's one perld.v1.Ingest stream, owned by a
// background thread (see the protocol in proto/perld/v1/ingest.proto).
//
// The local recorder thread Enqueue()s messages with consecutive sequence
// numbers into a bounded outbox; the sender thread opens the stream, learns
// the sequence the daemon has applied, (re)sends the rest in order and keeps
// sending as messages arrive; a reader thread per connection takes the acks.
// A message leaves the outbox (and the spool) only once the daemon reports
// it durable (IngestAck.durable_sequence: a committed checkpoint holds it),
// so a daemon that crashes and resumes from its checkpoint gets every later
// message again. Bounds: at most max_unacked messages beyond the applied
// sequence in flight, and at most max_undurable_bytes in the outbox; at
// either Enqueue waits (counted). A broken stream reconnects with
// backoff (50 ms doubling to 2 s) and resends after the acknowledged
// sequence. Final daemon errors stop the sender and are reported.
//
// With a Spool (durable mode), every message is appended to it before it
// is queued (Enqueue waits while the spool is full: counted), released as
// acknowledgements arrive, and the spool's records are the first messages
// of a new sender: a restarted client replays what the daemon had not
// acknowledged, with the same sequence numbers (the daemon drops the ones
// it has). A clean Close empties the spool.
//
// Without waiting (the tier forwarder, daemon/tiers/): TryEnqueue queues a
// message only when there is room and never blocks; `on_progress` is called
// whenever room may have freed or the stream's state changed (an ack, a
// (re)open, the close acknowledged, a final error), so the producer waits on
// its own condition instead of polling.
//
// Threads: Enqueue/TryEnqueue from one producer thread (the client's
// recorder thread, or the forwarder's worker); WaitAcked/Close/counters from
// any thread. `on_progress` runs on the sender's own threads with none of
// its locks held; it must not destroy the sender, and the sender's
// destructor waits for a call in progress to return.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "client/lib/spool.h"
#include "daemon/common/mutex.h"
#include "perld/client.h"
#include "perld/v1/ingest.grpc.pb.h"

namespace perld::client {

class IngestSender {
 public:
  // `channel`: see OpenChannel (secure_channel.h). `first_sequence`: the
  // first message's sequence when there is no spool (a stream continued by
  // a restarted forwarder: earlier ones are with the daemon already).
  // `on_progress` (may be empty): see the threads note above.
  // `held_through`: messages up to this sequence exist at the producer
  // though they are handed over later (a restarted forwarder reads them
  // back from its state database in turn): a daemon that has applied up to
  // there -- a previous process sent them -- is not an error, and those
  // messages are not sent again.
  IngestSender(std::shared_ptr<grpc::Channel> channel, v1::IngestOpen open, int64_t max_unacked,
               int64_t max_undurable_bytes, std::unique_ptr<Spool> spool = nullptr,
               uint64_t first_sequence = 1, std::function<void()> on_progress = {},
               uint64_t held_through = 0);
  ~IngestSender();  // stops (cancels the stream)
  IngestSender(const IngestSender&) = delete;
  IngestSender& operator=(const IngestSender&) = delete;

  // The next message's sequence number.
  uint64_t next_sequence() const { return made_.load(std::memory_order_relaxed) + 1; }
  // Queues `message` (its sequence must be next_sequence()). Waits while
  // max_unacked messages are outstanding. False after a final error (the
  // message is not sent; Flush/Close report the error).
  bool Enqueue(v1::IngestRequest message);
  // Enqueue without waiting, for a sender without a spool (REQUIRES: no
  // spool): kQueued; kFull when max_unacked messages are outstanding or the
  // outbox holds max_undurable_bytes (`*message` is left as it was; room
  // comes with an ack, announced by on_progress); kFailed after a final
  // error or once stopping (not queued, not counted: the caller decides).
  enum class Offer { kQueued, kFull, kFailed };
  Offer TryEnqueue(v1::IngestRequest* message);
  // Whether TryEnqueue would find room now (only the producer adds messages,
  // so for it a true stays true until it enqueues).
  bool HasRoom() const {
    MutexLock lock(mu_);
    return RoomLocked();
  }
  // The daemon acknowledged the close and every message (Close would
  // return acked).
  bool closed() const {
    MutexLock lock(mu_);
    return closed_;
  }
  // From now on Enqueue waits for room only until `deadline`, and Close no
  // longer than it; a message that finds no room is not queued and is
  // counted as unsent (Close reports it). Only ever moves earlier.
  void GiveUpAt(std::chrono::steady_clock::time_point deadline);
  // Waits until `sequence` is acknowledged, a final error, or the timeout.
  FlushResult WaitAcked(uint64_t sequence, std::chrono::milliseconds timeout);
  // After the last Enqueue: sends IngestClose and waits for its ack and the
  // stream's OK, a final error, or the timeout (then it stops sending).
  FlushResult Close(std::chrono::milliseconds timeout);

  // A final error stopped the sender (Flush/Close report it).
  bool failed() const {
    MutexLock lock(mu_);
    return !error_.empty();
  }
  std::string FinalError() const {
    MutexLock lock(mu_);
    return error_;
  }
  // The daemon's batch limit (from IngestOpened; 0 until known).
  int64_t max_batch_length() const { return max_batch_length_.load(std::memory_order_relaxed); }
  // The daemon's ingest.maxPairsPerReport (0 until opened).
  int64_t max_pairs_per_report() const {
    return max_pairs_per_report_.load(std::memory_order_relaxed);
  }
  void FillCounters(Counters* out) const;

 private:
  using Message = std::shared_ptr<const v1::IngestRequest>;
  static int64_t RecordsOf(const v1::IngestRequest& message);
  void Run();
  // One connection: returns when it broke, closed, or stopped; `opened` when
  // the daemon accepted the open, `closed` when it acknowledged the close.
  grpc::Status Connect(bool* opened, bool* closed);
  FlushResult ResultLocked(uint64_t sequence) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why the daemon's IngestOpened contradicts what this client knows (a
  // final error), or "": another run, messages the client never made, or
  // fewer than it was told are durable.
  std::string CheckOpenedLocked(const v1::IngestOpened& o) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseDurableLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool RoomLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Progressed() const {  // none of mu_ held
    if (on_progress_) on_progress_();
  }
  // Appends to the spool, waiting while it is full; false: not appended
  // (a final spool error, stopped, or past GiveUpAt).
  bool SpoolAppend(uint64_t seq, const v1::IngestRequest& message);

  v1::IngestRequest open_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ingest::Stub> stub_;
  const int64_t max_unacked_;
  const int64_t max_undurable_bytes_;
  const std::unique_ptr<Spool> spool_;  // null: memory only
  const std::function<void()> on_progress_;
  const uint64_t held_through_;

  std::atomic<uint64_t> made_{0};
  std::atomic<int64_t> max_batch_length_{0};
  std::atomic<int64_t> max_pairs_per_report_{0};

  mutable Mutex mu_;
  CondVar cv_;
  std::deque<std::pair<uint64_t, Message>> outbox_
      ABSL_GUARDED_BY(mu_);  // not yet durable, ascending
  int64_t outbox_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t acked_records_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t unsent_records_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_stream_error_ ABSL_GUARDED_BY(mu_);
  uint64_t acked_ ABSL_GUARDED_BY(mu_) =
      0;  // applied by the daemon (may go back after a daemon crash)
  uint64_t durable_ ABSL_GUARDED_BY(mu_) = 0;  // held by a daemon checkpoint
  uint64_t counted_ ABSL_GUARDED_BY(mu_) = 0;  // messages whose records acked_records_ counts
  uint64_t duplicates_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reconnects_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t full_waits_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t unsent_ ABSL_GUARDED_BY(mu_) = 0;  // messages Enqueue gave up on (GiveUpAt)
  uint64_t spool_replayed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t spool_full_waits_ ABSL_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point give_up_at_ ABSL_GUARDED_BY(mu_) =
      std::chrono::steady_clock::time_point::max();
  uint64_t run_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool opened_ ABSL_GUARDED_BY(mu_) = false;
  bool run_created_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t run_response_ ABSL_GUARDED_BY(mu_) = 0;  // the run's response view (0: closed loop)
  bool close_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) =
      false;  // the daemon acknowledged the close and ended the stream OK
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::string error_ ABSL_GUARDED_BY(mu_);  // a final error
  grpc::ClientContext* live_ ABSL_GUARDED_BY(mu_) =
      nullptr;  // the open stream's context (to cancel)
  std::thread thread_;
};

}  // namespace perld::client
