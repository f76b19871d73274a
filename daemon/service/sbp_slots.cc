#include "daemon/service/sbp_slots.h"

#include <openssl/sha.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/mutex.h"

namespace perld::service {

namespace {

absl::Status PermissionDenied(int64_t id) {
  return absl::PermissionDeniedError(absl::StrCat(
      "client id ", id, " was registered by another connection: only it may use the id"));
}

}  // namespace

const char* SbpSlots::FreedName(Freed reason) {
  switch (reason) {
    case Freed::kClosed:
      return "closed";
    case Freed::kGone:
      return "gone";
    case Freed::kRunEnded:
      return "run_ended";
    case Freed::kCount:
      break;
  }
  return "unknown";
}

SbpSlots::Owner SbpSlots::OwnerOf(std::string_view peer, std::string_view authorization) {
  Owner owner;
  owner.peer = std::string(peer);
  SHA256(reinterpret_cast<const unsigned char*>(authorization.data()), authorization.size(),
         owner.token_digest.data());
  return owner;
}

absl::StatusOr<int64_t> SbpSlots::Register(
    int64_t max_slots, Owner owner,
    absl::FunctionRef<absl::StatusOr<runs::RunId>(int64_t id)> join) {
  MutexLock lock(mu_);
  if (static_cast<int64_t>(slots_.size()) >= max_slots) {
    return absl::ResourceExhaustedError(
        absl::StrCat("sbp.maxConnections: ", max_slots, " SBP clients are connected already"));
  }
  const int64_t id = next_id_++;
  absl::StatusOr<runs::RunId> run = join(id);
  if (!run.ok()) return run.status();
  slots_[id] = Entry{std::move(owner), Slot{*run, Stage::kRegistered}};
  return id;
}

absl::StatusOr<SbpSlots::Entry*> SbpSlots::FindLocked(int64_t id, const Owner& owner) {
  auto it = slots_.find(id);
  if (it == slots_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "client id ", id, " is not registered (never, or closed, gone or its run ended)"));
  }
  if (!(it->second.owner == owner)) return PermissionDenied(id);
  return &it->second;
}

absl::StatusOr<SbpSlots::Slot> SbpSlots::Find(int64_t id, const Owner& owner) {
  MutexLock lock(mu_);
  absl::StatusOr<Entry*> entry = FindLocked(id, owner);
  if (!entry.ok()) return entry.status();
  return (*entry)->slot;
}

absl::StatusOr<SbpSlots::Slot> SbpSlots::BeginStream(int64_t id, const Owner& owner) {
  MutexLock lock(mu_);
  absl::StatusOr<Entry*> entry = FindLocked(id, owner);
  if (!entry.ok()) return entry.status();
  Slot& slot = (*entry)->slot;
  if (slot.stage != Stage::kRegistered) {
    return absl::FailedPreconditionError(absl::StrCat("client ", id, " has streamed already"));
  }
  slot.stage = Stage::kStreaming;
  return slot;
}

bool SbpSlots::EndStream(int64_t id, bool closed) {
  MutexLock lock(mu_);
  auto it = slots_.find(id);
  if (it == slots_.end()) return true;
  it->second.slot.stage = closed ? Stage::kStreamed : Stage::kFailed;
  return false;
}

absl::StatusOr<SbpSlots::Slot> SbpSlots::Close(int64_t id, const Owner& owner) {
  MutexLock lock(mu_);
  if (auto ended = ended_.find(id); ended != ended_.end()) {
    if (!(ended->second.owner == owner)) return PermissionDenied(id);
    const Slot slot = ended->second.slot;
    ended_.erase(ended);
    return slot;
  }
  absl::StatusOr<Entry*> entry = FindLocked(id, owner);
  if (!entry.ok()) return entry.status();
  const Slot slot = (*entry)->slot;
  FreeLocked(slots_.find(id), Freed::kClosed);
  return slot;
}

void SbpSlots::Gone(runs::RunId run_id, int64_t id) {
  MutexLock lock(mu_);
  auto it = slots_.find(id);
  if (it != slots_.end() && it->second.slot.run_id == run_id) FreeLocked(it, Freed::kGone);
}

void SbpSlots::RunEnded(runs::RunId run_id) {
  MutexLock lock(mu_);
  for (auto it = slots_.begin(); it != slots_.end();) {
    auto next = std::next(it);
    if (it->second.slot.run_id == run_id) {
      ended_.insert(*it);
      if (ended_.size() > kEndedIds) ended_.erase(ended_.begin());  // the oldest id
      FreeLocked(it, Freed::kRunEnded);
    }
    it = next;
  }
}

void SbpSlots::FreeLocked(std::map<int64_t, Entry>::iterator it, Freed reason) {
  slots_.erase(it);
  freed_[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
}

int64_t SbpSlots::in_use() const {
  MutexLock lock(mu_);
  return static_cast<int64_t>(slots_.size());
}

}  // namespace perld::service
