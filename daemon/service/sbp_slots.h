// SbpSlots: the registrations of SBK clients (SBP's registerClient), each
// holding one of sbp.maxConnections slots: which connection owns a client
// id, which run it joined, where its stream stands, and why each slot was
// freed (counted: perld_sbp_slots_freed_total{reason}).
//
// A slot is freed when its client closes it (closeClient), when the client
// is gone from its run (not back within ingest.clientTimeoutMs: Gone), or
// when its run ends (RunEnded), whichever comes first; a freed id is never
// used again. The run of a client that streamed and closed may end before
// the client's closeClient arrives (it was the last one): the closeClient of
// an id freed by its run's end still answers OK (the last kEndedIds such
// ids are remembered, with their owners).
//
// Ownership: a registration belongs to the connection that made it -- its
// gRPC peer ("ipv4:127.0.0.1:40312") and a SHA-256 digest of its
// authorization header (never the header itself). Any other caller using
// the id is refused with PERMISSION_DENIED. (On the Unix socket every
// connection has the same peer name: there the socket's file mode and the
// token decide.)
//
// Threads: every method from any thread; one mutex, never held while
// calling out except across Register's `join`.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "daemon/common/mutex.h"
#include "daemon/runs/run_info.h"

namespace perld::service {

class SbpSlots {
 public:
  // Why a slot was freed: the `reason` label.
  enum class Freed { kClosed, kGone, kRunEnded, kCount };
  static constexpr size_t kReasons = static_cast<size_t>(Freed::kCount);
  static const char* FreedName(Freed reason);  // "closed", "gone", "run_ended"

  // Who may use a registration.
  struct Owner {
    std::string peer;
    std::array<unsigned char, 32> token_digest{};  // SHA-256 of the authorization header
    bool operator==(const Owner&) const = default;
  };
  // The owner for a call from `peer` with `authorization` ("" when absent).
  static Owner OwnerOf(std::string_view peer, std::string_view authorization);

  // Where a registered client's stream stands.
  enum class Stage {
    kRegistered,  // no stream yet
    kStreaming,   // its streamLatencies is open
    kStreamed,    // its stream ended and closed the client in the run
    kFailed,      // its stream ended in an error (or was cancelled)
  };
  struct Slot {
    runs::RunId run_id = 0;
    Stage stage = Stage::kRegistered;
  };

  // Registers a new client of `owner` when fewer than `max_slots` are held
  // (else ResourceExhausted): `join(id)` joins the run for the new id and
  // returns the run's id (its error is returned, the id is not reused).
  // `join` runs under the slots' lock, so a departure or run end reported
  // meanwhile waits for the registration.
  absl::StatusOr<int64_t> Register(int64_t max_slots, Owner owner,
                                   absl::FunctionRef<absl::StatusOr<runs::RunId>(int64_t id)> join);
  // The registration `id` used by `owner`: NotFound (never registered, or
  // freed), PermissionDenied (another connection or token).
  absl::StatusOr<Slot> Find(int64_t id, const Owner& owner);
  // streamLatencies begins: kRegistered -> kStreaming. As Find, and
  // FailedPrecondition when the client has streamed already.
  absl::StatusOr<Slot> BeginStream(int64_t id, const Owner& owner);
  // The stream BeginStream began ended: closed in the run (`closed`) or
  // not. True when the slot was freed while the stream was open (its client
  // closed it, or its run ended).
  bool EndStream(int64_t id, bool closed);
  // closeClient: frees the slot (reason closed) and returns what it was; for
  // an id freed by its run's end, the slot as it was then (once).
  static constexpr size_t kEndedIds = 4096;
  absl::StatusOr<Slot> Close(int64_t id, const Owner& owner);
  // The RunTable's departures: client `id` is gone from `run_id`; the run
  // `run_id` ended (every slot in it).
  void Gone(runs::RunId run_id, int64_t id);
  void RunEnded(runs::RunId run_id);

  int64_t in_use() const;
  uint64_t freed(Freed reason) const {
    return freed_[static_cast<size_t>(reason)].load(std::memory_order_relaxed);
  }

 private:
  struct Entry {
    Owner owner;
    Slot slot;
  };
  // Under mu_.
  absl::StatusOr<Entry*> FindLocked(int64_t id, const Owner& owner)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FreeLocked(std::map<int64_t, Entry>::iterator it, Freed reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int64_t, Entry> slots_ ABSL_GUARDED_BY(mu_);  // the slots held
  std::map<int64_t, Entry> ended_ ABSL_GUARDED_BY(mu_);  // freed by their run's end, not closed yet
  std::array<std::atomic<uint64_t>, kReasons> freed_{};
};

}  // namespace perld::service
