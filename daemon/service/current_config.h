// CurrentConfig: the daemon's effective configuration, swapped whole on
// SIGHUP. Readers take a shared_ptr to an immutable DaemonConfig and keep a
// consistent view for as long as they hold it.
//
// Threads: Get from any thread; Set from the main thread (reload).
#pragma once

#include <memory>
#include <mutex>
#include <utility>

#include "daemon/config/daemon_config.h"

namespace perld::service {

class CurrentConfig {
 public:
  explicit CurrentConfig(config::DaemonConfig config)
      : config_(std::make_shared<const config::DaemonConfig>(std::move(config))) {}

  std::shared_ptr<const config::DaemonConfig> Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return config_;
  }
  void Set(config::DaemonConfig config) {
    auto next = std::make_shared<const config::DaemonConfig>(std::move(config));
    std::lock_guard<std::mutex> lock(mu_);
    config_ = std::move(next);
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const config::DaemonConfig> config_;
};

}  // namespace perld::service
