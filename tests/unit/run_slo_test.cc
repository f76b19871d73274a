// The daemon's SLO evaluation (run_slo.h): the same terms perlctl check
// reads, on a run's total, with the run's unit, never a percentile from a
// total that is not exact; states while running and once ended; the term
// that failed for good.
#include "daemon/runs/run_slo.h"

#include <gtest/gtest.h>

namespace perld::runs {
namespace {

RunSpec Spec(const std::string& slo) {
  RunSpec spec;
  spec.latency.time_unit = TimeUnit::kUs;
  spec.slo = slo;
  return spec;
}

// 1,000 records over 2 s; p99 1,999 us, p99.9 2,001 us; one invalid.
LatencySnapshot Total() {
  LatencySnapshot s;
  s.records = 1'000;
  s.valid = 999;
  s.invalid = 1;
  s.min_latency = 3;
  s.max_latency = 2'500;
  s.total_latency = int64_t{999} * 12;
  s.percents = {99, 99.9};
  s.values = {1'999, 2'001};
  s.counts = {1, 1};
  return s;
}

TEST(RunSloTest, MalformedExpressionsAreRefusedNamingTheTerm) {
  EXPECT_TRUE(CheckRunSlo(Spec("")).ok());
  EXPECT_TRUE(CheckRunSlo(Spec("p99<=2ms, invalid=0")).ok());
  const absl::Status bad = CheckRunSlo(Spec("p99<=2ms,p99.9<=5parsecs"));
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "slo: 'p99.9<=5parsecs': unknown unit 'parsecs' (ns, us, mcs, ms, s)");
}

TEST(RunSloTest, AsksForThePercentilesOfItsTerms) {
  EXPECT_EQ(SloPercents(Spec("p99<=2ms,max<=1s,p99.9<=5ms,invalid=0")),
            (std::vector<double>{99, 99.9}));
  EXPECT_TRUE(SloPercents(Spec("")).empty());
  EXPECT_TRUE(SloPercents(Spec("p99<=")).empty());
}

TEST(RunSloTest, HoldingAndFailingWhileRunningPassedAndFailedOnceEnded) {
  const RunSpec holds = Spec("p99<=2ms,records>=1000,rate>=400");
  RunSloVerdict v = EvaluateRunSlo(holds, Total(), 2.0, true, false, 7);
  EXPECT_EQ(v.status.state, SloState::kHolding);
  EXPECT_EQ(v.status.window, 7);
  ASSERT_EQ(v.status.verdicts.size(), 3u);
  EXPECT_EQ(v.status.verdicts[0].term, "p99<=2ms");
  EXPECT_TRUE(v.status.verdicts[0].held);
  EXPECT_EQ(v.status.verdicts[0].line, "PASS p99<=2ms: 1999 us (1.999 ms; the limit 2 ms)");
  EXPECT_EQ(v.status.verdicts[2].line, "PASS rate>=400: 500.0 records/s");
  EXPECT_TRUE(v.failed_for_good.empty());
  EXPECT_EQ(EvaluateRunSlo(holds, Total(), 2.0, true, true, 7).status.state, SloState::kPassed);

  const RunSpec fails = Spec("p99.9<=2ms,records>=1000");
  EXPECT_EQ(EvaluateRunSlo(fails, Total(), 2.0, true, false, 7).status.state, SloState::kFailing);
  v = EvaluateRunSlo(fails, Total(), 2.0, true, true, 7);
  EXPECT_EQ(v.status.state, SloState::kFailed);
  EXPECT_FALSE(v.status.verdicts[0].held);
  EXPECT_TRUE(v.failed_for_good.empty());  // a percentile may recover
}

TEST(RunSloTest, NamesTheFirstTermThatFailedForGood) {
  const RunSloVerdict v =
      EvaluateRunSlo(Spec("p99.9<=2ms,max<=2ms,invalid=0"), Total(), 2.0, true, false, 3);
  EXPECT_EQ(v.status.state, SloState::kFailing);
  EXPECT_EQ(v.failed_for_good, "max<=2ms: 2500 us (2.5 ms; the limit 2 ms)");
}

TEST(RunSloTest, NoPercentileFromATotalThatIsNotExact) {
  LatencySnapshot total = Total();
  RunSloVerdict v = EvaluateRunSlo(Spec("p99<=2ms,records>=1000"), total, 2.0,
                                   /*exact=*/false, true, 3);
  EXPECT_EQ(v.status.state, SloState::kFailed);
  EXPECT_FALSE(v.status.verdicts[0].held);
  EXPECT_NE(v.status.verdicts[0].line.find("cannot be measured: not exact"), std::string::npos)
      << v.status.verdicts[0].line;
  EXPECT_TRUE(v.status.verdicts[1].held);  // the counters stay exact
  total.percentiles_exact = false;
  v = EvaluateRunSlo(Spec("p99<=2ms"), total, 2.0, true, true, 3);
  EXPECT_FALSE(v.status.verdicts[0].held);
}

TEST(RunSloTest, ARunWithoutAnSloHasNoVerdict) {
  const RunSloVerdict v = EvaluateRunSlo(Spec(""), Total(), 2.0, true, true, 3);
  EXPECT_EQ(v.status.state, SloState::kNone);
  EXPECT_TRUE(v.status.verdicts.empty());
}

}  // namespace
}  // namespace perld::runs
