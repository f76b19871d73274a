#include "daemon/runs/remote_window_inbox.h"

#include <utility>

namespace perld::runs {

void RemoteWindowInbox::Push(RemoteWindow window) {
  if (window.charge) window.charge->fetch_add(window.bytes(), std::memory_order_relaxed);
  queue_.enqueue(std::move(window));
  // release: a recorder that sees the count also sees the queued window.
  queued_.fetch_add(1, std::memory_order_release);
}

}  // namespace perld::runs
