#include "daemon/runs/remote_window_inbox.h"

#include <utility>

namespace perld::runs {

void RemoteWindowInbox::Push(RemoteWindow window) {
  if (window.charge) window.charge->fetch_add(window.bytes(), std::memory_order_relaxed);
  if (window.total_charge) {
    window.total_charge->fetch_add(window.bytes(), std::memory_order_relaxed);
  }
  queued_.fetch_add(1, std::memory_order_relaxed);
  auto* node = new Node{std::move(window), head_.load(std::memory_order_relaxed)};
  // release: the recorder's acquire exchange sees the window complete.
  while (!head_.compare_exchange_weak(node->next, node, std::memory_order_release,
                                      std::memory_order_relaxed)) {
  }
}

std::vector<TimeStamp> RemoteWindowInbox::TakeTimestampBuffer() {
  MutexLock lock(buffers_mu_);
  if (buffers_.empty()) return {};
  std::vector<TimeStamp> buffer = std::move(buffers_.back());
  buffers_.pop_back();
  return buffer;
}

void RemoteWindowInbox::Recycle(std::vector<TimeStamp> buffer) {
  if (buffer.capacity() == 0) return;
  buffer.clear();
  MutexLock lock(buffers_mu_);
  if (buffers_.size() < kPooledBuffers) buffers_.push_back(std::move(buffer));
}  // else freed here

RemoteWindowInbox::Node* RemoteWindowInbox::Reversed(Node* node) {
  Node* out = nullptr;
  while (node != nullptr) {
    Node* next = node->next;
    node->next = out;
    out = node;
    node = next;
  }
  return out;
}

RemoteWindowInbox::~RemoteWindowInbox() {
  // Windows never merged (the run ended without a last drain): free them.
  Node* node = head_.exchange(nullptr, std::memory_order_acquire);
  while (node != nullptr) {
    std::unique_ptr<Node> done(node);
    node = node->next;
  }
}

}  // namespace perld::runs
