#include "daemon/common/slo.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace perld {
namespace {

using Metric = SloTerm::Metric;
using Op = SloTerm::Op;

TEST(SloTest, ParsesEveryMetricOperatorAndUnit) {
  absl::StatusOr<std::vector<SloTerm>> terms = ParseSlo(
      " p99 <= 2ms, p99.9<5us ,invalid=0,records>=1000000,rate>50000,max==3s,"
      "min>=10ns,avg<=7mcs,P50<=40");
  ASSERT_TRUE(terms.ok()) << terms.status();
  ASSERT_EQ(terms->size(), 9u);
  const SloTerm& p99 = (*terms)[0];
  EXPECT_EQ(p99.text, "p99<=2ms");
  EXPECT_EQ(p99.metric, Metric::kPercentile);
  EXPECT_EQ(p99.percent, 99);
  EXPECT_EQ(p99.op, Op::kLe);
  EXPECT_EQ(p99.value, 2);
  EXPECT_EQ(p99.value_unit_ns, 1'000'000);
  EXPECT_EQ((*terms)[1].percent, 99.9);
  EXPECT_EQ((*terms)[1].op, Op::kLt);
  EXPECT_EQ((*terms)[1].value_unit_ns, 1'000);
  EXPECT_EQ((*terms)[2].metric, Metric::kInvalid);
  EXPECT_EQ((*terms)[2].op, Op::kEq);
  EXPECT_EQ((*terms)[3].metric, Metric::kRecords);
  EXPECT_EQ((*terms)[3].op, Op::kGe);
  EXPECT_EQ((*terms)[4].metric, Metric::kRate);
  EXPECT_EQ((*terms)[4].op, Op::kGt);
  EXPECT_EQ((*terms)[5].metric, Metric::kMax);
  EXPECT_EQ((*terms)[5].op, Op::kEq);
  EXPECT_EQ((*terms)[5].value_unit_ns, 1'000'000'000);
  EXPECT_EQ((*terms)[6].metric, Metric::kMin);
  EXPECT_EQ((*terms)[7].value_unit_ns, 1'000);  // SBK's mcs
  EXPECT_EQ((*terms)[8].value_unit_ns, 0);      // bare: the run's unit
}

TEST(SloTest, MalformedTermsAreRefusedNamingTheTerm) {
  const struct {
    const char* expression;
    const char* says;
  } cases[] = {
      {"", "empty term"},
      {"p99<=2ms,", "empty term"},
      {"p99", "METRIC OP VALUE"},
      {"<=2ms", "METRIC OP VALUE"},
      {"p101<=2ms", "unknown metric"},
      {"p99x<=2ms", "unknown metric"},
      {"latency<=2ms", "unknown metric"},
      {"p99<=", "a number"},
      {"p99<=-1", "a number"},
      {"p99<=2hours", "unknown unit 'hours'"},
      {"records>=10ms", "plain number"},
      {"rate>=5k", "plain number"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<std::vector<SloTerm>> terms = ParseSlo(c.expression);
    ASSERT_FALSE(terms.ok()) << c.expression;
    EXPECT_NE(std::string(terms.status().message()).find(c.says), std::string::npos)
        << c.expression << ": " << terms.status().message();
  }
}

SloFacts MicrosecondRun() {
  SloFacts f;
  f.unit_ns = 1'000;
  f.unit = "us";
  f.records = 1000;
  f.valid = 999;
  f.invalid = 1;
  f.min = 3;
  f.max = 2'500;
  f.avg = 12.5;
  f.rate = 50'000;
  f.percentiles = {{99, 1'999}, {99.9, 2'001}};
  return f;
}

TEST(SloTest, TermsAreEvaluatedInTheRunsUnit) {
  absl::StatusOr<std::vector<SloTerm>> terms = ParseSlo(
      "p99<=2ms,p99.9<=2ms,invalid=0,records>=1000,rate>=50000,max<2.5ms,min>=3,"
      "avg<=12500ns");
  ASSERT_TRUE(terms.ok()) << terms.status();
  const std::vector<SloVerdict> v = EvaluateSlo(*terms, MicrosecondRun());
  ASSERT_EQ(v.size(), 8u);
  EXPECT_TRUE(v[0].held);   // 1999 us <= 2000 us
  EXPECT_FALSE(v[1].held);  // 2001 us > 2000 us
  EXPECT_EQ(v[1].threshold, 2'000);
  EXPECT_EQ(v[1].line, "FAIL p99.9<=2ms: 2001 us (2.001 ms; the limit 2 ms)");
  EXPECT_FALSE(v[2].held);  // one invalid latency
  EXPECT_EQ(v[2].line, "FAIL invalid=0: 1");
  EXPECT_TRUE(v[3].held);
  EXPECT_TRUE(v[4].held);
  EXPECT_EQ(v[4].line, "PASS rate>=50000: 50000.0 records/s");
  EXPECT_FALSE(v[5].held);  // 2500 us is not < 2500 us
  EXPECT_TRUE(v[6].held);
  EXPECT_TRUE(v[7].held);  // 12.5 us <= 12500 ns
}

// abortOnFail stops a run only on failures no later record can undo.
TEST(SloTest, OnlyFailuresOfMonotoneMetricsAreFinal) {
  absl::StatusOr<std::vector<SloTerm>> terms = ParseSlo(
      "invalid=0,records<=999,max<2.5ms,min>=3,p99.9<=2ms,avg<=1ns,rate>=1e9,records=2000,"
      "records=500,p100<=1ms,p0>5,min=3,min=0,records>=1000,max>=1s");
  ASSERT_TRUE(terms.ok()) << terms.status();
  SloFacts facts = MicrosecondRun();
  facts.percentiles[0] = facts.min;  // as perld answers p0 and p100
  facts.percentiles[100] = facts.max;
  const std::vector<SloVerdict> v = EvaluateSlo(*terms, facts);
  ASSERT_EQ(v.size(), 15u);
  const std::vector<bool> want = {
      true,   // invalid=0 with 1 invalid: invalid only grows
      true,   // records<=999 with 1000
      true,   // max<2.5ms with max 2.5 ms
      false,  // min>=3 holds (min 3)
      false,  // p99.9 can recover
      false,  // avg can recover
      false,  // rate can recover
      false,  // records=2000 with 1000: more may come
      true,   // records=500 with 1000: already past
      true,   // p100 is the maximum
      true,   // p0 is the minimum: 3 is not > 5 and only shrinks
      false,  // min=3 holds
      false,  // min=0 with min 3: it may still shrink to 0
      false,  // records>=1000 holds
      false,  // max>=1s fails but may still grow to it
  };
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(SloFailureIsFinal(v[i]), want[i]) << v[i].line;
  }
}

TEST(SloTest, WhatCannotBeMeasuredFailsAndSaysWhy) {
  SloFacts f = MicrosecondRun();
  f.percentiles.clear();
  f.no_percentiles = "not exact: the run total outgrew its memory budget";
  absl::StatusOr<std::vector<SloTerm>> terms = ParseSlo("p99<=2ms,records>=1");
  ASSERT_TRUE(terms.ok());
  const std::vector<SloVerdict> v = EvaluateSlo(*terms, f);
  EXPECT_FALSE(v[0].held);
  EXPECT_FALSE(v[0].measured.has_value());
  EXPECT_NE(v[0].line.find("cannot be measured: not exact"), std::string::npos) << v[0].line;
  EXPECT_TRUE(v[1].held);
  f.valid = 0;
  terms = ParseSlo("max<=1s");
  ASSERT_TRUE(terms.ok());
  EXPECT_NE(EvaluateSlo(*terms, f)[0].line.find("no latency yet"), std::string::npos);
}

TEST(SloTest, JunitHasOneTestcasePerTermAndEscapes) {
  absl::StatusOr<std::vector<SloTerm>> terms = ParseSlo("p99<=2ms,invalid=0");
  ASSERT_TRUE(terms.ok());
  const std::string xml = SloJunit("a<b>&\"c\"", EvaluateSlo(*terms, MicrosecondRun()));
  EXPECT_NE(xml.find("<testsuites tests=\"2\" failures=\"1\">"), std::string::npos) << xml;
  EXPECT_NE(xml.find("name=\"perld check a&lt;b&gt;&amp;&quot;c&quot;\""), std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<testcase classname=\"perld.slo\" name=\"p99&lt;=2ms\" time=\"0\"/>"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<failure message=\"FAIL invalid=0: 1\">"), std::string::npos) << xml;
}

TEST(SloTest, HumanLatencyPicksAReadableUnit) {
  EXPECT_EQ(HumanLatency(830, 1), "830 ns");
  EXPECT_EQ(HumanLatency(1830, 1'000), "1.83 ms");
  EXPECT_EQ(HumanLatency(2500, 1'000'000), "2.5 s");
  EXPECT_EQ(HumanLatency(12.5, 1'000), "12.5 us");
}

}  // namespace
}  // namespace perld
