// InterleavedLongMap: open-addressing int64 -> int64 count map with linear
// probing over ONE interleaved array of (key, count) slots (the layout of
// Eclipse Collections' LongLongHashMap that SBK uses).
//
// Why not absl::flat_hash_map (kept as the benchmark baseline
// AbslLongHashMapLatencyRecorder, tests/bench/recorder_bench.cc): absl's
// clear() frees any table above 127 slots, and erasing entry by entry leaves
// tombstones that make the next window's probes long; either a table
// allocation per window or a ~7x slower complete window (see
// tests/bench/RECORDERS.md). This map empties itself in the same pass that
// reads it out (Drain) and never releases capacity.
//
// Contract: keys are >= 0 (kEmpty = -1 marks a free slot); counts are added,
// never removed. Load factor <= 1/2 (doubling), so a probe is ~1.5 slots on
// a hit. Hash: Fibonacci multiplicative hashing (top bits of key * 2^64/phi),
// which spreads sequential and strided latencies evenly.
// Threads: none (owned by one recorder). Hot path: Add allocates only when
// the table doubles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "daemon/core/contract.h"

namespace perld {

class InterleavedLongMap {
 public:
  static constexpr int64_t kEmpty = -1;
  static constexpr size_t kInitialCapacity = 16;

  InterleavedLongMap() { Allocate(kInitialCapacity); }
  InterleavedLongMap(const InterleavedLongMap&) = delete;
  InterleavedLongMap& operator=(const InterleavedLongMap&) = delete;

  // Adds `count` to `key`'s value (inserting it at `count`). Returns true iff
  // the key was new. REQUIRES: key >= 0.
  bool Add(int64_t key, int64_t count) {
    PERLD_CONTRACT(key >= 0, "InterleavedLongMap key < 0");
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.key == key) {
        slot.count += count;
        return false;
      }
      if (slot.key == kEmpty) {
        if (size_ >= grow_at_) [[unlikely]] {
          GrowAndInsert(key, count);
        } else {
          slot.key = key;
          slot.count = count;
          ++size_;
        }
        return true;
      }
    }
  }

  // The value stored for `key`, inserting `value` first when the key is
  // absent (*added tells which). The reference is valid until the next
  // insertion. REQUIRES: key >= 0.
  int64_t& FindOrInsert(int64_t key, int64_t value, bool* added) {
    PERLD_CONTRACT(key >= 0, "InterleavedLongMap key < 0");
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.key == key) {
        *added = false;
        return slot.count;
      }
      if (slot.key == kEmpty) {
        *added = true;
        if (size_ >= grow_at_) [[unlikely]] {
          GrowAndInsert(key, value);
          return Find(key);
        }
        slot.key = key;
        slot.count = value;
        ++size_;
        return slot.count;
      }
    }
  }

  // The value stored for `key`, or null when absent. Valid until the next
  // insertion.
  const int64_t* FindOrNull(int64_t key) const {
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.key == key) return &slot.count;
      if (slot.key == kEmpty) return nullptr;
    }
  }

  // Frees the table and starts again at the initial capacity.
  void Release() { Allocate(kInitialCapacity); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return mask_ + 1; }
  size_t MemoryBytes() const { return capacity() * sizeof(Slot); }

  // fn(key, count) for every entry, storage order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    if (size_ == 0) {
      return;
    }
    for (size_t i = 0; i <= mask_; ++i) {
      if (slots_[i].key != kEmpty) {
        fn(slots_[i].key, slots_[i].count);
      }
    }
  }

  // fn(key, count) for every entry, storage order, emptying each slot as it
  // is read: the map is empty afterwards and keeps its capacity. O(capacity).
  template <typename Fn>
  void Drain(Fn&& fn) {
    if (size_ == 0) {
      return;
    }
    for (size_t i = 0; i <= mask_; ++i) {
      if (slots_[i].key != kEmpty) {
        fn(slots_[i].key, slots_[i].count);
        slots_[i].key = kEmpty;
      }
    }
    size_ = 0;
  }

  // Empties the map keeping its capacity; O(capacity) unless already empty.
  void Clear() {
    if (size_ == 0) {
      return;
    }
    for (size_t i = 0; i <= mask_; ++i) {
      slots_[i].key = kEmpty;
    }
    size_ = 0;
  }

 private:
  struct Slot {
    int64_t key;
    int64_t count;
  };

  // REQUIRES: `key` is present.
  int64_t& Find(int64_t key) {
    size_t i = Home(key);
    while (slots_[i].key != key) i = (i + 1) & mask_;
    return slots_[i].count;
  }

  size_t Home(int64_t key) const {
    return static_cast<size_t>((static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ULL) >> shift_);
  }

  void Allocate(size_t capacity) {
    slots_ = std::make_unique_for_overwrite<Slot[]>(capacity);
    for (size_t i = 0; i < capacity; ++i) {
      slots_[i].key = kEmpty;
    }
    mask_ = capacity - 1;
    grow_at_ = capacity / 2;
    shift_ = 64 - __builtin_ctzll(capacity);
    size_ = 0;
  }

  // Kept out of line so the probe loop in Add stays small and inlinable.
  [[gnu::noinline]] void GrowAndInsert(int64_t key, int64_t count) {
    std::unique_ptr<Slot[]> old = std::move(slots_);
    const size_t old_capacity = mask_ + 1;
    Allocate(old_capacity * 2);
    for (size_t i = 0; i < old_capacity; ++i) {
      if (old[i].key != kEmpty) {
        Place(old[i]);
      }
    }
    Place(Slot{key, count});
  }

  void Place(const Slot& entry) {
    size_t j = Home(entry.key);
    while (slots_[j].key != kEmpty) {
      j = (j + 1) & mask_;
    }
    slots_[j] = entry;
    ++size_;
  }

  std::unique_ptr<Slot[]> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  size_t grow_at_ = 0;
  int shift_ = 64;
};

}  // namespace perld
