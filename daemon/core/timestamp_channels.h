// TimeStampChannels: the hand-off topology from N producers (workers) to the
// one recorder thread, and TimeStampProducer: one worker's publishing end.
//
// Topology (the seed's CQueuePerl):
//   * max_qs == 0: every worker has its own channel of q_per_worker queues.
//   * max_qs  > 0: all workers share max_qs queues (max_qs == 1: one shared
//     MPSC queue, the research topology).
//   A producer rotates its sends across the queues it may use.
// Queue kind: QueueKind::kMpsc is the intrusive TimeStampMpscQueue with node
//   recycling (zero allocation per record at steady state); QueueKind::kLibrary
//   is moodycamel::ConcurrentQueue, the general library baseline
//   (`--mpscqueue false`), used the way its documentation recommends
//   (a producer token per queue, bulk dequeue).
// Pending bound: each producer may have at most max_pending_per_worker
//   timestamps sent but not yet consumed by the recorder. Memory for pending
//   timestamps is therefore <= workers * max_pending_per_worker * 48 B
//   (intrusive nodes; library elements are 40 B plus its block overhead). When
//   the bound is hit the producer applies `overflow`: kBlock waits (elastic
//   wait) and counts a blocked send; kDrop discards the timestamp and counts a
//   drop. Both counts are reported; nothing is lost silently.
//
// Hand-off delay (batch path): a producer publishes a batch node when it is
//   full (32 timestamps) or on Flush() (a paced worker flushes before it
//   waits); a kAll Drain also reads the published prefix of every producer's
//   open batch (entries are released one by one), after its earlier batches,
//   so the producer's order holds. RecorderThread makes a kAll pass on every
//   idle pass, when stopping, and while busy at least every
//   RecorderThread::kTakeAllEveryNs (20 us). So a completed timestamp waits in
//   a partial batch at most ~20 us beyond the recorder's own polling period
//   (which every path shares), whatever its producer's rate.
//
// Threads: producer(i) is confined to one worker thread at a time. Drain() and
// everything else belong to the recorder thread. Construct and destroy while
// no thread uses the channels.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/contract.h"
#include "daemon/core/time_stamp.h"
#include "daemon/core/timestamp_mpsc_queue.h"
#include "daemon/core/timestamp_node_pool.h"
#include "daemon/core/timestamp_sink.h"

namespace moodycamel {
struct ConcurrentQueueDefaultTraits;
template <typename T, typename Traits>
class ConcurrentQueue;
struct ProducerToken;
}  // namespace moodycamel

namespace perld {

enum class QueueKind { kMpsc, kLibrary };
enum class OverflowPolicy { kBlock, kDrop };

struct ChannelOptions {
  QueueKind queue = QueueKind::kMpsc;
  int max_qs = 0;         // 0: per-worker queues; N > 0: N queues shared by all workers
  int q_per_worker = 10;  // queues per worker channel when max_qs == 0 (SBK default)
  size_t max_pending_per_worker = 1 << 16;
  OverflowPolicy overflow = OverflowPolicy::kBlock;
  int64_t producer_idle_ns = 1'000;  // first park of a blocked producer
  // QueueKind::kMpsc only. true (default): batch nodes (TimeStampBatchNode,
  // up to 32 timestamps per exchange); false: the seed's per-record intrusive
  // queue, kept as a measured variant (`perld bench --mpscVariant record`).
  bool mpsc_batched = true;
};

class TimeStampChannels;

class TimeStampProducer {
 public:
  enum class Path { kBatch, kRecord, kLibrary };

  // Hot path. Publishes one timestamp. Returns false only when the drop policy
  // discarded it (counted in dropped()). Never allocates at steady state.
  // REQUIRES: the producer is not paced.
  bool Send(int64_t start, int64_t end, int32_t records, int32_t bytes) {
    PERLD_CONTRACT(!paced_, "a paced producer sends with SendPaced");
    if (path_ == Path::kBatch) [[likely]]
      return SendBatch<false>(0, start, end, records, bytes);
    return path_ == Path::kRecord ? SendMpsc<false>(0, start, end, records, bytes)
                                  : SendLibrary(0, start, end, records, bytes);
  }
  // Send for a rate-controlled producer: `intended` is the operation's slot
  // on the schedule (the start it should have had), in the run's unit. The
  // recorder sees it beside the timestamp (TimeStampSink::AcceptPaced).
  // REQUIRES: set_paced() before the producer's first send.
  bool SendPaced(int64_t intended, int64_t start, int64_t end, int32_t records, int32_t bytes) {
    PERLD_CONTRACT(paced_, "SendPaced on a producer that is not paced");
    if (path_ == Path::kBatch) [[likely]]
      return SendBatch<true>(intended, start, end, records, bytes);
    return path_ == Path::kRecord ? SendMpsc<true>(intended, start, end, records, bytes)
                                  : SendLibrary(intended, start, end, records, bytes);
  }
  // Marks the producer paced (its timestamps carry intended starts).
  // Producer thread, before its first send.
  void set_paced() { paced_ = true; }
  bool paced() const { return paced_; }

