// Lifecycle: steps start in order; a failure at step k stops steps k-1..0 in
// reverse, once, and names the step; Stop is reverse and idempotent.
#include "daemon/server/lifecycle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace perld::server {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// Three steps a, b, c writing "start X" / "stop X" to `events`; `failing`
// names the one whose start fails ("": none).
void AddSteps(Lifecycle& life, std::vector<std::string>& events, const std::string& failing) {
  for (const std::string name : {"a", "b", "c"}) {
    life.Add({.name = name,
              .start = [&events, failing, name]() -> absl::Status {
                if (name == failing) return absl::UnavailableError("boom");
                events.push_back("start " + name);
                return absl::OkStatus();
              },
              .stop = [&events, name] { events.push_back("stop " + name); }});
  }
}

TEST(Lifecycle, StartsInOrderAndStopsInReverseOnce) {
  std::vector<std::string> events;
  {
    Lifecycle life;
    AddSteps(life, events, "");
    ASSERT_TRUE(life.Start().ok());
    EXPECT_THAT(life.names(), ElementsAre("a", "b", "c"));
    life.Stop();
    life.Stop();
  }  // the destructor stops nothing more
  EXPECT_THAT(events, ElementsAre("start a", "start b", "start c", "stop c", "stop b", "stop a"));
}

TEST(Lifecycle, DestructorStops) {
  std::vector<std::string> events;
  {
    Lifecycle life;
    AddSteps(life, events, "");
    ASSERT_TRUE(life.Start().ok());
  }
  EXPECT_THAT(events, ElementsAre("start a", "start b", "start c", "stop c", "stop b", "stop a"));
}

TEST(Lifecycle, FailureAtEveryStepStopsWhatStartedInReverseOnce) {
  const std::vector<std::vector<std::string>> expected = {
      {},
      {"start a", "stop a"},
      {"start a", "start b", "stop b", "stop a"},
  };
  const std::string names[] = {"a", "b", "c"};
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE(names[k]);
    std::vector<std::string> events;
    {
      Lifecycle life;
      AddSteps(life, events, names[k]);
      absl::Status status = life.Start();
      EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
      EXPECT_EQ(status.message(), names[k] + ": boom");
      EXPECT_THAT(events, ElementsAreArray(expected[k]));  // unwound before Start returned
      life.Stop();
    }
    EXPECT_THAT(events, ElementsAreArray(expected[k]));  // and nothing more
  }
}

TEST(Lifecycle, InjectedFailureAndTrace) {
  std::vector<std::string> events;
  std::vector<std::string> trace;
  {
    LifecycleHooks hooks;
    hooks.fail_start = "c";
    hooks.trace = [&trace](std::string_view event, std::string_view step) {
      trace.push_back(std::string(event) + " " + std::string(step));
    };
    Lifecycle life(hooks);
    AddSteps(life, events, "");
    absl::Status status = life.Start();
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
    EXPECT_EQ(status.message(), "c: injected failure (test hook)");
    EXPECT_EQ(events.size(), 4u);
  }
  EXPECT_THAT(events, ElementsAre("start a", "start b", "stop b", "stop a"));  // c never ran
  EXPECT_EQ(trace, events);
}

TEST(Lifecycle, EmptyFunctionsAndReleasedStarts) {
  auto held = std::make_shared<int>(0);
  std::vector<std::string> events;
  Lifecycle life;
  life.Add({.name = "nothing to stop", .start = [held] { return absl::OkStatus(); }});
  life.Add({.name = "nothing to start", .stop = [&events] { events.push_back("stop"); }});
  ASSERT_TRUE(life.Start().ok());
  EXPECT_EQ(held.use_count(), 1);  // the start function was released after it ran
  EXPECT_EQ(life.Start().code(), absl::StatusCode::kFailedPrecondition);
  life.Stop();
  EXPECT_THAT(events, ElementsAre("stop"));
}

}  // namespace
}  // namespace perld::server
