// CurrentConfig: the daemon's effective configuration, swapped whole on
// SIGHUP. Readers take a shared_ptr to an immutable DaemonConfig and keep a
// consistent view for as long as they hold it.
//
// Threads: Get from any thread; Set from the main thread (reload).
#pragma once

#include <memory>
#include <utility>

#include "daemon/common/mutex.h"
#include "daemon/config/daemon_config.h"

namespace perld::config {

class CurrentConfig {
 public:
  explicit CurrentConfig(DaemonConfig config)
      : config_(std::make_shared<const DaemonConfig>(std::move(config))) {}

  std::shared_ptr<const DaemonConfig> Get() const {
    MutexLock lock(mu_);
    return config_;
  }
  void Set(DaemonConfig config) {
    auto next = std::make_shared<const DaemonConfig>(std::move(config));
    MutexLock lock(mu_);
    config_ = std::move(next);
  }

 private:
  mutable Mutex mu_;
  std::shared_ptr<const DaemonConfig> config_ ABSL_GUARDED_BY(mu_);
};

}  // namespace perld::config
