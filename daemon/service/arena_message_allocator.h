// ArenaMessageAllocator: how gRPC's callback API allocates one unary
// method's request and response -- both on one protobuf Arena whose first
// block is a buffer reused from call to call, instead of `new`. A large
// response (GetClients: a row and about 30 percentile messages per client,
// thousands of sub-messages) is then built by bump allocation and freed at
// once: no malloc and free per sub-message, and in the steady state no new
// memory per call (tests/bench/DAEMON.md, "GetClients on an arena").
//
// Install with the generated Service::SetMessageAllocatorFor_<Method>. The
// allocator must outlive every call (its service owns it; the server's
// Shutdown waits for the calls).
//
// Threads: AllocateMessages and a holder's Release from any gRPC thread;
// spares_mu_ guards the spare blocks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "daemon/common/mutex.h"
#include "google/protobuf/arena.h"
#include "grpcpp/support/message_allocator.h"

namespace perld::service {

template <typename Request, typename Response>
class ArenaMessageAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  // Each call's arena starts in a reused block of `block_bytes`; at most
  // `max_spares` blocks wait between calls (more calls at once allocate
  // more, freed when they end).
  ArenaMessageAllocator(size_t block_bytes, size_t max_spares)
      : block_bytes_(block_bytes), max_spares_(max_spares) {}
  ArenaMessageAllocator(const ArenaMessageAllocator&) = delete;
  ArenaMessageAllocator& operator=(const ArenaMessageAllocator&) = delete;

  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    return new Holder(this, TakeBlock());
  }

 private:
  using Block = std::unique_ptr<char[]>;

  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder(ArenaMessageAllocator* owner, Block block)
        : owner_(owner), block_(std::move(block)), arena_(Options(owner, block_.get())) {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    // gRPC is done with both messages.
    void Release() override {
      ArenaMessageAllocator* owner = owner_;
      Block block = std::move(block_);
      delete this;  // the arena and every block it added; not `block`
      owner->HandBack(std::move(block));
    }

   private:
    static google::protobuf::ArenaOptions Options(const ArenaMessageAllocator* owner, char* block) {
      google::protobuf::ArenaOptions options;
      options.initial_block = block;
      options.initial_block_size = owner->block_bytes_;
      // Past the reused block (a response larger than usual): few blocks,
      // growing to 1 MiB, not the default's many of 8 KiB.
      options.start_block_size = owner->block_bytes_;
      options.max_block_size = std::max<size_t>(owner->block_bytes_, size_t{1} << 20);
      return options;
    }

    ArenaMessageAllocator* const owner_;
    Block block_;                    // outlives arena_ (declared first)
    google::protobuf::Arena arena_;  // uses block_ first
  };

  Block TakeBlock() {
    {
      MutexLock lock(spares_mu_);
      if (!spares_.empty()) {
        Block block = std::move(spares_.back());
        spares_.pop_back();
        return block;
      }
    }
    return std::make_unique_for_overwrite<char[]>(block_bytes_);
  }
  void HandBack(Block block) {
    MutexLock lock(spares_mu_);
    if (spares_.size() < max_spares_) spares_.push_back(std::move(block));
  }

  const size_t block_bytes_;
  const size_t max_spares_;
  Mutex spares_mu_;
  std::vector<Block> spares_ ABSL_GUARDED_BY(spares_mu_);
};

}  // namespace perld::service
