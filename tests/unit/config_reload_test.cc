// DecideReload: which keys SIGHUP applies and which wait for a restart.
#include "daemon/config/config_reload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "daemon/config/config_loader.h"
#include "daemon/config/config_render.h"
#include "tests/unit/every_key_config.h"

namespace perld::config {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<std::string> KeysOf(const std::vector<std::string>& changes) {
  std::vector<std::string> keys;
  keys.reserve(changes.size());
  for (const std::string& change : changes) keys.push_back(change.substr(0, change.find(':')));
  return keys;
}

TEST(ConfigReloadTest, NoChangeNoAction) {
  const DaemonConfig running = testing::EveryKeyConfig();
  const ReloadDecision d = DecideReload(running, running);
  EXPECT_THAT(d.applied, IsEmpty());
  EXPECT_THAT(d.needs_restart, IsEmpty());
  EXPECT_TRUE(d.next == running);
}

TEST(ConfigReloadTest, AppliesSafeKeysWithOldAndNewValues) {
  const DaemonConfig running;
  DaemonConfig reloaded;
  reloaded.log_level = log::Level::kDebug;
  reloaded.reporting_interval_ms = 1000;
  reloaded.latency.percentiles = {50, 99.9};
  reloaded.latency.time_unit = TimeUnit::kNs;
  reloaded.latency.max_latency = DefaultMaxLatency(TimeUnit::kNs);
  reloaded.channels.max_qs = 1;
  reloaded.retention.max_bytes = int64_t{1} << 30;
  reloaded.limits.max_watchers = 8;
  const ReloadDecision d = DecideReload(running, reloaded);
  EXPECT_THAT(d.applied, ElementsAre("logLevel: info -> debug", "reportingIntervalMs: 5000 -> 1000",
                                     "timeUnit: ms -> ns", "maxLatency: 180000 -> 180000000000",
                                     "percentiles: [5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, "
                                     "60, 65, 70, 75, 80, 85, 90, 92.5, 95, 97.5, 99, 99.25, "
                                     "99.5, 99.75, 99.9, 99.95, 99.99] -> [50, 99.9]",
                                     "maxQs: 0 -> 1", "retention.maxBytes: 268435456 -> 1073741824",
                                     "limits.maxWatchers: 256 -> 8"));
  EXPECT_THAT(d.needs_restart, IsEmpty());
  EXPECT_TRUE(d.next == reloaded);
}

TEST(ConfigReloadTest, RestartKeysKeepTheRunningValue) {
  const DaemonConfig running;
  DaemonConfig reloaded;
  reloaded.grpc_listen = "0.0.0.0:9717";
  reloaded.state_dir = "/var/lib/perld";
  reloaded.limits.max_message_bytes = 1 << 20;
  reloaded.log_level = log::Level::kWarning;
  const ReloadDecision d = DecideReload(running, reloaded);
  EXPECT_THAT(d.needs_restart, ElementsAre("grpcListen: \"127.0.0.1:9717\" -> \"0.0.0.0:9717\"",
                                           "stateDir: \"\" -> \"/var/lib/perld\"",
                                           "limits.maxMessageBytes: 4194304 -> 1048576"));
  EXPECT_THAT(d.applied, ElementsAre("logLevel: info -> warning"));
  DaemonConfig expected = running;
  expected.log_level = log::Level::kWarning;
  EXPECT_EQ(RenderEffectiveConfig(d.next), RenderEffectiveConfig(expected));
  EXPECT_TRUE(d.next == expected);
}

// Every key classified once: the restart set is exactly the listeners, the
// Unix socket, the state directory, the recorder thread's idleNS, the gRPC message limit,
// the gRPC server's caps (grpc.*), the HTTP listener's bounds, the upstream and the security
// material (auth, tls).
TEST(ConfigReloadTest, ClassifiesEveryKey) {
  const ReloadDecision d = DecideReload(DaemonConfig{}, testing::EveryKeyConfig());
  EXPECT_THAT(
      KeysOf(d.needs_restart),
      ElementsAre("grpcListen", "httpListen", "grpcUnix", "stateDir", "idleNS",
                  "limits.maxMessageBytes", "grpc.maxConcurrentStreams",
                  "grpc.keepaliveMinPingIntervalMs", "grpc.keepaliveMaxPingStrikes",
                  "grpc.maxConnectionAgeMs", "grpc.maxConnectionAgeGraceMs", "grpc.maxThreads",
                  "ingest.workers", "http.maxConnections", "http.handlerThreads",
                  "http.maxQueuedRequests", "http.headerTimeoutMs", "upstream.target",
                  "upstream.nodeId", "upstream.maxPairsPerReport", "upstream.maxQueuedWindows",
                  "upstream.closeTimeoutMs", "upstream.tls", "upstream.caFile", "upstream.certFile",
                  "upstream.keyFile", "upstream.tokenFile", "auth.ingestTokenFile",
                  "auth.queryTokenFile", "auth.metricsOpen", "auth.sbpOpen", "tls.certFile",
                  "tls.keyFile", "tls.clientCaFile", "remoteWrite.maxQueuedSamples"));
  // Every key but remoteWrite.bearerTokenFile (it excludes basicAuth).
  EXPECT_EQ(d.applied.size() + d.needs_restart.size() + 1, ConfigKeyNames().size());
  // `next` is the reloaded config with the restart keys at their running values.
  DaemonConfig expected = testing::EveryKeyConfig();
  const DaemonConfig defaults;
  expected.grpc_listen = defaults.grpc_listen;
  expected.http_listen = defaults.http_listen;
  expected.grpc_unix = defaults.grpc_unix;
  expected.state_dir = defaults.state_dir;
  expected.idle_ns = defaults.idle_ns;
  expected.limits.max_message_bytes = defaults.limits.max_message_bytes;
  expected.ingest.workers = defaults.ingest.workers;
  expected.http = defaults.http;
  expected.grpc = defaults.grpc;
  expected.upstream = defaults.upstream;
  expected.auth = defaults.auth;
  expected.tls = defaults.tls;
  expected.remote_write.max_queued_samples = defaults.remote_write.max_queued_samples;
  EXPECT_EQ(RenderEffectiveConfig(d.next), RenderEffectiveConfig(expected));
  EXPECT_TRUE(d.next == expected);
}

}  // namespace
}  // namespace perld::config
