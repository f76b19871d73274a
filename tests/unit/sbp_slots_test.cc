// SbpSlots (daemon/service/sbp_slots.h): SBK clients' registrations --
// sbp.maxConnections, owners, stream stages, and why slots are freed.
#include "daemon/service/sbp_slots.h"

#include <gtest/gtest.h>

namespace perld::service {
namespace {

using Freed = SbpSlots::Freed;
using Stage = SbpSlots::Stage;

absl::StatusOr<runs::RunId> InRun(int64_t) { return runs::RunId{7}; }

TEST(SbpSlotsTest, MaxSlotsThenEveryWayOfFreeingOne) {
  SbpSlots slots;
  const SbpSlots::Owner me = SbpSlots::OwnerOf("ipv4:127.0.0.1:1000", "");
  int64_t ids[4] = {};
  for (int64_t& id : ids) {
    absl::StatusOr<int64_t> got = slots.Register(4, me, InRun);
    ASSERT_TRUE(got.ok()) << got.status();
    id = *got;
  }
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[3], 4);
  EXPECT_EQ(slots.Register(4, me, InRun).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(slots.in_use(), 4);

  ASSERT_TRUE(slots.Close(ids[0], me).ok());  // closeClient
  slots.Gone(7, ids[1]);                      // timed out of run 7
  slots.Gone(8, ids[2]);                      // another run: not this slot
  EXPECT_EQ(slots.in_use(), 2);
  slots.RunEnded(7);
  EXPECT_EQ(slots.in_use(), 0);
  EXPECT_EQ(slots.freed(Freed::kClosed), 1u);
  EXPECT_EQ(slots.freed(Freed::kGone), 1u);
  EXPECT_EQ(slots.freed(Freed::kRunEnded), 2u);

  // A run that ended before its last client's closeClient: OK once.
  EXPECT_TRUE(slots.Close(ids[3], me).ok());
  EXPECT_EQ(slots.Close(ids[3], me).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(slots.Close(ids[1], me).status().code(), absl::StatusCode::kNotFound);  // gone
  EXPECT_EQ(slots.freed(Freed::kClosed), 1u);
  // Ids are never reused.
  EXPECT_EQ(*slots.Register(4, me, InRun), 5);
}

TEST(SbpSlotsTest, AnIdBelongsToItsConnectionAndToken) {
  SbpSlots slots;
  const SbpSlots::Owner me = SbpSlots::OwnerOf("ipv4:127.0.0.1:1000", "Bearer a");
  const int64_t id = *slots.Register(10, me, InRun);
  for (const SbpSlots::Owner& other : {SbpSlots::OwnerOf("ipv4:127.0.0.1:1001", "Bearer a"),
                                       SbpSlots::OwnerOf("ipv4:127.0.0.1:1000", "Bearer b"),
                                       SbpSlots::OwnerOf("ipv4:127.0.0.1:1000", "")}) {
    EXPECT_EQ(slots.Find(id, other).status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_EQ(slots.BeginStream(id, other).status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_EQ(slots.Close(id, other).status().code(), absl::StatusCode::kPermissionDenied);
  }
  EXPECT_EQ(slots.in_use(), 1);
  EXPECT_TRUE(slots.Find(id, SbpSlots::OwnerOf("ipv4:127.0.0.1:1000", "Bearer a")).ok());
  slots.RunEnded(7);
  EXPECT_EQ(slots.Close(id, SbpSlots::OwnerOf("ipv4:127.0.0.1:1001", "Bearer a")).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(SbpSlotsTest, StreamStages) {
  SbpSlots slots;
  const SbpSlots::Owner me = SbpSlots::OwnerOf("unix:", "");
  const int64_t a = *slots.Register(10, me, InRun);
  const int64_t b = *slots.Register(10, me, InRun);
  ASSERT_TRUE(slots.BeginStream(a, me).ok());
  EXPECT_EQ(slots.BeginStream(a, me).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(slots.EndStream(a, /*closed=*/false));
  EXPECT_EQ(slots.Find(a, me)->stage, Stage::kFailed);
  ASSERT_TRUE(slots.BeginStream(b, me).ok());
  EXPECT_EQ(slots.Close(b, me)->stage, Stage::kStreaming);  // closeClient while streaming
  EXPECT_TRUE(slots.EndStream(b, /*closed=*/true));         // freed meanwhile
  EXPECT_EQ(slots
                .Register(10, me,
                          [](int64_t) -> absl::StatusOr<runs::RunId> {
                            return absl::UnavailableError("shutting down");
                          })
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(slots.in_use(), 1);
}

}  // namespace
}  // namespace perld::service
