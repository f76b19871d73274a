// What perld's own tools (perlctl load) may use of a client beyond the public
// API: the core producer behind a Recorder, so PerlBench workers
// (daemon/bench/perlbench_worker.h) send through it directly. Not installed.
#pragma once

#include "daemon/core/timestamp_channels.h"
#include "perld/client.h"

namespace perld::client {

struct RecorderAccess {
  static void* producer(Recorder* recorder) { return recorder->producer_; }
};

// The producer a Recorder sends through (same thread rules as Record).
TimeStampProducer& ProducerOf(Recorder* recorder);

}  // namespace perld::client
