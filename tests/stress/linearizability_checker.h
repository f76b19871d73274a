// Linearizability checking of concurrent FIFO-queue histories (test support).
//
// A history is a list of completed operations, each with the thread that ran
// it, what it did (add(v), or poll returning v or empty), and the invocation
// and response instants read from one global clock (HistoryClock) immediately
// before and after the call. CheckFifoLinearizable decides whether some total
// order of the operations (a) respects real time: if a responded before b was
// invoked, a comes first, and (b) is a legal run of a sequential FIFO queue.
//
// Algorithm: Wing & Gong's search, as refined by Lowe: repeatedly pick an
// operation that is "minimal" (no other pending operation responded before it
// was invoked), apply it to the sequential model, backtrack when the model
// disagrees with the recorded result, and memoize every visited (set of
// linearized operations, model state) pair so each configuration is explored
// once. It is sound and complete: it accepts exactly the linearizable
// histories. Cost is exponential in the worst case; meant for histories of
// up to kMaxOps operations (a few dozen in practice).
//
// Threads: HistoryClock and ThreadLog are safe as documented per member; the
// checker itself is a pure function.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace perld::stress {

struct QueueOp {
  enum class Kind { kAdd, kPoll };
  int thread = 0;
  Kind kind = Kind::kAdd;
  // add: the value added. poll: the value returned (ignored when empty).
  int64_t value = 0;
  // poll only: true when the poll reported an empty queue.
  bool empty = false;
  // Clock readings taken immediately before the call and after it returned.
  // REQUIRES: invoke < response.
  uint64_t invoke = 0;
  uint64_t response = 0;

  static QueueOp Add(int thread, int64_t value, uint64_t invoke, uint64_t response) {
    return QueueOp{thread, Kind::kAdd, value, false, invoke, response};
  }
  static QueueOp Poll(int thread, int64_t value, uint64_t invoke, uint64_t response) {
    return QueueOp{thread, Kind::kPoll, value, false, invoke, response};
  }
  static QueueOp PollEmpty(int thread, uint64_t invoke, uint64_t response) {
    return QueueOp{thread, Kind::kPoll, 0, true, invoke, response};
  }
};

using History = std::vector<QueueOp>;

// The global clock of a recorded history: a sequentially consistent counter,
// so "a.response < b.invoke" means a returned before b was called. Any thread.
class HistoryClock {
 public:
  uint64_t Now() { return ticks_.fetch_add(1, std::memory_order_seq_cst) + 1; }

 private:
  std::atomic<uint64_t> ticks_{0};
};

// One thread's part of a history. Confined to that thread while recording; the
// owner of the history reads it after joining (or synchronizing with) it.
class ThreadLog {
 public:
  ThreadLog(int thread, HistoryClock* clock) : thread_(thread), clock_(clock) {}

  // Records add(value) around `add()`, which performs it.
  template <class AddFn>
  void RecordAdd(int64_t value, AddFn&& add) {
    const uint64_t invoke = clock_->Now();
    add();
    const uint64_t response = clock_->Now();
    ops_.push_back(QueueOp::Add(thread_, value, invoke, response));
  }

  // Records a poll around `poll(&value)`, which returns false for empty.
  // Returns what poll returned.
  template <class PollFn>
  bool RecordPoll(PollFn&& poll, int64_t* value) {
    const uint64_t invoke = clock_->Now();
    const bool got = poll(value);
    const uint64_t response = clock_->Now();
    ops_.push_back(got ? QueueOp::Poll(thread_, *value, invoke, response)
                       : QueueOp::PollEmpty(thread_, invoke, response));
    return got;
  }

  void Clear() { ops_.clear(); }
  void Reserve(size_t n) { ops_.reserve(n); }
  const std::vector<QueueOp>& ops() const { return ops_; }

 private:
  int thread_;
  HistoryClock* clock_;
  std::vector<QueueOp> ops_;
};

struct CheckResult {
  bool linearizable = false;
  // Why not (or why the history is malformed); empty when linearizable.
  std::string reason;
  // The longest legal linearized prefix found (indices into the history);
  // the full order when linearizable.
  std::vector<size_t> best_order;
  // (linearized set, model state) configurations explored.
  size_t configurations = 0;
};

// The largest history CheckFifoLinearizable accepts.
inline constexpr size_t kMaxOps = 64;

// Decides whether `history` is linearizable with respect to a sequential,
// unbounded FIFO queue that starts empty. Malformed histories (too long,
// invoke >= response) are reported as not linearizable with a reason.
CheckResult CheckFifoLinearizable(const History& history);

// Human-readable listing of a history, one operation per line, sorted by
// invocation, for failure messages.
std::string FormatHistory(const History& history);

// Merges thread logs into one history.
History MergeLogs(const std::vector<const ThreadLog*>& logs);

}  // namespace perld::stress