  // Publishes the producer's partial batch now (batch path; a no-op
  // otherwise). Optional: the recorder also collects partial batches on its
  // own (see "Hand-off delay" in timestamp_channels.h's class comment).
  void Flush() {
    if (open_node_ != nullptr && open_count_ > 0) PublishOpen();
  }

  // Timestamps per batch node on the batch path (1..32, from the pending
  // bound), and batch nodes the pool may hold.
  uint32_t batch_capacity() const { return batch_cap_; }

  // Timestamps accepted by Send (producer thread; others after joining it).
  uint64_t sent() const { return sent_; }
  // Counters any thread may read at any time.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  uint64_t blocked() const { return blocked_.load(std::memory_order_relaxed); }

  ~TimeStampProducer();
  TimeStampProducer(const TimeStampProducer&) = delete;
  TimeStampProducer& operator=(const TimeStampProducer&) = delete;

 private:
  friend class TimeStampChannels;
  struct LibraryItem;
  using LibraryQueue =
      moodycamel::ConcurrentQueue<LibraryItem, moodycamel::ConcurrentQueueDefaultTraits>;

  TimeStampProducer(const ChannelOptions& options, std::vector<TimeStampMpscQueue*> mpsc,
                    std::vector<TimeStampBatchQueue*> batch, std::vector<LibraryQueue*> library);

  template <bool kPaced>
  bool SendBatch(int64_t intended, int64_t start, int64_t end, int32_t records, int32_t bytes) {
    if (open_node_ == nullptr && !OpenBatch()) return false;  // counted drop
    TimeStampBatchNode* node = open_node_;
    node->ts[open_count_] = TimeStamp{start, end, records, bytes};
    if constexpr (kPaced) node->intended[open_count_] = intended;
    // release: the entry is visible to a recorder that reads the prefix.
    node->count.store(++open_count_, std::memory_order_release);
    if (open_count_ == batch_cap_) PublishOpen();
    ++sent_;
    return true;
  }
  bool OpenBatch();
  void PublishOpen();
  // Recorder thread: delivers the unread prefix of this producer's open batch
  // when every earlier batch of the producer was delivered. Returns the count.
  size_t DrainOpen(TimeStampSink& sink);
  // Recorder thread: delivers a batch node polled from a queue and recycles it.
  static size_t DeliverAndRecycle(TimeStampBatchNode* node, TimeStampSink& sink);
  // Hands node->ts[taken, taken + n) to the sink (AcceptPaced for a paced node).
  static void Deliver(const TimeStampBatchNode* node, size_t n, TimeStampSink& sink);

  // A producer's pool nodes are its own and it is paced for life, so only a
  // paced producer writes the node's intended start and flag.
  template <bool kPaced>
  bool SendMpsc(int64_t intended, int64_t start, int64_t end, int32_t records, int32_t bytes) {
    TimeStampNode* node = pool_.Acquire();
    if (node == nullptr && (node = AcquireSlow()) == nullptr) return false;  // counted drop
    node->ts = TimeStamp{start, end, records, bytes};
    if constexpr (kPaced) {
      node->intended = intended;
      node->paced = true;
    }
    mpsc_[next_queue_]->Add(node);
    if (++next_queue_ == queue_count_) next_queue_ = 0;
    ++sent_;
    return true;
  }
  bool SendLibrary(int64_t intended, int64_t start, int64_t end, int32_t records, int32_t bytes);
  // At the pending bound: counts a drop and returns false (kDrop), or counts a
  // blocked send and waits until try_take() succeeds (kBlock).
  template <class TryTake>
  bool ApplyOverflowPolicy(TryTake&& try_take);
  TimeStampNode* AcquireSlow();
  bool WaitForCredit();
  // Recorder thread: one consumed library item came from this producer.
  void Ack() {
    if (++pending_acks_ >= kAckBatch) FlushAcks();
  }
  void FlushAcks();

  static constexpr uint64_t kAckBatch = 64;

