// ArenaMessageAllocator: a call's request and response live on one arena
// that starts in a reused block -- the next call's messages land at the same
// addresses -- and a response larger than the block still builds (extra
// blocks, freed with the arena; ASan checks nothing leaks or is used after).
#include "daemon/service/arena_message_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "perld/v1/perld.pb.h"

namespace perld::service {
namespace {

using Allocator = ArenaMessageAllocator<v1::GetClientsRequest, v1::GetClientsResponse>;

// A response of `clients` rows, each with 29 percentiles.
void Fill(v1::GetClientsResponse* response, int clients) {
  for (int i = 0; i < clients; ++i) {
    v1::RemoteClient* c = response->add_clients();
    c->set_client_id("client-" + std::to_string(i));
    for (int k = 0; k < 29; ++k) {
      v1::Percentile* p = c->add_percentiles();
      p->set_percent(k);
      p->set_latency(1000 + k);
      p->set_count(7);
    }
  }
}

bool Within(const void* p, const void* begin, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  const auto b = reinterpret_cast<uintptr_t>(begin);
  return a >= b && a < b + bytes;
}

TEST(ArenaMessageAllocatorTest, MessagesLiveOnAnArenaInAReusedBlock) {
  constexpr size_t kBlock = 64 << 10;
  Allocator allocator(kBlock, 2);
  grpc::MessageHolder<v1::GetClientsRequest, v1::GetClientsResponse>* first =
      allocator.AllocateMessages();
  ASSERT_NE(first->response()->GetArena(), nullptr);
  EXPECT_EQ(first->request()->GetArena(), first->response()->GetArena());
  const void* request_at = first->request();
  const void* response_at = first->response();
  EXPECT_TRUE(Within(response_at, request_at, kBlock)) << "both in the first block";
  Fill(first->response(), 4);
  first->Release();
  // Were the block freed, this would take its memory (and the next call's
  // messages would land elsewhere).
  auto decoy = std::make_unique<char[]>(kBlock);

  // The next call starts in the same block: the same addresses.
  grpc::MessageHolder<v1::GetClientsRequest, v1::GetClientsResponse>* second =
      allocator.AllocateMessages();
  EXPECT_EQ(static_cast<const void*>(second->request()), request_at);
  EXPECT_EQ(static_cast<const void*>(second->response()), response_at);
  EXPECT_EQ(second->response()->clients_size(), 0) << "a fresh message";
  // Larger than the block: more blocks, the response whole.
  Fill(second->response(), 400);
  EXPECT_GT(second->response()->SpaceUsedLong(), kBlock);
  v1::GetClientsResponse copy = *second->response();
  EXPECT_EQ(copy.clients_size(), 400);
  EXPECT_EQ(copy.clients(399).percentiles(28).latency(), 1028);
  second->Release();
}

TEST(ArenaMessageAllocatorTest, CallsAtOnceEachGetTheirOwnBlock) {
  Allocator allocator(16 << 10, 1);
  auto* a = allocator.AllocateMessages();
  auto* b = allocator.AllocateMessages();
  EXPECT_NE(a->response()->GetArena(), b->response()->GetArena());
  Fill(a->response(), 3);
  Fill(b->response(), 5);
  EXPECT_EQ(a->response()->clients_size(), 3);
  EXPECT_EQ(b->response()->clients_size(), 5);
  a->Release();
  b->Release();  // one spare kept, the other block freed
  auto* c = allocator.AllocateMessages();
  EXPECT_EQ(c->response()->clients_size(), 0);
  c->Release();
}

}  // namespace
}  // namespace perld::service
