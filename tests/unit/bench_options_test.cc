#include "daemon/bench/bench_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace perld::bench {
namespace {

absl::StatusOr<BenchOptions> Parse(std::vector<std::string> args) { return ParseBenchArgs(args); }

TEST(BenchOptionsTest, AcceptsSbkCommandLineUnchanged) {
  auto o = Parse({"-class", "PerlBench", "-writers", "4", "-size", "1024", "-records", "20000000",
                  "-time", "ns", "-mpscqueue", "false"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->writers, 4);
  EXPECT_EQ(o->size, 1024);
  EXPECT_EQ(o->records, 20000000);
  EXPECT_EQ(o->time_unit, TimeUnit::kNs);
  EXPECT_EQ(o->channels.queue, QueueKind::kLibrary);
  EXPECT_EQ(o->mode(), BenchMode::kExact);
}

TEST(BenchOptionsTest, AcceptsGnuLongForms) {
  auto o = Parse({"--readers=2", "--size", "64", "--seconds=1.5", "--throughput", "10",
                  "--time=mcs", "--maxQs=1", "--overflow=drop"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->readers, 2);
  EXPECT_DOUBLE_EQ(o->seconds, 1.5);
  EXPECT_EQ(o->mode(), BenchMode::kRate);
  EXPECT_EQ(o->time_unit, TimeUnit::kUs);
  EXPECT_EQ(o->channels.max_qs, 1);
  EXPECT_EQ(o->channels.overflow, OverflowPolicy::kDrop);
}

TEST(BenchOptionsTest, DefaultLatencyRangeFollowsTimeUnit) {
  auto ms = Parse({"-writers", "1", "-records", "10"});
  ASSERT_TRUE(ms.ok());
  EXPECT_EQ(*ms->max_latency, 180000);
  auto ns = Parse({"-writers", "1", "-records", "10", "-time", "ns"});
  ASSERT_TRUE(ns.ok());
  EXPECT_EQ(*ns->max_latency, 180000LL * 1000 * 1000);
  EXPECT_EQ(*ns->min_latency, 0);
}

TEST(BenchOptionsTest, RejectsBadOptionsWithTheOptionName) {
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  } cases[] = {
      {{"-records", "10"}, "-writers"},
      {{"-writers", "1"}, "-records"},
      {{"-writers", "x", "-records", "1"}, "writers"},
      {{"-writers", "-3", "-records", "1"}, "writers"},
      {{"-writers", "1", "-records", "0"}, "records"},
      {{"-writers", "1", "-seconds", "0"}, "seconds"},
      {{"-writers", "1", "-records", "5", "-time", "hours"}, "time"},
      {{"-writers", "1", "-records", "5", "-mpscqueue", "yes"}, "mpscqueue"},
      {{"-writers", "1", "-seconds", "5", "-throughput", "0"}, "throughput"},
      {{"-writers", "1", "-seconds", "5", "-throughput", "10"}, "size"},
      {{"-writers", "1", "-records", "5", "-bogus", "1"}, "unknown option"},
      {{"-writers", "1", "-records"}, "needs a value"},
      {{"-writers", "1", "-writers", "2", "-records", "3"}, "more than once"},
      {{"-writers", "1", "-records", "5", "-minlatency", "10", "-maxlatency", "5"}, "minlatency"},
      {{"-writers", "1", "-records", "5", "-class", "kafka"}, "class"},
      {{"-writers", "1", "-records", "5", "stray"}, "unexpected argument"},
      {{"-writers", "1", "-records", "5", "-interval", "0.001"}, "[0.01, 86400]"},
      {{"-writers", "1", "-records", "5", "-interval", "x"}, "interval"},
  };
  for (const Case& c : cases) {
    auto o = Parse(c.args);
    ASSERT_FALSE(o.ok()) << c.expect;
    EXPECT_NE(std::string(o.status().message()).find(c.expect), std::string::npos)
        << o.status().message();
  }
}

TEST(BenchOptionsTest, IntervalTakesFractionsOfASecond) {
  auto o = Parse({"-writers", "1", "-seconds", "2", "-interval", "0.25"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->interval_ms, 250);
  o = Parse({"-writers", "1", "-seconds", "2", "-interval", "0.01"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->interval_ms, 10);  // the daemon's reportingIntervalMs floor
  o = Parse({"-writers", "1", "-seconds", "2"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->interval_ms, 5000);  // SBK's default
}

// SBK habits get perld's way, not just "unknown option".
TEST(BenchOptionsTest, SbkOptionsPerldDoesNotTakeGetAHint) {
  const struct {
    const char* option;
    const char* hint;
  } cases[] = {
      {"-out", "-csvfile"},          {"-ram", "aggregator"},         {"-ramport", "9717"},
      {"-sync", "nothing to flush"}, {"-wstep", "perlctl load"},     {"-rsec", "perlctl load"},
      {"-ro", "-readers N"},         {"-millisecsleep", "--idleNS"}, {"-thread", "native"}};
  for (const auto& c : cases) {
    auto o = Parse({"-writers", "1", "-records", "5", c.option, "1"});
    ASSERT_FALSE(o.ok()) << c.option;
    const std::string message(o.status().message());
    EXPECT_NE(message.find("is an SBK option perld does not take"), std::string::npos) << message;
    EXPECT_NE(message.find(c.hint), std::string::npos) << message;
  }
}

TEST(BenchOptionsTest, HelpNeedsNoOtherOption) {
  auto o = Parse({"-help"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->help);
  EXPECT_NE(BenchUsage().find("-mpscqueue"), std::string::npos);
}

}  // namespace
}  // namespace perld::bench
