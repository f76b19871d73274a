// SampleQueue: the bounded FIFO of samples between remote write's collector
// and its sender (remote_writer.h). A sample is one value of one series at
// one time; the series is shared (a collection interns each series' encoded
// labels once, and every queued sample of it points at them), so a queued
// sample costs 32 bytes however long its labels are.
//
// Bound: waiting plus in-flight samples never exceed the capacity. Push
// makes room by dropping the oldest waiting samples (then, when a batch in
// flight leaves no room, the oldest of the new ones) and returns how many
// it dropped: the newest data wins, and every drop is counted by the caller.
// One batch at a time is in flight: TakeBatch moves the oldest samples out,
// FinishBatch releases their room once they were sent or given up. The
// samples keep their order: a batch is older than everything still waiting.
//
// Threads: not thread-safe; its owner (RemoteWriter) guards it with a mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace perld::remote_write {

struct QueuedSample {
  // The series' encoded labels (remote_write_encoding.h: EncodeLabels),
  // shared by every sample of it.
  std::shared_ptr<const std::string> series;
  double value = 0;
  int64_t timestamp_ms = 0;  // Unix time, milliseconds
};

class SampleQueue {
 public:
  // REQUIRES: capacity >= 1.
  explicit SampleQueue(size_t capacity);

  // Appends `samples` in order; returns how many samples (old or new) were
  // dropped to stay within the capacity.
  size_t Push(std::vector<QueuedSample> samples);

  // Moves up to `max` of the oldest waiting samples into the batch in flight
  // and returns them. REQUIRES: no batch in flight; max >= 1.
  std::vector<QueuedSample> TakeBatch(size_t max);
  // The batch in flight is done (sent or given up): its room is free again.
  void FinishBatch() { in_flight_ = 0; }

  // Drops every waiting sample; returns how many.
  size_t Clear();

  size_t waiting() const { return waiting_.size(); }
  size_t in_flight() const { return in_flight_; }
  size_t size() const { return waiting_.size() + in_flight_; }
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  std::deque<QueuedSample> waiting_;
  size_t in_flight_ = 0;
};

}  // namespace perld::remote_write
