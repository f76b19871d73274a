// ParentStream: one local run's stream to the parent perld, as the
// UpstreamForwarder drives it -- without ever waiting for the parent.
//
// Messages are offered (TryEnqueue: queued, or no room now, or the stream
// failed for good) and the stream's progress is read (acked, durable,
// closed, final error) without blocking; the stream calls the `wake`
// function it was opened with whenever its progress may have changed, so
// the forwarder waits on its own condition variable, never polls, and one
// stream with no room never holds up another.
//
// The gRPC implementation (GrpcParentStreams) is client::IngestSender in
// windows mode: its own threads send, resend after a reconnect and read the
// acks; at most kMaxUnackedPerStream messages are unacknowledged and
// kMaxUndurableBytesPerStream bytes not yet durable at the parent. Tests
// substitute a fake (tests/unit/upstream_forwarder_test.cc).
//
// Threads: one owner thread calls every method (the forwarder's worker);
// progress() and HasRoom() also from others (counters, under the
// forwarder's lock). `wake` runs on the stream's own threads, with none of
// the stream's locks held; the destructor cancels the stream, never waits
// for the parent, and waits for a `wake` call in progress to return (so it
// must not be called while holding a lock `wake` takes).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/config/daemon_config.h"
#include "perld/v1/ingest.pb.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace perld::tiers {

class ParentStream {
 public:
  enum class Offer {
    kQueued,  // taken: the stream sends (and resends) it
    kFull,    // no room now: the message is left as it was; `wake` comes with room
    kFailed,  // a final error (progress().error): nothing more is sent
  };
  struct Progress {
    uint64_t acked = 0;      // highest sequence the parent applied
    uint64_t durable = 0;    // highest sequence the parent holds durably
    bool closed = false;     // the parent acknowledged the close and every message
    std::string error;       // a final error ("": none)
    std::string last_error;  // the last broken connection's status ("": none yet)
  };

  virtual ~ParentStream() = default;

  // The sequence the next offered message must carry.
  virtual uint64_t next_sequence() const = 0;
  // Whether TryEnqueue would take a message now (only the owner offers, so
  // for it a true stays true until it offers).
  virtual bool HasRoom() const = 0;
  virtual Offer TryEnqueue(v1::IngestRequest* message) = 0;
  // After the last message: asks the parent to close the stream (once every
  // message is acknowledged); progress().closed tells when it did.
  virtual void RequestClose() = 0;
  virtual Progress progress() const = 0;
};

// Opens a run's stream: `open` names the run, `first_sequence` is the first
// message's (a stream continued after a restart), `held_through` the last
// message that exists already (in the state database, offered in turn: the
// parent may have applied up to there, sent by a previous process), `wake`
// as above.
using ParentStreamFactory =
    std::function<std::unique_ptr<ParentStream>(v1::IngestOpen open, uint64_t first_sequence,
                                                uint64_t held_through, std::function<void()> wake)>;

// Unacknowledged messages one stream may hold (its room).
inline constexpr int64_t kMaxUnackedPerStream = 256;
// Bytes of messages one stream keeps until the parent reports them durable.
inline constexpr int64_t kMaxUndurableBytesPerStream = int64_t{256} << 20;

// The channel to the parent (upstream.target) with the upstream's TLS and
// token (upstream.{tls,caFile,certFile,keyFile,tokenFile}): client::OpenChannel,
// which reads and checks the files now (a key or token file that grants
// anything to others is refused).
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenParentChannel(
    const config::UpstreamConfig& upstream);

// Streams over `channel` (OpenParentChannel).
ParentStreamFactory GrpcParentStreams(std::shared_ptr<grpc::Channel> channel);

}  // namespace perld::tiers
