// RemoteWindowInbox: exact windows received from remote clients (ingest in
// windows mode), on their way to the run's recorder.
//
// A stream handler validates a client's WindowReport, turns it into a
// RemoteWindow (counters + ascending latency/count buckets) and pushes it; the
// recorder thread takes every queued window on its drain pass and merges it
// into the run's periodic window (PeriodicAndTotalWindows::MergeWindow), so
// the windows keep their single owner. A window is attributed to the interval
// in which the recorder merges it (the daemon's clock); it is counted late
// when the client's own window ended before that interval began.
//
// Memory: each window's bytes are charged to its client's `charge` counter at
// Push and released once merged, so the ingest domain can hold a client to
// its per-client memory limit while the recorder catches up; a client over
// it waits for room without a thread (its message is parked), and the
// recorder wakes the waiters through the window's RoomSignal after the
// release -- one load when nobody waits.
//
// Buffers: a raw batch's timestamp vector (about 100 KB for 4,096
// timestamps) is handed back to the inbox once merged and reused by the next
// decode (TakeTimestampBuffer), so a message costs no allocation on the
// stream thread and no free on the recorder thread (freeing on another
// thread than the allocating one cost raw ingest 16% of daemon CPU per
// timestamp, tests/bench/INGEST.md). At most kPooledBuffers wait.
//
// Threads: Push from any thread (lock-free: one CAS on an intrusive stack);
// Drain from the recorder thread only, which takes the whole stack with one
// exchange and restores push order -- O(1) per window whatever the number
// of pushing threads (a general MPMC queue scans its per-thread sub-queues,
// which costs the recorder O(threads) per window with 1,000 client streams).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "daemon/common/mutex.h"
#include "daemon/core/latency_recorder.h"
#include "daemon/core/latency_window.h"
#include "daemon/core/time_stamp.h"
#include "daemon/runs/window_record.h"

namespace perld::runs {

// Wakes the ingest domain's waiters for queue room (ingest::RoomNotifier)
// when the recorder released a window's charge. The recorder releases a
// charge (seq_cst), then reads waiting() (seq_cst) and Pokes only when
// someone waits; a waiter registers (waiters_ + 1, seq_cst), then has its
// condition checked again: in that single total order a release is either
// seen by the check or sees the waiter.
class RoomSignal {
 public:
  virtual ~RoomSignal() = default;
  bool waiting() const { return waiters_.load(std::memory_order_seq_cst) > 0; }
  // The recorder thread: must not block (a flag and a semaphore release).
  virtual void Poke() = 0;

 protected:
  std::atomic<int64_t> waiters_{0};
};

struct RemoteWindow {
  LatencyCounters counters;
  std::vector<LatencyBucket> buckets;  // ascending, each count >= 1, sum == counters.valid
  // The bounds `counters` and `buckets` were checked against (CheckWindow):
  // a recorder with the same bounds merges them without a second check.
  CheckedBounds checked;
  // A raw client's batch: its timestamps, recorded one by one exactly as a
  // local writer's (RecordBatch); `counters` and `buckets` stay empty.
  std::vector<TimeStamp> timestamps;
  // A rate-controlled run's raw batch: each timestamp's intended start
  // (start - its start lag; the timestamps start at 0), recorded as a local
  // paced writer's (RunRecorder::AcceptPaced). Empty: closed loop.
  std::vector<int64_t> intended;
  // A rate-controlled run's windows: this window is the response view's
  // (WindowReport.response), merged there with its schedule; and the slots
  // a raw client dropped since its previous batch (schedule.skipped).
  bool response = false;
  WindowRecord::Schedule schedule;
  // Sent by a rate-controlled client, whose response windows follow its
  // service windows. Else (closed-loop clients, SBP) a rate-controlled
  // run's response view takes the service window as it is: an operation
  // without a slot waits from its actual start.
  bool paced_client = false;
  std::shared_ptr<std::atomic<int64_t>> charge;        // the client's queued bytes; may be null
  std::shared_ptr<std::atomic<int64_t>> total_charge;  // every client's; may be null
  std::shared_ptr<RoomSignal> room;                    // poked after the release; may be null
  int32_t client = -1;        // the client's index in its run (>= 0), for per-window client counts
  int64_t start_unix_ms = 0;  // the client's own window start (wall clock); 0: unknown
  int64_t end_unix_ms = 0;    // the client's own window end (wall clock); 0: unknown, never late
  // The client's message sequence this window carries (0: none). The
  // recorder notes, per client, the last sequence merged into each periodic
  // window it closes (WindowRecord::applied): a consistent cut for
  // checkpoints, since a message is merged whole or not at all.
  uint64_t sequence = 0;
  // A raw client's timestamp batch aggregated by its stream handler: merged
  // like a window but not counted as a remote report.
  bool raw = false;

  int64_t bytes() const {
    return static_cast<int64_t>(sizeof(RemoteWindow) + buckets.capacity() * sizeof(LatencyBucket) +
                                timestamps.capacity() * sizeof(TimeStamp) +
                                intended.capacity() * sizeof(int64_t));
  }
};

class RemoteWindowInbox {
 public:
  static constexpr size_t kPooledBuffers = 4;

  // Any thread. Charges the window's bytes to window.charge and total_charge.
  void Push(RemoteWindow window);
  // Any thread: an empty timestamp vector, with the capacity of a merged raw
  // batch's when one was handed back (else none).
  std::vector<TimeStamp> TakeTimestampBuffer();
  // Recorder thread. Hands every queued window to `merge` in push order per
  // pushing thread, releases its charge, and returns how many were taken.
  template <typename Merge>
  size_t Drain(Merge&& merge) {
    if (head_.load(std::memory_order_relaxed) == nullptr) return 0;
    Node* node = Reversed(head_.exchange(nullptr, std::memory_order_acquire));
    size_t n = 0;
    while (node != nullptr) {
      std::unique_ptr<Node> done(node);
      node = node->next;
      RemoteWindow& w = done->window;
      merge(w);
      // seq_cst: ordered before room->waiting() (see RoomSignal).
      if (w.charge) w.charge->fetch_sub(w.bytes(), std::memory_order_seq_cst);
      if (w.total_charge) w.total_charge->fetch_sub(w.bytes(), std::memory_order_seq_cst);
      if (w.room && w.room->waiting()) w.room->Poke();
      if (w.raw) Recycle(std::move(w.timestamps));
      queued_.fetch_sub(1, std::memory_order_relaxed);
      ++n;
    }
    return n;
  }
  ~RemoteWindowInbox();
  // Windows queued and not yet merged (any thread; exact when quiescent).
  int64_t queued() const { return queued_.load(std::memory_order_relaxed); }

 private:
  // The recorder thread: keeps a merged batch's buffer for the next decode.
  void Recycle(std::vector<TimeStamp> buffer);

  struct Node {
    RemoteWindow window;
    Node* next = nullptr;
  };
  // The list in the opposite order (push order, for a stack taken whole).
  static Node* Reversed(Node* node);

  std::atomic<Node*> head_{nullptr};  // the newest pushed window
  std::atomic<int64_t> queued_{0};
  Mutex buffers_mu_;
  std::vector<std::vector<TimeStamp>> buffers_ ABSL_GUARDED_BY(buffers_mu_);
};

}  // namespace perld::runs
