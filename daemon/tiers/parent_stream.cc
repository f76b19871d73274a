#include "daemon/tiers/parent_stream.h"

#include <chrono>
#include <utility>

#include "client/lib/ingest_sender.h"
#include "client/lib/secure_channel.h"

namespace perld::tiers {
namespace {

class GrpcParentStream final : public ParentStream {
 public:
  GrpcParentStream(std::shared_ptr<grpc::Channel> channel, v1::IngestOpen open,
                   uint64_t first_sequence, uint64_t held_through, std::function<void()> wake)
      : sender_(std::move(channel), std::move(open), kMaxUnackedPerStream,
                kMaxUndurableBytesPerStream, nullptr, first_sequence, std::move(wake),
                held_through) {}

  uint64_t next_sequence() const override { return sender_.next_sequence(); }
  bool HasRoom() const override { return sender_.HasRoom(); }
  Offer TryEnqueue(v1::IngestRequest* message) override {
    switch (sender_.TryEnqueue(message)) {
      case client::IngestSender::Offer::kQueued:
        return Offer::kQueued;
      case client::IngestSender::Offer::kFull:
        return Offer::kFull;
      case client::IngestSender::Offer::kFailed:
        break;
    }
    return Offer::kFailed;
  }
  // Close with no wait only asks (the sender's thread sends the close once
  // every message went out); closed() tells when the parent acknowledged.
  void RequestClose() override { sender_.Close(std::chrono::milliseconds(0)); }
  Progress progress() const override {
    Counters c;
    sender_.FillCounters(&c);
    Progress p;
    p.acked = c.acked_sequence;
    p.durable = c.durable_sequence;
    p.closed = sender_.closed();
    p.error = sender_.FinalError();
    p.last_error = std::move(c.last_stream_error);
    return p;
  }

 private:
  client::IngestSender sender_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenParentChannel(
    const config::UpstreamConfig& upstream) {
  client::ChannelSecurity security;
  security.tls = upstream.tls;
  security.ca_file = upstream.ca_file;
  security.cert_file = upstream.cert_file;
  security.key_file = upstream.key_file;
  security.token_file = upstream.token_file;
  return client::OpenChannel(upstream.target, security);
}

ParentStreamFactory GrpcParentStreams(std::shared_ptr<grpc::Channel> channel) {
  return [channel = std::move(channel)](v1::IngestOpen open, uint64_t first_sequence,
                                        uint64_t held_through, std::function<void()> wake) {
    return std::make_unique<GrpcParentStream>(channel, std::move(open), first_sequence,
                                              held_through, std::move(wake));
  };
}

}  // namespace perld::tiers
