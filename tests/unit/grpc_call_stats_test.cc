// GrpcCallStats: a method name is a label value, so only methods the
// daemon's protos define get a series; any other name a caller sends (the
// generic SBP service receives every unregistered one) counts as "other".
#include "daemon/service/grpc_call_stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "daemon/http/metric_families.h"
#include "perld/v1/perld.pb.h"
#include "sbp/sbp.pb.h"

namespace perld::service {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(GrpcCallStatsTest, UnknownMethodNamesShareOneSeries) {
  // The generated descriptors are registered by linking their messages.
  const v1::GetRunRequest touch_perld;
  const ::Version touch_sbp;
  GrpcCallStats stats;
  stats.Count("perld.v1.Query/GetRun", 0);
  stats.Count("Service/getVersion", 0);
  stats.Count("grpc.health.v1.Health/Check", 0);
  for (int i = 0; i < 1000; ++i) stats.Count("attacker/m" + std::to_string(i), 12);
  stats.Count("perld.v1.Query/NoSuchMethod", 12);
  const std::string text = http::FamiliesText(stats.Collect());
  EXPECT_THAT(text, HasSubstr("method=\"perld.v1.Query/GetRun\""));
  EXPECT_THAT(text, HasSubstr("method=\"Service/getVersion\""));
  EXPECT_THAT(text, HasSubstr("method=\"grpc.health.v1.Health/Check\""));
  EXPECT_THAT(text,
              HasSubstr("perld_grpc_requests_total{method=\"other\",code=\"UNIMPLEMENTED\"} 1001"));
  EXPECT_THAT(text, Not(HasSubstr("attacker")));
  EXPECT_THAT(text, Not(HasSubstr("NoSuchMethod")));
}

}  // namespace
}  // namespace perld::service
