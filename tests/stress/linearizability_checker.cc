#include "tests/stress/linearizability_checker.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <sstream>
#include <unordered_set>

namespace perld::stress {
namespace {

// Depth-first Wing & Gong search with memoized (linearized set, queue) pairs.
class FifoSearch {
 public:
  explicit FifoSearch(const History& history)
      : history_(history),
        all_(history.size() == 64 ? ~uint64_t{0} : (uint64_t{1} << history.size()) - 1) {}

  bool Run() {
    Visit();  // the empty configuration
    return Extend();
  }

  const std::vector<size_t>& best() const { return best_; }
  const std::vector<size_t>& order() const { return order_; }
  size_t configurations() const { return seen_.size(); }

 private:
  // Tries every operation that may come next; true when one leads to a full
  // linearization.
  bool Extend() {
    if (done_ == all_) return true;
    // An operation may be linearized next iff it was invoked before every
    // other pending operation responded (else that one must come first).
    uint64_t min_response = std::numeric_limits<uint64_t>::max();
    for (size_t i = 0; i < history_.size(); ++i) {
      if (!(done_ >> i & 1)) min_response = std::min(min_response, history_[i].response);
    }
    for (size_t i = 0; i < history_.size(); ++i) {
      if (done_ >> i & 1) continue;
      const QueueOp& op = history_[i];
      if (op.invoke >= min_response) continue;
      if (!Apply(op)) continue;
      done_ |= uint64_t{1} << i;
      order_.push_back(i);
      if (order_.size() > best_.size()) best_ = order_;
      if (Visit() && Extend()) return true;
      order_.pop_back();
      done_ &= ~(uint64_t{1} << i);
      Undo(op);
    }
    return false;
  }

  // Applies `op` to the sequential model if its recorded result is what the
  // model returns; false (model unchanged) otherwise.
  bool Apply(const QueueOp& op) {
    if (op.kind == QueueOp::Kind::kAdd) {
      model_.push_back(op.value);
      return true;
    }
    if (op.empty) return model_.empty();
    if (model_.empty() || model_.front() != op.value) return false;
    model_.pop_front();
    return true;
  }

  void Undo(const QueueOp& op) {
    if (op.kind == QueueOp::Kind::kAdd) {
      model_.pop_back();
    } else if (!op.empty) {
      model_.push_front(op.value);
    }
  }

  // Records the current configuration; false if it was explored before.
  bool Visit() {
    std::string key(sizeof(done_) + model_.size() * sizeof(int64_t), '\0');
    std::memcpy(key.data(), &done_, sizeof(done_));
    size_t at = sizeof(done_);
    for (int64_t v : model_) {
      std::memcpy(key.data() + at, &v, sizeof(v));
      at += sizeof(v);
    }
    return seen_.insert(std::move(key)).second;
  }

  const History& history_;
  const uint64_t all_;
  uint64_t done_ = 0;
  std::deque<int64_t> model_;
  std::vector<size_t> order_;
  std::vector<size_t> best_;
  std::unordered_set<std::string> seen_;
};

std::string DescribeOp(const QueueOp& op) {
  std::ostringstream out;
  out << "t" << op.thread << " ";
  if (op.kind == QueueOp::Kind::kAdd) {
    out << "add(" << op.value << ")";
  } else if (op.empty) {
    out << "poll->empty";
  } else {
    out << "poll->" << op.value;
  }
  out << " [" << op.invoke << ", " << op.response << "]";
  return out.str();
}

// Cheap, order-independent reasons a history cannot be linearizable; used only
// to make failure messages precise (the search alone decides).
std::string ObviousViolation(const History& history) {
  std::map<int64_t, int> added;
  std::map<int64_t, int> polled;
  for (const QueueOp& op : history) {
    if (op.kind == QueueOp::Kind::kAdd) {
      ++added[op.value];
    } else if (!op.empty) {
      ++polled[op.value];
    }
  }
  for (const auto& [value, count] : polled) {
    const auto it = added.find(value);
    if (it == added.end()) return "value " + std::to_string(value) + " polled but never added";
    if (count > it->second) {
      return "value " + std::to_string(value) + " polled " + std::to_string(count) +
             " times but added " + std::to_string(it->second) + " time(s)";
    }
  }
  return "";
}

}  // namespace

CheckResult CheckFifoLinearizable(const History& history) {
  CheckResult result;
  if (history.size() > kMaxOps) {
    result.reason = "history has " + std::to_string(history.size()) + " operations; the limit is " +
                    std::to_string(kMaxOps);
    return result;
  }
  for (const QueueOp& op : history) {
    if (op.invoke >= op.response) {
      result.reason = "malformed operation (invoke >= response): " + DescribeOp(op);
      return result;
    }
  }
  FifoSearch search(history);
  result.linearizable = search.Run();
  result.configurations = search.configurations();
  if (result.linearizable) {
    result.best_order = search.order();
    return result;
  }
  result.best_order = search.best();
  std::ostringstream reason;
  const std::string obvious = ObviousViolation(history);
  reason << "not linearizable w.r.t. a FIFO queue";
  if (!obvious.empty()) reason << " (" << obvious << ")";
  reason << "; longest legal linearized prefix (" << result.best_order.size() << " of "
         << history.size() << " ops):";
  for (size_t i : result.best_order) reason << "\n    " << DescribeOp(history[i]);
  result.reason = reason.str();
  return result;
}

std::string FormatHistory(const History& history) {
  std::vector<size_t> idx(history.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(),
            [&](size_t a, size_t b) { return history[a].invoke < history[b].invoke; });
  std::ostringstream out;
  for (size_t i : idx) out << "  " << DescribeOp(history[i]) << "\n";
  return out.str();
}

History MergeLogs(const std::vector<const ThreadLog*>& logs) {
  History history;
  for (const ThreadLog* log : logs) {
    history.insert(history.end(), log->ops().begin(), log->ops().end());
  }
  return history;
}

}  // namespace perld::stress
