// ResolveStateDir: the configured directory, then systemd's $STATE_DIRECTORY
// (first of a colon-separated list), then ./perld-state.
#include "daemon/config/state_dir.h"

#include <gtest/gtest.h>

namespace perld::config {
namespace {

TEST(StateDirTest, ConfiguredDirectoryWins) {
  DaemonConfig config;
  config.state_dir = "/from/flag";
  EXPECT_EQ(ResolveStateDir(config, "/var/lib/perld"), "/from/flag");
  EXPECT_EQ(ResolveStateDir(config, nullptr), "/from/flag");
}

TEST(StateDirTest, ThenSystemdStateDirectoryFirstEntry) {
  const DaemonConfig config;
  EXPECT_EQ(ResolveStateDir(config, "/var/lib/perld"), "/var/lib/perld");
  EXPECT_EQ(ResolveStateDir(config, "/var/lib/perld:/var/lib/perld-extra"), "/var/lib/perld");
  EXPECT_EQ(ResolveStateDir(config, ":/var/lib/second"), "/var/lib/second");
}

TEST(StateDirTest, ThenTheWorkingDirectory) {
  const DaemonConfig config;
  EXPECT_EQ(ResolveStateDir(config, nullptr), "./perld-state");
  EXPECT_EQ(ResolveStateDir(config, ""), "./perld-state");
  EXPECT_EQ(ResolveStateDir(config, ":"), "./perld-state");
}

TEST(GrpcUnixTest, ConfigThenSystemdRuntimeDirectoryThenOff) {
  DaemonConfig config;
  EXPECT_EQ(ResolveGrpcUnix(config, nullptr), "");
  EXPECT_EQ(ResolveGrpcUnix(config, ""), "");
  EXPECT_EQ(ResolveGrpcUnix(config, "/run/perld"), "/run/perld/perld.sock");
  EXPECT_EQ(ResolveGrpcUnix(config, "/run/perld:/run/other"), "/run/perld/perld.sock");
  config.grpc_unix = "/tmp/p.sock";
  EXPECT_EQ(ResolveGrpcUnix(config, "/run/perld"), "/tmp/p.sock");
}

}  // namespace
}  // namespace perld::config
