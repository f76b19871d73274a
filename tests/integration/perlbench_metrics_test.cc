// `perld bench -context PORT/PATH` end to end: -context parsing, then a timed
// RunBench with -context 0/metrics scraped over loopback while it runs (the
// real port is read from the startup line), checked for the interval window's
// figures and by promtool; the port closes when the run ends.
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <streambuf>
#include <string>
#include <thread>
#include <vector>

#include "daemon/bench/bench_options.h"
#include "daemon/http/http_server.h"
#include "daemon/jobs/bench_run.h"
#include "tests/promtool_check.h"

namespace perld::jobs {
namespace {

using ::perld::test_support::HavePromtool;
using ::perld::test_support::PromtoolCheck;

// An ostream buffer another thread may read while RunBench writes to it.
class SyncStringBuf final : public std::streambuf {
 public:
  std::string Text() const {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    std::lock_guard<std::mutex> lock(mu_);
    text_.push_back(traits_type::to_char_type(c));
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard<std::mutex> lock(mu_);
    text_.append(s, static_cast<size_t>(n));
    return n;
  }

 private:
  mutable std::mutex mu_;
  std::string text_;
};

absl::StatusOr<bench::BenchOptions> Parse(std::vector<std::string> args) {
  return bench::ParseBenchArgs(args);
}

TEST(PerlBenchMetricsTest, ParsesContext) {
  auto off = Parse({"-writers", "1", "-records", "10"});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->metrics);

  auto no = Parse({"-writers", "1", "-records", "10", "-context", "no"});
  ASSERT_TRUE(no.ok());
  EXPECT_FALSE(no->metrics);

  auto sbk = Parse({"-writers", "1", "-records", "10", "-context", "9718/metrics"});
  ASSERT_TRUE(sbk.ok()) << sbk.status();
  EXPECT_TRUE(sbk->metrics);
  EXPECT_EQ(sbk->metrics_host, "127.0.0.1");
  EXPECT_EQ(sbk->metrics_port, 9718);
  EXPECT_EQ(sbk->metrics_path, "/metrics");

  auto host = Parse({"-writers", "1", "-records", "10", "--context=0.0.0.0:0/a/b"});
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(host->metrics_host, "0.0.0.0");
  EXPECT_EQ(host->metrics_port, 0);
  EXPECT_EQ(host->metrics_path, "/a/b");

  auto v6 = Parse({"-writers", "1", "-records", "10", "--context", "[::1]:65535/m"});
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->metrics_host, "::1");
  EXPECT_EQ(v6->metrics_port, 65535);

  for (const char* bad :
       {"9718", "9718/", "/metrics", "x/metrics", "65536/metrics", "-1/m", ":9718/m", ""}) {
    auto o = Parse({"-writers", "1", "-records", "10", "-context", bad});
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_NE(o.status().message().find("option -context"), std::string::npos)
        << bad << ": " << o.status();
  }
  EXPECT_NE(bench::BenchUsage().find("-context PORT/PATH"), std::string::npos);
}

TEST(PerlBenchMetricsTest, TimedRunServesIntervalMetricsWhileRunning) {
  auto options = Parse({"-writers", "1", "-size", "100", "-seconds", "3", "-interval", "1", "-time",
                        "ns", "-context", "0/metrics", "--progress", "false"});
  ASSERT_TRUE(options.ok()) << options.status();

  SyncStringBuf out_buf;
  std::ostream out(&out_buf);
  std::ostringstream err;
  const std::string marker = "PerL Prometheus metrics: http://127.0.0.1:";
  int port = 0;
  std::string scraped;
  int status = 0;
  std::string content_type;
  std::thread scraper([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (port == 0 && std::chrono::steady_clock::now() < deadline) {
      const std::string text = out_buf.Text();
      if (size_t at = text.find(marker); at != std::string::npos) {
        size_t slash = text.find('/', at + marker.size());
        if (slash != std::string::npos) port = std::stoi(text.substr(at + marker.size()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (port == 0) return;
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(2);
    client.set_read_timeout(5);
    // Poll until the first interval window (1 s) has been published.
    while (std::chrono::steady_clock::now() < deadline) {
      httplib::Result res = client.Get("/metrics");
      if (!res) break;  // the run ended
      status = res->status;
      content_type = res->get_header_value("Content-Type");
      scraped = res->body;
      if (scraped.find("perld_run_window_seconds") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  absl::StatusOr<BenchResult> result = RunBench(*options, out, err);
  scraper.join();
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_GT(port, 0) << out_buf.Text();
  EXPECT_EQ(status, 200);
  EXPECT_EQ(content_type, "text/plain; version=0.0.4; charset=utf-8");
  const std::string labels = "{run=\"perlbench\",source=\"bench\"}";
  EXPECT_NE(scraped.find("perld_run_records_total" + labels + " "), std::string::npos) << scraped;
  EXPECT_NE(scraped.find("perld_run_bytes_per_second" + labels + " "), std::string::npos);
  EXPECT_NE(scraped.find("perld_run_latency_seconds{run=\"perlbench\",source=\"bench\","
                         "quantile=\"0.999\"} "),
            std::string::npos)
      << scraped;
  EXPECT_GE(result->windows_reported, 1);

  // The server stops with the run.
  httplib::Client after("127.0.0.1", port);
  after.set_connection_timeout(1);
  EXPECT_FALSE(after.Get("/metrics"));

  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  }
  std::string report;
  EXPECT_EQ(PromtoolCheck(scraped, &report), 0) << report;
  EXPECT_EQ(report, "");
}

TEST(PerlBenchMetricsTest, PortInUseFailsTheRunNamingTheOption) {
  auto holder = http::HttpServer::Start(http::kDefaultMetricsHost, 0, "/metrics",
                                        [] { return std::string(); });
  ASSERT_TRUE(holder.ok()) << holder.status();
  auto options = Parse({"-writers", "1", "-records", "1000", "-context",
                        std::to_string((*holder)->port()) + "/metrics", "--progress", "false"});
  ASSERT_TRUE(options.ok()) << options.status();
  std::ostringstream out, err;
  absl::StatusOr<BenchResult> result = RunBench(*options, out, err);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message().rfind("-context: ", 0), 0u) << result.status();
  EXPECT_NE(result.status().message().find("in use"), std::string::npos) << result.status();
}

}  // namespace
}  // namespace perld::jobs
