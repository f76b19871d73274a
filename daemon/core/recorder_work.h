// RecorderWork: what the single recorder thread drives.
//
// The recorder thread (RecorderThread) owns the loop policy -- when to drain,
// whether to leave each queue's newest node in place, how to idle -- and a
// RecorderWork owns the data: the timestamp channels it drains and the latency
// windows it feeds. `perld bench` drives one run's channels (ChannelsWork);
// the daemon drives every run at once (runs/recorder_host.h), attaching and
// detaching runs while the thread runs.
//
// Threads: every call happens on the recorder thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "daemon/core/timestamp_channels.h"
#include "daemon/core/timestamp_mpsc_queue.h"
#include "daemon/core/timestamp_sink.h"

namespace perld {

class RecorderWork {
 public:
  virtual ~RecorderWork() = default;
  // Moves available timestamps into the windows and returns how many moved.
  // PollMode::kAll must take everything that is queued: a kAll pass that
  // returns 0 after every producer stopped means nothing is left.
  virtual size_t Drain(PollMode mode) = 0;
  // Called after drain passes with the monotonic time (ns), at least every
  // RecorderOptions::tick_ns while the recorder runs: closes due windows.
  virtual void Tick(int64_t now_ns) = 0;
};

// One TimeStampChannels drained into one TimeStampSink.
class ChannelsWork final : public RecorderWork {
 public:
  ChannelsWork(TimeStampChannels& channels, TimeStampSink& sink)
      : channels_(channels), sink_(sink) {}
  size_t Drain(PollMode mode) override { return channels_.Drain(sink_, mode); }
  void Tick(int64_t now_ns) override { sink_.Tick(now_ns); }

 private:
  TimeStampChannels& channels_;
  TimeStampSink& sink_;
};

}  // namespace perld
