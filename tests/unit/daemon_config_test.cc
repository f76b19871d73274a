// The configuration file: defaults, every key, every kind of refusal with its
// exact FILE:LINE: message, the effective-config round trip, and
// config/perld.yaml (loads to the defaults, documents every key).
#include "daemon/config/daemon_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/config/config_loader.h"
#include "daemon/config/config_reload.h"
#include "daemon/config/config_render.h"
#include "tests/unit/every_key_config.h"

namespace perld::config {
namespace {

using ::testing::HasSubstr;
using namespace std::string_literals;
using ::testing::StartsWith;

absl::StatusOr<DaemonConfig> Load(const std::string& text) {
  return LoadConfigText(text, "perld.yaml");
}

// The message of a refused `text` (and that it was refused as InvalidArgument).
std::string ErrorOf(const std::string& text) {
  absl::StatusOr<DaemonConfig> config = Load(text);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(config.status().message());
}

// Equality with a readable diff on failure.
void ExpectSame(const DaemonConfig& actual, const DaemonConfig& expected) {
  EXPECT_EQ(RenderEffectiveConfig(actual), RenderEffectiveConfig(expected));
  EXPECT_TRUE(actual == expected);
}

std::string ReadSourceFile(const std::string& relative) {
  std::ifstream in(std::string(PERLD_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(DaemonConfigTest, EmptyAndCommentOnlyFilesAreTheDefaults) {
  for (const char* text : {"", "\n\n", "# nothing here\n  # still nothing\n", "---\n", "~\n"}) {
    absl::StatusOr<DaemonConfig> config = Load(text);
    ASSERT_TRUE(config.ok()) << config.status();
    ExpectSame(*config, DaemonConfig{});
  }
}

TEST(DaemonConfigTest, DefaultsAreSbkDefaults) {
  const DaemonConfig c;
  EXPECT_EQ(c.grpc_listen, "127.0.0.1:9717");
  EXPECT_EQ(c.http_listen, "127.0.0.1:9719");
  EXPECT_EQ(c.latency.time_unit, TimeUnit::kMs);
  EXPECT_EQ(c.latency.max_latency, DefaultMaxLatency(TimeUnit::kMs));
  EXPECT_EQ(c.latency.percentiles, DefaultPercentiles());
  EXPECT_EQ(c.channels.queue, QueueKind::kMpsc);
  EXPECT_EQ(c.reporting_interval_ms, 5000);
}

TEST(DaemonConfigTest, ParsesEveryKey) {
  absl::StatusOr<DaemonConfig> config = Load(testing::kEveryKeyYaml);
  ASSERT_TRUE(config.ok()) << config.status();
  ExpectSame(*config, testing::EveryKeyConfig());
  // Every key of the loader changed its field: the text really covers them all.
  // (All but remoteWrite.bearerTokenFile, which excludes basicAuth.)
  const ReloadDecision changes = DecideReload(DaemonConfig{}, *config);
  EXPECT_EQ(changes.applied.size() + changes.needs_restart.size() + 1, ConfigKeyNames().size());
}

TEST(DaemonConfigTest, MaxLatencyDefaultFollowsTimeUnit) {
  absl::StatusOr<DaemonConfig> ns = Load("timeUnit: ns\n");
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_EQ(ns->latency.max_latency, 180'000'000'000);
  absl::StatusOr<DaemonConfig> us = Load("timeUnit: mcs\n");  // SBK's spelling of us
  ASSERT_TRUE(us.ok()) << us.status();
  EXPECT_EQ(us->latency.time_unit, TimeUnit::kUs);
  EXPECT_EQ(us->latency.max_latency, 180'000'000);
  absl::StatusOr<DaemonConfig> given = Load("timeUnit: ns\nmaxLatency: 1000\n");
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->latency.max_latency, 1000);
}

TEST(DaemonConfigTest, AcceptsQuotedStringsAndSignedIntegers) {
  absl::StatusOr<DaemonConfig> config = Load(
      "logLevel: 'warning'\nstateDir: \"/srv/perld state\"\nminLatency: +3\n"
      "maxQs: !!int 2\nqPerWorker: 0\npercentiles:\n  - 99.99\n  - 1e1\n  - +50\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->log_level, log::Level::kWarning);
  EXPECT_EQ(config->state_dir, "/srv/perld state");
  EXPECT_EQ(config->latency.min_latency, 3);
  EXPECT_EQ(config->channels.max_qs, 2);
  EXPECT_EQ(config->channels.q_per_worker, 0);  // allowed when maxQs > 0
  EXPECT_EQ(config->latency.percentiles, (std::vector<double>{10, 50, 99.99}));
}

TEST(DaemonConfigTest, EmptySectionIsItsDefaultsAndEmptyPercentilesAreNone) {
  absl::StatusOr<DaemonConfig> config = Load("retention:\nlimits: {}\npercentiles: []\n");
  ASSERT_TRUE(config.ok()) << config.status();
  DaemonConfig expected;
  expected.latency.percentiles.clear();
  ExpectSame(*config, expected);
}

// --- Refusals: exact messages ----------------------------------------------

TEST(DaemonConfigTest, UnknownKeySuggestsTheNearestKnownKey) {
  EXPECT_EQ(ErrorOf("# perld\n\nlogLevel: info\n\nmaxQs: 0\n\nreportingIntervallMs: 1000\n"),
            "perld.yaml:7: unknown key 'reportingIntervallMs' (did you mean "
            "'reportingIntervalMs'?)");
  EXPECT_EQ(ErrorOf("MAXQS: 1\n"), "perld.yaml:1: unknown key 'MAXQS' (did you mean 'maxQs'?)");
  EXPECT_EQ(ErrorOf("colour: blue\n"), "perld.yaml:1: unknown key 'colour'");
}

TEST(DaemonConfigTest, UnknownKeyInOrOutOfASectionSuggestsTheDottedName) {
  EXPECT_EQ(ErrorOf("retention:\n  maxFinishedRun: 3\n"),
            "perld.yaml:2: unknown key 'retention.maxFinishedRun' (did you mean "
            "'retention.maxFinishedRuns'?)");
  EXPECT_EQ(ErrorOf("maxWatchers: 3\n"),
            "perld.yaml:1: unknown key 'maxWatchers' (did you mean 'limits.maxWatchers'?)");
  EXPECT_EQ(ErrorOf("limits:\n  maxQs: 3\n"),
            "perld.yaml:2: unknown key 'limits.maxQs' (did you mean 'maxQs'?)");
  EXPECT_EQ(ErrorOf("grpc:\n  maxThread: 3\n"),
            "perld.yaml:2: unknown key 'grpc.maxThread' (did you mean 'grpc.maxThreads'?)");
  EXPECT_EQ(ErrorOf("retension:\n  maxBytes: 3\n"),
            "perld.yaml:1: unknown key 'retension' (did you mean 'retention'?)");
  EXPECT_EQ(ErrorOf("limits.maxWatchers: 3\n"),
            "perld.yaml:1: unknown key 'limits.maxWatchers' (write 'maxWatchers:' indented "
            "under 'limits:')");
}

TEST(DaemonConfigTest, WrongTypesNameTheKeyAndTheValue) {
  EXPECT_EQ(ErrorOf("logLevel: info\n\nmaxQs: abc\n"),
            "perld.yaml:3: key 'maxQs': expected an integer, got 'abc'");
  EXPECT_EQ(ErrorOf("maxQs: 1.5\n"), "perld.yaml:1: key 'maxQs': expected an integer, got '1.5'");
  EXPECT_EQ(ErrorOf("maxQs: 1e3\n"), "perld.yaml:1: key 'maxQs': expected an integer, got '1e3'");
  EXPECT_EQ(ErrorOf("maxQs: 0x10\n"), "perld.yaml:1: key 'maxQs': expected an integer, got '0x10'");
  EXPECT_EQ(ErrorOf("maxQs: \"10\"\n"),
            "perld.yaml:1: key 'maxQs': expected an integer, got the string \"10\"");
  EXPECT_EQ(ErrorOf("maxQs:\n"),
            "perld.yaml:1: key 'maxQs': expected an integer, got an "
            "empty value");
  EXPECT_EQ(ErrorOf("maxQs: [1]\n"),
            "perld.yaml:1: key 'maxQs': expected an integer, got a sequence");
  EXPECT_EQ(ErrorOf("grpcListen: {host: x}\n"),
            "perld.yaml:1: key 'grpcListen': expected a string, got a mapping");
  EXPECT_EQ(ErrorOf("logLevel: verbose\n"),
            "perld.yaml:1: key 'logLevel': expected one of debug, info, warning, error, got "
            "'verbose'");
  EXPECT_EQ(ErrorOf("timeUnit: s\n"),
            "perld.yaml:1: key 'timeUnit': expected one of ms, us, ns, mcs, got 's'");
  EXPECT_EQ(ErrorOf("overflow: wait\n"),
            "perld.yaml:1: key 'overflow': expected one of block, drop, got 'wait'");
  EXPECT_EQ(ErrorOf("queue: lockfree\n"),
            "perld.yaml:1: key 'queue': expected one of mpsc, library, got 'lockfree'");
  EXPECT_EQ(ErrorOf("percentiles: 99\n"),
            "perld.yaml:1: key 'percentiles': expected a sequence of percents, e.g. [50, 99, "
            "99.9], got '99'");
  EXPECT_EQ(ErrorOf("retention: 5\n"),
            "perld.yaml:1: key 'retention': expected a mapping of retention.* keys, got '5'");
}

TEST(DaemonConfigTest, OutOfRangeNamesTheRange) {
  EXPECT_EQ(ErrorOf("logLevel: info\nmaxQs: 0\n\n# the interval\nreportingIntervalMs: 0\n"),
            "perld.yaml:5: key 'reportingIntervalMs': 0 is outside [10, 86400000]");
  EXPECT_EQ(ErrorOf("maxPendingPerWorker: -1\n"),
            "perld.yaml:1: key 'maxPendingPerWorker': -1 is outside [2, 4294967296]");
  EXPECT_EQ(ErrorOf("maxQs: 4097\n"), "perld.yaml:1: key 'maxQs': 4097 is outside [0, 4096]");
  EXPECT_EQ(ErrorOf("minLatency: -1\n"),
            "perld.yaml:1: key 'minLatency': -1 is outside [0, 4611686018427387903]");
  EXPECT_EQ(ErrorOf("retention:\n  maxBytes: 1000\n"),
            "perld.yaml:2: key 'retention.maxBytes': 1000 is outside [1048576, 1099511627776]");
  // The HTTP header deadline stays within a second (issue 24).
  EXPECT_EQ(ErrorOf("http:\n  headerTimeoutMs: 5000\n"),
            "perld.yaml:2: key 'http.headerTimeoutMs': 5000 is outside [50, 1000]");
  EXPECT_EQ(ErrorOf("http:\n  handlerThreads: 0\n"),
            "perld.yaml:2: key 'http.handlerThreads': 0 is outside [1, 64]");
}

TEST(DaemonConfigTest, IntegersBeyondInt64AreRefused) {
  EXPECT_EQ(ErrorOf("maxArraySizeMB: 99999999999999999999\n"),
            "perld.yaml:1: key 'maxArraySizeMB': 99999999999999999999 is outside [1, "
            "1099511627776]");
  EXPECT_EQ(ErrorOf("minLatency: -9223372036854775809\n"),
            "perld.yaml:1: key 'minLatency': -9223372036854775809 is outside [0, "
            "4611686018427387903]");
}

TEST(DaemonConfigTest, PercentileErrorsNameTheElementLine) {
  EXPECT_EQ(ErrorOf("percentiles:\n  - 50\n  - abc\n"),
            "perld.yaml:3: key 'percentiles': expected a number, got 'abc'");
  EXPECT_EQ(ErrorOf("percentiles: [50, 0]\n"),
            "perld.yaml:1: key 'percentiles': 0 is outside (0, 100]");
  EXPECT_EQ(ErrorOf("percentiles: [100.5]\n"),
            "perld.yaml:1: key 'percentiles': 100.5 is outside (0, 100]");
  EXPECT_EQ(ErrorOf("percentiles:\n  - 99.9\n  - 50\n  - 99.90\n"),
            "perld.yaml:4: key 'percentiles': 99.9 is listed twice");
  EXPECT_EQ(ErrorOf("percentiles: [.nan]\n"),
            "perld.yaml:1: key 'percentiles': expected a number, got '.nan'");
  EXPECT_EQ(ErrorOf("percentiles: [inf]\n"),
            "perld.yaml:1: key 'percentiles': expected a number, got 'inf'");
}

TEST(DaemonConfigTest, ListenAddressesAreValidated) {
  absl::StatusOr<DaemonConfig> ipv6 = Load("grpcListen: '[::1]:9717'\nhttpListen: '[::]:0'\n");
  ASSERT_TRUE(ipv6.ok()) << ipv6.status();
  EXPECT_EQ(ipv6->grpc_listen, "[::1]:9717");
  EXPECT_EQ(ipv6->http_listen, "[::]:0");
  EXPECT_EQ(ErrorOf("grpcListen: ::1:9717\n"),
            "perld.yaml:1: key 'grpcListen': '::1:9717': an IPv6 host needs brackets, e.g. "
            "[::1]:9717");
  EXPECT_EQ(ErrorOf("httpListen: localhost:65536\n"),
            "perld.yaml:1: key 'httpListen': 'localhost:65536': port 65536 is outside [0, "
            "65535]");
  EXPECT_EQ(ErrorOf("grpcListen: unix:/run/perld.sock\n"),
            "perld.yaml:1: key 'grpcListen': 'unix:/run/perld.sock': unix sockets are reserved "
            "for a later release; use HOST:PORT");
}

TEST(DaemonConfigTest, CrossKeyRulesNameTheKeyTheFileGives) {
  EXPECT_EQ(ErrorOf("minLatency: 200\nmaxLatency: 100\n"),
            "perld.yaml:2: key 'maxLatency': 100 is below minLatency 200");
  EXPECT_EQ(ErrorOf("timeUnit: ms\nminLatency: 200000\n"),
            "perld.yaml:2: key 'minLatency': 200000 is above maxLatency 180000 (the default for "
            "timeUnit ms)");
  EXPECT_EQ(ErrorOf("exactLatencyPageBits: 4\n"),
            "perld.yaml:1: key 'exactLatencyPageBits': pages of 2^4 = 16 entries need "
            "exactLatencySparsePageEntries below 16 (it is 32)");
  EXPECT_EQ(ErrorOf("exactLatencyPageBits: 4\nexactLatencySparsePageEntries: 16\n"),
            "perld.yaml:2: key 'exactLatencySparsePageEntries': 16 must be below "
            "2^exactLatencyPageBits = 16");
  EXPECT_EQ(ErrorOf("maxQs: 0\nqPerWorker: 0\n"),
            "perld.yaml:2: key 'qPerWorker': 0 needs maxQs > 0 (with maxQs 0 each worker has "
            "qPerWorker >= 1 queues)");
  EXPECT_EQ(ErrorOf("tls:\n  certFile: a.pem\n"),
            "perld.yaml:2: key 'tls.certFile': tls.certFile and tls.keyFile are given together");
  EXPECT_EQ(ErrorOf("tls:\n  keyFile: a.key\n"),
            "perld.yaml:2: key 'tls.keyFile': tls.certFile and tls.keyFile are given together");
  EXPECT_EQ(ErrorOf("tls:\n  clientCaFile: ca.pem\n"),
            "perld.yaml:2: key 'tls.clientCaFile': mutual TLS needs tls.certFile and tls.keyFile");
  EXPECT_EQ(ErrorOf("upstream:\n  keyFile: a.key\n"),
            "perld.yaml:2: key 'upstream.keyFile': upstream.certFile and upstream.keyFile are "
            "given together");
  EXPECT_EQ(ErrorOf("auth:\n  sbpOpen: yes\n"),
            "perld.yaml:2: key 'auth.sbpOpen': expected true or false, got 'yes'");
  EXPECT_EQ(ErrorOf("auth:\n  metricsOpen: \"true\"\n"),
            "perld.yaml:2: key 'auth.metricsOpen': expected true or false, got the string "
            "\"true\"");
  // One cap for every percentile list (runs, GetPercentiles): the configured set within it.
  EXPECT_EQ(ErrorOf("percentiles: [50, 90, 99]\nlimits:\n  maxPercentiles: 2\n"),
            "perld.yaml:1: key 'percentiles': 3 percentiles, more than limits.maxPercentiles 2");
  EXPECT_EQ(ErrorOf("limits:\n  maxPercentiles: 10\n"),
            "perld.yaml:2: key 'limits.maxPercentiles': 10 is below the 28 default percentiles");
  EXPECT_TRUE(Load("percentiles: [50, 99]\nlimits:\n  maxPercentiles: 2\n").ok());
  // A refused key does not also fail the rules it is part of.
  EXPECT_EQ(ErrorOf("minLatency: x\nmaxLatency: 100\n"),
            "perld.yaml:1: key 'minLatency': expected an integer, got 'x'");
}

TEST(DaemonConfigTest, DuplicateKeysAreRefused) {
  EXPECT_EQ(ErrorOf("logLevel: info\nmaxQs: 1\nidleNS: 5\nmaxQs: 2\n"),
            "perld.yaml:4: duplicate key 'maxQs' (first on line 2)");
  EXPECT_EQ(ErrorOf("limits:\n  maxWatchers: 1\nlimits:\n  maxWatchers: 2\n"),
            "perld.yaml:3: duplicate key 'limits' (first on line 1)");
  EXPECT_EQ(ErrorOf("limits:\n  maxWatchers: 1\n  maxWatchers: 2\n"),
            "perld.yaml:3: duplicate key 'limits.maxWatchers' (first on line 2)");
}

TEST(DaemonConfigTest, MalformedYamlNamesTheLine) {
  EXPECT_THAT(ErrorOf("logLevel: info\npercentiles: [50, 99\nmaxQs: 1\n"),
              StartsWith("perld.yaml:3: malformed YAML: "));
  EXPECT_EQ(ErrorOf("maxQs: 1\n  idleNS: 2\n"), "perld.yaml:2: malformed YAML: illegal map value");
  EXPECT_THAT(ErrorOf("maxQs: *nowhere\n"),
              StartsWith("perld.yaml:1: malformed YAML: the referenced anchor is not defined"));
}

TEST(DaemonConfigTest, TopLevelMustBeOneMapping) {
  EXPECT_EQ(ErrorOf("- maxQs: 1\n"),
            "perld.yaml:1: the top level must be a mapping of keys (key: value), got a sequence");
  EXPECT_EQ(ErrorOf("just words\n"),
            "perld.yaml:1: the top level must be a mapping of keys (key: value), got 'just "
            "words'");
  EXPECT_EQ(ErrorOf("maxQs: 1\n\xff\xfe\0\n"s), "perld.yaml:2: not a text file (a NUL byte)");
  EXPECT_EQ(ErrorOf("maxQs: 1\n---\nmaxQs: 2\n"),
            "perld.yaml:3: a configuration file holds one YAML document; a second one starts "
            "here");
  EXPECT_EQ(ErrorOf("? [a, b]\n: 1\n"), "perld.yaml:1: a key must be a name, got a sequence");
  EXPECT_EQ(ErrorOf("\"max\\nQs\": 1\n"),
            "perld.yaml:1: unknown key 'max\\nQs' (did you mean 'maxQs'?)");
}

TEST(DaemonConfigTest, ReportsEveryErrorOnePerLineInLineOrder) {
  EXPECT_EQ(ErrorOf("maxQs: abc\n"
                    "reportingIntervalMs: 0\n"
                    "reportingIntervallMs: 5\n"
                    "minLatency: 10\n"
                    "maxLatency: 5\n"
                    "limits:\n"
                    "  maxWatchers: 0\n"
                    "maxQs: 2\n"),
            "perld.yaml:1: key 'maxQs': expected an integer, got 'abc'\n"
            "perld.yaml:2: key 'reportingIntervalMs': 0 is outside [10, 86400000]\n"
            "perld.yaml:3: unknown key 'reportingIntervallMs' (did you mean "
            "'reportingIntervalMs'?)\n"
            "perld.yaml:5: key 'maxLatency': 5 is below minLatency 10\n"
            "perld.yaml:7: key 'limits.maxWatchers': 0 is outside [1, 65536]\n"
            "perld.yaml:8: duplicate key 'maxQs' (first on line 1)");
}

TEST(DaemonConfigTest, MessagesUseTheFileNameAsGiven) {
  absl::StatusOr<DaemonConfig> config = LoadConfigText("maxQs: x\n", "./etc/../perld.yaml");
  EXPECT_THAT(std::string(config.status().message()),
              StartsWith("./etc/../perld.yaml:1: key 'maxQs'"));
}

TEST(DaemonConfigTest, HostileInputIsRefusedWithoutThrowing) {
  const std::vector<std::string> inputs = {
      "{",
      "[",
      "'",
      "maxQs: !!binary AAAA\n",
      "&a [*a]\n",
      "\t- x\n",
      "\xff\xfe\x00"s,
      "? |\n  x\n: 1\n",
      std::string(5000, '['),
      "maxQs: &a 1\nidleNS: *a\n",  // aliases are fine
  };
  for (const std::string& text : inputs) {
    absl::StatusOr<DaemonConfig> config = Load(text);  // must not throw or crash
    if (!config.ok()) {
      EXPECT_THAT(std::string(config.status().message()), StartsWith("perld.yaml:"))
          << text.substr(0, 40);
    }
  }
}

// Found by fuzz_config: yaml-cpp 0.7 built nodes without end on these 367
// bytes; the loader refuses them after a bounded node count.
TEST(DaemonConfigTest, YamlThatNeverEndsIsRefused) {
  absl::StatusOr<DaemonConfig> config =
      LoadConfigFile(std::string(PERLD_SOURCE_DIR) +
                     "/tests/fuzz/corpus/config/regression-yaml-cpp-endless-nodes.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("more than 100000 nodes"));
}

TEST(DaemonConfigTest, LoadConfigFileReportsUnreadableFiles) {
  absl::StatusOr<DaemonConfig> missing = LoadConfigFile("/nonexistent/perld.yaml");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              StartsWith("/nonexistent/perld.yaml: cannot open"));
  absl::StatusOr<DaemonConfig> directory = LoadConfigFile(PERLD_SOURCE_DIR);
  EXPECT_FALSE(directory.ok());
  EXPECT_THAT(std::string(directory.status().message()), HasSubstr("cannot read"));
  absl::StatusOr<DaemonConfig> endless = LoadConfigFile("/dev/zero");
  EXPECT_EQ(endless.status().message(), "/dev/zero: larger than 1 MiB: not a configuration file");
}

// --- Effective configuration -----------------------------------------------

TEST(DaemonConfigTest, RenderedConfigRoundTrips) {
  DaemonConfig odd = testing::EveryKeyConfig();
  odd.state_dir = "/srv/it's \"odd\"\\ #x: y\n\t\x01/\xc3\xa9t\xc3\xa9";
  odd.latency.percentiles = {0.001, 33.333333333333336, 99.999, 100};
  odd.latency.time_unit = TimeUnit::kUs;
  for (const DaemonConfig& config : {DaemonConfig{}, testing::EveryKeyConfig(), odd}) {
    const std::string text = RenderEffectiveConfig(config);
    absl::StatusOr<DaemonConfig> loaded = Load(text);
    ASSERT_TRUE(loaded.ok()) << loaded.status() << "\n" << text;
    ExpectSame(*loaded, config);
  }
}

TEST(DaemonConfigTest, RenderedConfigListsEveryKey) {
  const std::string text = RenderEffectiveConfig(DaemonConfig{});
  EXPECT_THAT(text, HasSubstr("\ngrpcListen: \"127.0.0.1:9717\"\n"));
  EXPECT_THAT(text, HasSubstr("\nmaxLatency: 180000\n"));
  EXPECT_THAT(text, HasSubstr("\npercentiles: [5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, "
                              "65, 70, 75, 80, 85, 90, 92.5, 95, 97.5, 99, 99.25, 99.5, 99.75, "
                              "99.9, 99.95, 99.99]\n"));
  EXPECT_THAT(text, HasSubstr("\nretention:\n  maxFinishedRuns: 1000\n"));
  EXPECT_THAT(text, HasSubstr("\nlimits:\n  maxRunningRuns: 16\n"));
  for (const std::string& key : ConfigKeyNames()) {
    // Indented two spaces a section level: "remoteWrite.tls.caFile" is "    caFile: ".
    const size_t dot = key.rfind('.');
    const auto depth = static_cast<size_t>(std::count(key.begin(), key.end(), '.'));
    std::string line(2 * depth + 1, ' ');
    line[0] = '\n';
    line.append(dot == std::string::npos ? key : key.substr(dot + 1)).append(": ");
    EXPECT_THAT(text, HasSubstr(line)) << key;
  }
}

TEST(DaemonConfigTest, EqualityComparesEveryField) {
  const DaemonConfig base;
  std::vector<DaemonConfig> changed(5, base);
  changed[0].latency.percentiles.pop_back();
  changed[1].channels.producer_idle_ns += 1;
  changed[2].limits.max_watchers += 1;
  changed[3].latency.exact_latency_max_memory_mb += 1;
  changed[4].http.header_timeout_ms -= 1;
  for (const DaemonConfig& c : changed) EXPECT_FALSE(c == base);
  EXPECT_TRUE(base == DaemonConfig{});
}

// --- config/perld.yaml and the examples ------------------------------------

TEST(DaemonConfigTest, ShippedPerldYamlIsExactlyTheDefaults) {
  absl::StatusOr<DaemonConfig> config =
      LoadConfigFile(std::string(PERLD_SOURCE_DIR) + "/config/perld.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  ExpectSame(*config, DaemonConfig{});
}

// Every key the loader knows is documented in perld.yaml: set (at its default,
// checked above) or, for maxLatency whose default follows timeUnit, shown
// commented out. So the reference cannot drift from the loader.
TEST(DaemonConfigTest, ShippedPerldYamlDocumentsEveryKey) {
  const std::string text = ReadSourceFile("config/perld.yaml");
  ASSERT_FALSE(text.empty());
  std::set<std::string> set_keys;
  std::set<std::string> commented_keys;
  std::vector<std::string> sections;  // open sections, outermost first (two spaces a level)
  const std::regex key_line(R"(^( *)(# )?([A-Za-z]+):( .*)?$)");
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, key_line)) continue;
    const size_t depth = m[1].str().size() / 2;
    if (!m[2].matched) sections.resize(std::min(depth, sections.size()));
    std::string name;
    for (size_t i = 0; i < std::min(depth, sections.size()); ++i) name += sections[i] + ".";
    name += m[3].str();
    if (m[2].matched) {
      commented_keys.insert(name);
    } else if (!m[4].matched) {
      sections.push_back(m[3].str());  // "retention:" (or "  tls:" within one) opens a section
    } else {
      set_keys.insert(name);
    }
  }
  for (const std::string& key : ConfigKeyNames()) {
    if (key == "maxLatency") {
      EXPECT_TRUE(commented_keys.contains(key)) << "perld.yaml must show '# maxLatency: ...'";
    } else {
      EXPECT_TRUE(set_keys.contains(key)) << "perld.yaml does not set " << key;
    }
  }
  EXPECT_EQ(set_keys.size() + 1, ConfigKeyNames().size());
}

TEST(DaemonConfigTest, ShippedExamplesLoad) {
  absl::StatusOr<DaemonConfig> bench =
      LoadConfigFile(std::string(PERLD_SOURCE_DIR) + "/config/examples/local-bench.yaml");
  ASSERT_TRUE(bench.ok()) << bench.status();
  EXPECT_EQ(bench->latency.time_unit, TimeUnit::kNs);
  EXPECT_EQ(bench->reporting_interval_ms, 1000);
  absl::StatusOr<DaemonConfig> aggregator =
      LoadConfigFile(std::string(PERLD_SOURCE_DIR) + "/config/examples/aggregator.yaml");
  ASSERT_TRUE(aggregator.ok()) << aggregator.status();
  EXPECT_THAT(aggregator->grpc_listen, StartsWith("0.0.0.0:"));
  absl::StatusOr<DaemonConfig> edge =
      LoadConfigFile(std::string(PERLD_SOURCE_DIR) + "/config/examples/edge.yaml");
  ASSERT_TRUE(edge.ok()) << edge.status();
  EXPECT_EQ(edge->upstream.target, "perld-root:9717");
  absl::StatusOr<DaemonConfig> tls =
      LoadConfigFile(std::string(PERLD_SOURCE_DIR) + "/config/examples/tls.yaml");
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_TRUE(tls->tls.enabled());
  EXPECT_FALSE(tls->tls.client_ca_file.empty());
  EXPECT_TRUE(tls->auth.enabled());
  EXPECT_FALSE(tls->auth.sbp_open);
}

}  // namespace
}  // namespace perld::config
