#include "daemon/remote_write/sample_queue.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "daemon/core/contract.h"

namespace perld::remote_write {

SampleQueue::SampleQueue(size_t capacity) : capacity_(capacity) {
  PERLD_CONTRACT(capacity >= 1, "SampleQueue capacity >= 1");
}

size_t SampleQueue::Push(std::vector<QueuedSample> samples) {
  size_t dropped = 0;
  // New samples beyond what the batch in flight leaves room for: the oldest
  // of them go first.
  const size_t room = capacity_ - in_flight_;
  size_t skip = 0;
  if (samples.size() > room) {
    skip = samples.size() - room;
    dropped += skip;
  }
  const size_t keep = samples.size() - skip;
  const size_t over = waiting_.size() + keep > room ? waiting_.size() + keep - room : 0;
  if (over > 0) {
    waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(over));
    dropped += over;
  }
  waiting_.insert(waiting_.end(),
                  std::make_move_iterator(samples.begin() + static_cast<std::ptrdiff_t>(skip)),
                  std::make_move_iterator(samples.end()));
  return dropped;
}

std::vector<QueuedSample> SampleQueue::TakeBatch(size_t max) {
  PERLD_CONTRACT(in_flight_ == 0 && max >= 1, "TakeBatch: one batch in flight, max >= 1");
  const size_t n = std::min(max, waiting_.size());
  std::vector<QueuedSample> batch(
      std::make_move_iterator(waiting_.begin()),
      std::make_move_iterator(waiting_.begin() + static_cast<std::ptrdiff_t>(n)));
  waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(n));
  in_flight_ = n;
  return batch;
}

size_t SampleQueue::Clear() {
  const size_t n = waiting_.size();
  waiting_.clear();
  return n;
}

}  // namespace perld::remote_write