  const Path path_;
  bool paced_ = false;  // set_paced
  const uint32_t batch_cap_;
  const OverflowPolicy overflow_;
  const uint64_t max_pending_;
  const int64_t idle_ns_;
  uint32_t next_queue_ = 0;
  const uint32_t queue_count_;
  std::vector<TimeStampMpscQueue*> mpsc_;
  std::vector<TimeStampBatchQueue*> batch_;
  std::vector<LibraryQueue*> library_;
  std::vector<std::unique_ptr<moodycamel::ProducerToken>> tokens_;
  TimeStampNodePool pool_;
  TimeStampBatchPool batch_pool_;
  TimeStampBatchNode* open_node_ = nullptr;  // producer-private: the batch being filled
  uint32_t open_count_ = 0;                  // entries in open_node_
  uint64_t seq_ = 0;                         // batches published so far
  uint64_t sent_ = 0;
  uint64_t acked_seen_ = 0;  // producer's cached copy of acked_
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> blocked_{0};
  alignas(64) std::atomic<uint64_t> acked_{0};  // written by the recorder
  uint64_t pending_acks_ = 0;                   // recorder-owned
  uint64_t retired_ = 0;  // recorder-owned: batch nodes of this producer delivered
  // The open batch as the recorder may see it: set (release) when a node is
  // opened, cleared before it is published to a queue. Written once per batch.
  alignas(64) std::atomic<TimeStampBatchNode*> open_{nullptr};
};

class TimeStampChannels {
 public:
  // Maximum timestamps handed to the sink per Accept call.
  static constexpr size_t kBatch = 256;
  // Maximum timestamps taken from one queue per pass (fairness across queues).
  static constexpr size_t kMaxPerQueuePass = 4096;

  // Validates options (clear error naming the bad one) and builds the topology.
  static absl::StatusOr<std::unique_ptr<TimeStampChannels>> Create(const ChannelOptions& options,
                                                                   int workers);
  ~TimeStampChannels();

  TimeStampProducer& producer(int worker) { return *producers_[worker]; }
  int workers() const { return static_cast<int>(producers_.size()); }
  // The recorder drains the queues and producers of workers [0, n) only (all
  // by default). A source that hands out workers in index order and may not
  // use them all (a remote run sizes its channels for the most raw clients
  // it accepts) lowers the mark at creation and raises it with
  // ActivateWorker(w) before worker w's first Send, so idle slots cost the
  // recorder nothing. Shared topologies (maxQs > 0) always drain every queue.
  void SetActiveWorkers(int n);
  void ActivateWorker(int worker);
  int active_workers() const { return active_workers_.load(std::memory_order_acquire); }
  int queue_count() const;
  const ChannelOptions& options() const { return options_; }

  // Recorder thread. Moves available timestamps (up to kMaxPerQueuePass per
  // queue) to `sink`, recycles nodes, and returns the number moved. With
  // PollMode::kLeaveLast the newest node of each MPSC queue may stay queued
  // (the busy path); PollMode::kAll takes everything (idle path, shutdown).
  size_t Drain(TimeStampSink& sink, PollMode mode = PollMode::kAll);

  // The startup lines naming the effective queue, topology and bound, e.g.
  // "PerL Timestamp Queue: TimeStampMpscQueue (MPSC)".
  std::vector<std::string> Describe() const;

  // Sums over producers (any thread; exact once producers are joined).
  uint64_t dropped() const;
  uint64_t blocked() const;

 private:
  TimeStampChannels(const ChannelOptions& options, int workers);
  size_t DrainMpsc(TimeStampSink& sink, PollMode mode);
  size_t DrainBatch(TimeStampSink& sink, PollMode mode);
  size_t DrainLibrary(TimeStampSink& sink);
  // Hands batch_[0, n) to the sink (with intended_ when `paced`); returns n.
  size_t Deliver(TimeStampSink& sink, size_t n, bool paced);

  const ChannelOptions options_;
  std::vector<std::unique_ptr<TimeStampMpscQueue>> mpsc_;
  std::vector<std::unique_ptr<TimeStampBatchQueue>> batch_queues_;
  std::vector<std::unique_ptr<TimeStampProducer::LibraryQueue>> library_;
  std::vector<std::unique_ptr<TimeStampProducer>> producers_;
  std::atomic<int> active_workers_;
  TimeStamp batch_[kBatch];
  // batch_'s intended starts (record and library paths), written only once
  // a paced entry joined the batch (MarkPaced fills the ones before it).
  int64_t intended_[kBatch];
  // Record and library paths, entry n of batch_ came from a paced producer
  // with intended start `intended`: intended_[0, n] are valid from here on.
  void MarkPaced(size_t n, int64_t intended, bool* paced) {
    if (!*paced) {
      for (size_t k = 0; k < n; ++k) intended_[k] = batch_[k].start;
      *paced = true;
    }
    intended_[n] = intended;
  }
};

}  // namespace perld
