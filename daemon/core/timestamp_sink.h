// TimeStampSink: where the recorder thread delivers drained timestamps.
//
// Every call happens on the single recorder thread, so implementations (the
// latency windows) need no synchronization. Accept() gets timestamps in
// per-queue FIFO order in batches of up to TimeStampChannels::kBatch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "daemon/core/time_stamp.h"

namespace perld {

class TimeStampSink {
 public:
  virtual ~TimeStampSink() = default;
  // A batch of n >= 1 timestamps. The array is valid only during the call.
  virtual void Accept(const TimeStamp* batch, size_t n) = 0;
  // A batch from paced producers: intended[i] is batch[i]'s intended start
  // (== batch[i].start for an entry of a closed-loop producer mixed into
  // the batch). Sinks that keep no response view take it as Accept.
  virtual void AcceptPaced(const TimeStamp* batch, const int64_t* intended, size_t n) {
    static_cast<void>(intended);
    Accept(batch, n);
  }
  // Called after drain passes with the monotonic time (ns), at least every
  // RecorderOptions::tick_ns while the recorder runs: closes due windows.
  virtual void Tick(int64_t now_ns) = 0;
};

}  // namespace perld
