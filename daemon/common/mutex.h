// perld::Mutex, perld::SharedMutex, their scoped locks and perld::CondVar:
// std::mutex / std::shared_mutex / std::condition_variable with Clang
// thread-safety annotations (absl/base/thread_annotations.h), so that
// `-Wthread-safety` (the clang ASan configuration, -Werror) rejects a read or
// write of an ABSL_GUARDED_BY member without its lock.
//
// Not absl::Mutex: Debian's Abseil is not built with ThreadSanitizer
// annotations, so TSan could not see absl::Mutex ordering and the concurrency
// tests would report false races. libstdc++'s std::mutex carries no
// annotations, hence these thin wrappers (header-only, no behaviour of their
// own: every call is the std one).
//
// Contract:
// - Members a mutex protects are ABSL_GUARDED_BY(mu_); private helpers that
//   run with it held are ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) (or SHARED_).
// - MutexLock / WriterLock / ReaderLock hold for their scope; MutexLock may be
//   Unlock()ed and Lock()ed again within it (like std::unique_lock), and
//   releases only if it holds. A helper that must drop a lock its caller
//   holds calls mu_.Unlock() / mu_.Lock() itself (Clang 14 cannot follow a
//   scoped lock passed by reference) and must hold it again on return.
// - CondVar waits take the Mutex (held, checked by the analysis). A predicate
//   reading guarded members says so:
//     cv_.Wait(mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ready_; });
#pragma once

#include <absl/base/thread_annotations.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

namespace perld {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds it (no run-time check: std::mutex
  // does not know its owner).
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

  // The std::mutex itself, for CondVar; not for locking around the analysis.
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

class ABSL_LOCKABLE SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }
  bool ReaderTryLock() ABSL_SHARED_TRYLOCK_FUNCTION(true) { return mu_.try_lock_shared(); }
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}
  void AssertReaderHeld() const ABSL_ASSERT_SHARED_LOCK() {}

 private:
  std::shared_mutex mu_;
};

// Holds a Mutex for its scope; Unlock() / Lock() drop and retake it.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.Lock();
    held_ = true;
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    held_ = false;
    mu_.Unlock();
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// Holds a SharedMutex exclusively for its scope.
class ABSL_SCOPED_LOCKABLE WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.Lock(); }
  ~WriterLock() ABSL_UNLOCK_FUNCTION() { mu_.Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex& mu_;
};

// Holds a SharedMutex shared for its scope.
class ABSL_SCOPED_LOCKABLE ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) { mu_.ReaderLock(); }
  ~ReaderLock() ABSL_UNLOCK_FUNCTION() { mu_.ReaderUnlock(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

// std::condition_variable on a perld::Mutex the caller holds (any scoped lock
// or helper context): the wait releases and retakes it, as std's does.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex& mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Adopted lock(mu);
    cv_.wait(lock.lock);
  }
  template <typename Predicate>
  void Wait(Mutex& mu, Predicate pred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Adopted lock(mu);
    cv_.wait(lock.lock, std::move(pred));
  }
  // std::cv_status::timeout when the time ran out.
  template <typename Rep, typename Period>
  std::cv_status WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Adopted lock(mu);
    return cv_.wait_for(lock.lock, timeout);
  }
  // The predicate's last value (false: timed out without it).
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout, Predicate pred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Adopted lock(mu);
    return cv_.wait_for(lock.lock, timeout, std::move(pred));
  }
  template <typename Clock, typename Duration>
  std::cv_status WaitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Adopted lock(mu);
    return cv_.wait_until(lock.lock, deadline);
  }
  template <typename Clock, typename Duration, typename Predicate>
  bool WaitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline,
                 Predicate pred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Adopted lock(mu);
    return cv_.wait_until(lock.lock, deadline, std::move(pred));
  }

  void NotifyOne() noexcept { cv_.notify_one(); }
  void NotifyAll() noexcept { cv_.notify_all(); }

 private:
  // The caller's hold on mu as a std::unique_lock for the wait, handed back
  // (still held) on the way out, exceptions included.
  struct Adopted {
    explicit Adopted(Mutex& mu) : lock(mu.native(), std::adopt_lock) {}
    ~Adopted() { lock.release(); }
    std::unique_lock<std::mutex> lock;
  };
  std::condition_variable cv_;
};

}  // namespace perld
