// The remoteWrite: section: off by default, nested sections (basicAuth:,
// tls:), the effective configuration rendered back, and its errors -- a
// malformed URL, intervalMs out of range, bearer and basic auth together,
// credentials or TLS without a URL, TLS on http://, half a client
// certificate, a secret in clear text to another host -- each naming its
// key and line; what SIGHUP applies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "daemon/common/http_url.h"
#include "daemon/config/config_loader.h"
#include "daemon/config/config_reload.h"
#include "daemon/config/config_render.h"
#include "daemon/config/daemon_config.h"

namespace perld::config {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(const std::string& text) {
  absl::StatusOr<DaemonConfig> config = LoadConfigText(text, "perld.yaml");
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(config.status().message());
}

TEST(RemoteWriteConfigTest, OffByDefault) {
  const DaemonConfig c;
  EXPECT_FALSE(c.remote_write.enabled());
  EXPECT_EQ(c.remote_write.interval_ms, 5000);
  EXPECT_EQ(c.remote_write.max_queued_samples, 500'000);
  absl::StatusOr<DaemonConfig> empty = LoadConfigText("remoteWrite:\n", "perld.yaml");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_FALSE(empty->remote_write.enabled());
}

TEST(RemoteWriteConfigTest, ReadsNestedSectionsAndRendersThemBack) {
  const std::string text =
      "remoteWrite:\n"
      "  url: https://[::1]:9090/api/v1/write?x=1\n"
      "  intervalMs: 1000\n"
      "  bearerTokenFile: /etc/perld/rw.token\n"
      "  tls:\n"
      "    caFile: /etc/perld/ca.pem\n"
      "  maxQueuedSamples: 77\n";
  absl::StatusOr<DaemonConfig> c = LoadConfigText(text, "perld.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->remote_write.url, "https://[::1]:9090/api/v1/write?x=1");
  EXPECT_EQ(c->remote_write.tls_ca_file, "/etc/perld/ca.pem");
  EXPECT_EQ(c->remote_write.max_queued_samples, 77);
  const std::string rendered = RenderEffectiveConfig(*c);
  EXPECT_THAT(rendered, HasSubstr("remoteWrite:\n  url: \"https://[::1]:9090/api/v1/write?x=1\"\n"
                                  "  intervalMs: 1000\n"));
  EXPECT_THAT(rendered, HasSubstr("  basicAuth:\n    username: \"\"\n    passwordFile: \"\"\n"
                                  "  tls:\n    caFile: \"/etc/perld/ca.pem\"\n"));
  EXPECT_THAT(rendered, HasSubstr("    keyFile: \"\"\n  maxQueuedSamples: 77\n"));
  // The rendered text loads back to the same configuration.
  absl::StatusOr<DaemonConfig> again = LoadConfigText(rendered, "effective");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(*again == *c);
}

TEST(RemoteWriteConfigTest, ErrorsNameTheKeyAndLine) {
  EXPECT_EQ(ErrorOf("remoteWrite:\n  url: prometheus:9090/api/v1/write\n"),
            "perld.yaml:2: key 'remoteWrite.url': malformed URL \"prometheus:9090/api/v1/write\": "
            "expected http://HOST[:PORT]/PATH or https://...");
  EXPECT_THAT(ErrorOf("remoteWrite:\n  url: ftp://h/x\n"),
              HasSubstr("the scheme must be http or https"));
  EXPECT_THAT(ErrorOf("remoteWrite:\n  url: http://h:99999/x\n"),
              HasSubstr("the port must be 1..65535"));
  EXPECT_THAT(ErrorOf("remoteWrite:\n  url: http://user:pw@h/x\n"),
              HasSubstr("no user information in the URL"));
  EXPECT_EQ(ErrorOf("remoteWrite:\n  url: http://127.0.0.1:9090/api/v1/write\n  intervalMs: 50\n"),
            "perld.yaml:3: key 'remoteWrite.intervalMs': 50 is outside [100, 3600000]");
  EXPECT_EQ(ErrorOf("remoteWrite:\n  url: https://h/w\n  bearerTokenFile: /t\n"
                    "  basicAuth:\n    username: u\n    passwordFile: /p\n"),
            "perld.yaml:3: key 'remoteWrite.bearerTokenFile': give bearerTokenFile or basicAuth, "
            "not both");
  EXPECT_EQ(ErrorOf("remoteWrite:\n  url: https://h/w\n  basicAuth:\n    username: u\n"),
            "perld.yaml:4: key 'remoteWrite.basicAuth.username': basicAuth.username and "
            "basicAuth.passwordFile are given together");
  EXPECT_EQ(ErrorOf("remoteWrite:\n  bearerTokenFile: /t\n"),
            "perld.yaml:2: key 'remoteWrite.bearerTokenFile': needs remoteWrite.url (remote write "
            "is off without it)");
  EXPECT_EQ(ErrorOf("remoteWrite:\n  url: http://127.0.0.1:1/w\n  tls:\n    caFile: /ca.pem\n"),
            "perld.yaml:4: key 'remoteWrite.tls.caFile': TLS needs an https:// remoteWrite.url");
  EXPECT_EQ(ErrorOf("remoteWrite:\n  url: https://h/w\n  tls:\n    certFile: /c.pem\n"),
            "perld.yaml:4: key 'remoteWrite.tls.certFile': tls.certFile and tls.keyFile are "
            "given together");
  EXPECT_EQ(ErrorOf("remoteWrite:\n  url: http://prom.example/w\n  bearerTokenFile: /t\n"),
            "perld.yaml:3: key 'remoteWrite.bearerTokenFile': a token or password is never sent "
            "in clear text to another host (prom.example): use an https:// remoteWrite.url");
  EXPECT_THAT(ErrorOf("remoteWrite:\n  urll: http://h/w\n"),
              HasSubstr("unknown key 'remoteWrite.urll' (did you mean 'remoteWrite.url'?)"));
  EXPECT_THAT(ErrorOf("remoteWrite:\n  tls: yes\n"),
              HasSubstr("key 'remoteWrite.tls': expected a mapping of remoteWrite.tls.* keys"));
  // A loopback receiver may take a token over http (tests, a local agent).
  EXPECT_TRUE(LoadConfigText("remoteWrite:\n  url: http://localhost:9090/w\n"
                             "  bearerTokenFile: /t\n",
                             "perld.yaml")
                  .ok());
}

TEST(RemoteWriteConfigTest, SighupAppliesAllButTheQueueBound) {
  DaemonConfig running;
  DaemonConfig reloaded;
  reloaded.remote_write.url = "http://127.0.0.1:9090/api/v1/write";
  reloaded.remote_write.interval_ms = 1000;
  reloaded.remote_write.max_queued_samples = 10;
  const ReloadDecision d = DecideReload(running, reloaded);
  EXPECT_THAT(d.applied, ::testing::ElementsAre(
                             "remoteWrite.url: \"\" -> \"http://127.0.0.1:9090/api/v1/write\"",
                             "remoteWrite.intervalMs: 5000 -> 1000"));
  EXPECT_THAT(d.needs_restart,
              ::testing::ElementsAre("remoteWrite.maxQueuedSamples: 500000 -> 10"));
  EXPECT_EQ(d.next.remote_write.max_queued_samples, 500'000);
}

TEST(HttpUrlTest, SplitsSchemeHostPortAndPath) {
  absl::StatusOr<common::HttpUrl> u = common::ParseHttpUrl("HTTPS://Prom.example/api/v1/write");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_TRUE(u->https);
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->path, "/api/v1/write");
  EXPECT_EQ(u->SchemeHostPort(), "https://Prom.example:443");
  u = common::ParseHttpUrl("http://[::1]:8428");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->path, "/");
  EXPECT_EQ(u->SchemeHostPort(), "http://[::1]:8428");
  u = common::ParseHttpUrl("http://h?x=1");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->path, "/?x=1");
  for (const char* bad : {"", "h:1/x", "http://", "http://:80/", "http://h:/x", "http://h/x#f",
                          "http://h /x", "http://::1/x"}) {
    EXPECT_FALSE(common::ParseHttpUrl(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace perld::config
