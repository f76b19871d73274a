// IngestSender with no daemon (a refused loopback port): a message it gives
// up on is never spooled, so the spool and the sequence numbers never
// disagree (issue 24: a spooled message given up on at Close stayed in the
// spool, and the next message reused its sequence number, which the spool
// refused); TryEnqueue never waits (issue 25).
#include "client/lib/ingest_sender.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "client/lib/spool.h"

namespace perld::client {
namespace {

v1::IngestRequest Batch(uint64_t sequence) {
  v1::IngestRequest r;
  v1::TimestampBatch* b = r.mutable_batch();
  b->set_sequence(sequence);
  b->set_count(1);
  b->add_latency_delta(42);
  return r;
}

v1::IngestOpen RawOpen() {
  v1::IngestOpen open;
  open.set_run_name("r");
  open.set_client_id("c");
  open.set_mode(v1::IngestOpen::MODE_RAW);
  return open;
}

// A synced spool in a fresh directory, removed at the end of the test.
class ScratchSpool {
 public:
  ScratchSpool() {
    char pattern[] = "/tmp/ingest_sender_test.XXXXXX";
    EXPECT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    Spool::Options o;
    o.dir = dir_ + "/spool";
    o.mode = SpoolMode::kSynced;
    absl::StatusOr<std::unique_ptr<Spool>> spool = Spool::Open(o);
    EXPECT_TRUE(spool.ok()) << spool.status();
    if (spool.ok()) spool_ = *std::move(spool);
    raw_ = spool_.get();
  }
  ~ScratchSpool() { std::filesystem::remove_all(dir_); }
  std::unique_ptr<Spool> Take() { return std::move(spool_); }
  const Spool& spool() const { return *raw_; }

 private:
  std::string dir_;
  std::unique_ptr<Spool> spool_;
  Spool* raw_ = nullptr;
};

TEST(IngestSenderTest, AMessageGivenUpOnIsNeverSpooled) {
  ScratchSpool scratch;
  const Spool* raw = &scratch.spool();
  // Port 1 refuses: nothing is ever acknowledged. With a spool only memory
  // (max_undurable_bytes) and the spool bound it: one message fills 1 byte.
  IngestSender sender(grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()),
                      RawOpen(), /*max_unacked=*/1, /*max_undurable_bytes=*/1, scratch.Take());
  ASSERT_TRUE(sender.Enqueue(Batch(1)));
  EXPECT_EQ(raw->last_key(), 1u);
  sender.GiveUpAt(std::chrono::steady_clock::now());
  EXPECT_FALSE(sender.Enqueue(Batch(2)));  // no room: given up on
  EXPECT_EQ(sender.next_sequence(), 2u);
  EXPECT_EQ(raw->last_key(), 1u) << "a message given up on was spooled";
  Counters c;
  sender.FillCounters(&c);
  EXPECT_EQ(c.unsent_records, 1);
}

// With a spool, recording goes on while the daemon is away: the in-flight
// bound (max_unacked) does not hold messages back, the spool keeps them.
TEST(IngestSenderTest, WithASpoolMessagesAreNotHeldBackByTheInFlightBound) {
  ScratchSpool scratch;
  const Spool* raw = &scratch.spool();
  IngestSender sender(grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()),
                      RawOpen(), /*max_unacked=*/2, /*max_undurable_bytes=*/1 << 20,
                      scratch.Take());
  sender.GiveUpAt(std::chrono::steady_clock::now());  // no room would return false at once
  for (uint64_t s = 1; s <= 10; ++s) ASSERT_TRUE(sender.Enqueue(Batch(s))) << s;
  EXPECT_EQ(raw->last_key(), 10u);
  Counters c;
  sender.FillCounters(&c);
  EXPECT_EQ(c.unsent_records, 0);
}

// TryEnqueue (the tier forwarder's) never waits: with no room it answers
// kFull and leaves the message as it was; nothing is counted as unsent.
TEST(IngestSenderTest, TryEnqueueNeverWaits) {
  IngestSender sender(grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()),
                      RawOpen(), /*max_unacked=*/2, /*max_undurable_bytes=*/1 << 20);
  for (uint64_t s = 1; s <= 2; ++s) {
    v1::IngestRequest m = Batch(s);
    EXPECT_TRUE(sender.HasRoom());
    EXPECT_EQ(sender.TryEnqueue(&m), IngestSender::Offer::kQueued);
  }
  EXPECT_FALSE(sender.HasRoom());
  v1::IngestRequest third = Batch(3);
  EXPECT_EQ(sender.TryEnqueue(&third), IngestSender::Offer::kFull);  // returns: no deadline set
  EXPECT_EQ(third.batch().sequence(), 3u) << "a message that found no room is left as it was";
  EXPECT_EQ(sender.next_sequence(), 3u);
  Counters c;
  sender.FillCounters(&c);
  EXPECT_EQ(c.unsent_records, 0);
  EXPECT_FALSE(sender.closed());
}

}  // namespace
}  // namespace perld::client
