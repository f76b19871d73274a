// The daemon's command line: both flag spellings, --check-config's optional
// FILE, usage errors naming the flag, --help, and flags over the file.
#include "daemon/config/daemon_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "daemon/config/config_loader.h"

namespace perld::config {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(const std::vector<std::string>& args) {
  absl::StatusOr<DaemonFlags> flags = ParseDaemonFlags(args);
  EXPECT_EQ(flags.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(flags.status().message());
}

TEST(DaemonFlagsTest, NoArgumentsSetNothing) {
  absl::StatusOr<DaemonFlags> flags = ParseDaemonFlags({});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_FALSE(flags->config_file || flags->grpc_listen || flags->http_listen || flags->state_dir ||
               flags->log_level);
  EXPECT_FALSE(flags->check_config || flags->version || flags->help);
}

TEST(DaemonFlagsTest, AcceptsSpaceAndEqualsForms) {
  absl::StatusOr<DaemonFlags> flags =
      ParseDaemonFlags({"--config", "/etc/perld.yaml", "--grpc-listen=[::1]:1", "--http-listen",
                        "0.0.0.0:2", "--state-dir=/var/lib/perld", "--log-level", "debug"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->config_file, "/etc/perld.yaml");
  EXPECT_EQ(flags->grpc_listen, "[::1]:1");
  EXPECT_EQ(flags->http_listen, "0.0.0.0:2");
  EXPECT_EQ(flags->state_dir, "/var/lib/perld");
  EXPECT_EQ(flags->log_level, log::Level::kDebug);
  EXPECT_FALSE(flags->check_config);
}

TEST(DaemonFlagsTest, ALaterFlagWins) {
  absl::StatusOr<DaemonFlags> flags = ParseDaemonFlags({"--log-level=info", "--log-level=error"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->log_level, log::Level::kError);
}

TEST(DaemonFlagsTest, CheckConfigTakesAnOptionalFile) {
  absl::StatusOr<DaemonFlags> bare = ParseDaemonFlags({"--check-config"});
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->check_config);
  EXPECT_FALSE(bare->config_file);

  absl::StatusOr<DaemonFlags> next = ParseDaemonFlags({"--check-config", "a.yaml"});
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->check_config);
  EXPECT_EQ(next->config_file, "a.yaml");

  absl::StatusOr<DaemonFlags> equals = ParseDaemonFlags({"--check-config=b.yaml", "--help"});
  ASSERT_TRUE(equals.ok());
  EXPECT_EQ(equals->config_file, "b.yaml");
  EXPECT_TRUE(equals->help);

  // The next argument is a flag, so it is not FILE; the file comes from --config.
  absl::StatusOr<DaemonFlags> with_config =
      ParseDaemonFlags({"--check-config", "--config", "c.yaml"});
  ASSERT_TRUE(with_config.ok()) << with_config.status();
  EXPECT_TRUE(with_config->check_config);
  EXPECT_EQ(with_config->config_file, "c.yaml");

  absl::StatusOr<DaemonFlags> same = ParseDaemonFlags({"--config=d.yaml", "--check-config=d.yaml"});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->config_file, "d.yaml");

  EXPECT_EQ(ErrorOf({"--config", "e.yaml", "--check-config", "f.yaml"}),
            "--check-config 'f.yaml' and --config 'e.yaml' name different files");
}

TEST(DaemonFlagsTest, UsageErrorsNameTheFlag) {
  EXPECT_EQ(ErrorOf({"--grpc-listn", "x"}),
            "unknown flag '--grpc-listn' (did you mean '--grpc-listen'?)");
  EXPECT_EQ(ErrorOf({"--frobnicate"}), "unknown flag '--frobnicate'");
  EXPECT_EQ(ErrorOf({"--config"}), "flag --config needs a value");
  EXPECT_EQ(ErrorOf({"--config="}), "flag --config needs a value");
  EXPECT_EQ(ErrorOf({"--state-dir", "--log-level", "info"}), "flag --state-dir needs a value");
  EXPECT_EQ(ErrorOf({"--help=yes"}), "flag --help takes no value");
  EXPECT_EQ(ErrorOf({"--log-level", "loud"}),
            "flag --log-level: expected one of debug, info, warning, error, got 'loud'");
  EXPECT_EQ(ErrorOf({"serve"}),
            "unexpected argument 'serve' (flags start with --; `perld bench` runs a benchmark)");
  EXPECT_EQ(ErrorOf({"-config", "x"}),
            "unexpected argument '-config' (flags start with --; `perld bench` runs a benchmark)");
}

TEST(DaemonFlagsTest, VersionAndHelp) {
  absl::StatusOr<DaemonFlags> flags = ParseDaemonFlags({"--version", "--help"});
  ASSERT_TRUE(flags.ok());
  EXPECT_TRUE(flags->version);
  EXPECT_TRUE(flags->help);
}

TEST(DaemonFlagsTest, UsageListsEveryFlagWithItsDefault) {
  const std::string usage = DaemonUsage();
  for (const char* flag :
       {"--config FILE", "--grpc-listen HOST:PORT", "--http-listen HOST:PORT", "--state-dir DIR",
        "--log-level LEVEL", "--check-config [FILE]", "--version", "--help"}) {
    EXPECT_THAT(usage, HasSubstr(flag));
  }
  EXPECT_THAT(usage, HasSubstr("(default 127.0.0.1:9717"));
  EXPECT_THAT(usage, HasSubstr("(default 127.0.0.1:9719)"));
  EXPECT_THAT(usage, HasSubstr("(default info)"));
  EXPECT_THAT(usage, HasSubstr("./perld-state"));
  EXPECT_THAT(usage, HasSubstr("perld bench [options]"));
  EXPECT_THAT(usage, HasSubstr("perld --check-config"));
}

TEST(DaemonFlagsTest, FlagsOverrideTheFile) {
  absl::StatusOr<DaemonConfig> config = LoadConfigText(
      "grpcListen: 127.0.0.1:1\nhttpListen: 127.0.0.1:2\nlogLevel: error\n"
      "stateDir: /from/file\nmaxQs: 3\n",
      "perld.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<DaemonFlags> flags = ParseDaemonFlags(
      {"--grpc-listen=[::1]:9717", "--state-dir", "/from/flag", "--log-level", "debug"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  ASSERT_TRUE(ApplyFlags(*flags, &*config).ok());
  EXPECT_EQ(config->grpc_listen, "[::1]:9717");
  EXPECT_EQ(config->http_listen, "127.0.0.1:2");  // not given: the file's
  EXPECT_EQ(config->state_dir, "/from/flag");
  EXPECT_EQ(config->log_level, log::Level::kDebug);
  EXPECT_EQ(config->channels.max_qs, 3);
}

TEST(DaemonFlagsTest, ApplyFlagsValidatesListenAddressesAndChangesNothingOnError) {
  DaemonFlags flags;
  flags.grpc_listen = "::1:9717";
  flags.http_listen = "localhost";
  flags.state_dir = "/elsewhere";
  DaemonConfig config;
  const absl::Status status = ApplyFlags(flags, &config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "flag --grpc-listen: '::1:9717': an IPv6 host needs brackets, e.g. [::1]:9717\n"
            "flag --http-listen: 'localhost': expected HOST:PORT, e.g. 127.0.0.1:9717 or "
            "[::1]:9717");
  EXPECT_TRUE(config == DaemonConfig{});
}

}  // namespace
}  // namespace perld::config
