// What perld's own tools (perlctl load) may use of a client beyond the public
// API: the core producer behind a Recorder, so PerlBench workers
// (daemon/bench/perlbench_worker.h) send through it directly. Not installed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "daemon/core/timestamp_channels.h"
#include "perld/client.h"

namespace perld::client {

struct RecorderAccess {
  static void* producer(Recorder* recorder) { return recorder->producer_; }
  static Client::Impl* impl(Client* client) { return client->impl_.get(); }
};

// The producer a Recorder sends through (same thread rules as Record).
TimeStampProducer& ProducerOf(Recorder* recorder);

// A rate-controlled client's count of slots its workers dropped (`-catchup
// skip`: bench::WorkerPlan::skipped); sent with the next message. Any thread.
std::atomic<int64_t>& SkippedSlots(Client* client);

// `text` cut to at most `max_bytes` bytes (ending in "..." when cut; never
// inside a UTF-8 sequence): for descriptive fields the daemon bounds
// (limits.maxNameBytes, 256 by default), e.g. a clock's description.
std::string ShortenText(std::string text, size_t max_bytes);
// The longest clock description Open sends.
inline constexpr size_t kMaxClockBytes = 256;

}  // namespace perld::client
