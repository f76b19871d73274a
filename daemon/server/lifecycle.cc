#include "daemon/server/lifecycle.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"

namespace perld::server {

Lifecycle::Lifecycle(LifecycleHooks hooks) : hooks_(std::move(hooks)) {}

Lifecycle::~Lifecycle() { Stop(); }

void Lifecycle::Add(Step step) { steps_.push_back(std::move(step)); }

absl::Status Lifecycle::Start() {
  if (start_called_) return absl::FailedPreconditionError("Lifecycle::Start called twice");
  start_called_ = true;
  for (Step& step : steps_) {
    absl::Status status;
    if (step.name == hooks_.fail_start) {
      status = absl::InternalError("injected failure (test hook)");
    } else if (step.start) {
      status = step.start();
    }
    step.start = nullptr;  // may hold references to the caller's locals
    if (!status.ok()) {
      log::Info("start failed at '", step.name, "': stopping the ", started_,
                " step(s) started, in reverse");
      StopStarted();
      return absl::Status(status.code(), absl::StrCat(step.name, ": ", status.message()));
    }
    log::Debug("lifecycle: started '", step.name, "'");
    if (hooks_.trace) hooks_.trace("start", step.name);
    ++started_;
  }
  return absl::OkStatus();
}

void Lifecycle::Stop() { StopStarted(); }

void Lifecycle::StopStarted() {
  while (started_ > 0) {
    Step& step = steps_[--started_];
    if (step.stop) step.stop();
    step.stop = nullptr;
    log::Debug("lifecycle: stopped '", step.name, "'");
    if (hooks_.trace) hooks_.trace("stop", step.name);
  }
}

std::vector<std::string> Lifecycle::names() const {
  std::vector<std::string> out;
  out.reserve(steps_.size());
  for (const Step& step : steps_) out.push_back(step.name);
  return out;
}

}  // namespace perld::server
