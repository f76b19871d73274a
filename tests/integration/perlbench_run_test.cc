// End-to-end PerlBench runs through the real pipeline: workers, clock,
// channels, the recorder thread, exact windows and reports.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_split.h"
#include "daemon/bench/bench_options.h"
#include "daemon/jobs/bench_run.h"

namespace perld::jobs {
namespace {

BenchResult RunPerlBench(const std::vector<std::string>& args, std::string* output = nullptr) {
  absl::StatusOr<bench::BenchOptions> options = bench::ParseBenchArgs(args);
  EXPECT_TRUE(options.ok()) << options.status();
  std::ostringstream out, err;
  absl::StatusOr<BenchResult> result = RunBench(*options, out, err);
  EXPECT_TRUE(result.ok()) << result.status();
  if (output != nullptr) *output = out.str() + err.str();
  return result.ok() ? *result : BenchResult{};
}

// One case per queue and worker count: 16 tests, not one 16-run test, so
// ctest spreads them over the cores (one test took 136 s under TSan).
class PerlBenchExactModeTest : public testing::TestWithParam<std::tuple<bool, int>> {};

TEST_P(PerlBenchExactModeTest, RecordsEveryRecordForAnOddTotal) {
  const auto [mpsc, workers] = GetParam();
  const int64_t records = 100'003 + workers;  // odd split across workers
  const BenchResult r =
      RunPerlBench({"-writers", std::to_string(workers), "-size", "100", "-records",
                    std::to_string(records), "-time", "ns", "-mpscqueue", mpsc ? "true" : "false",
                    "--qPerWorker", "3", "--progress", "false"});
  EXPECT_EQ(r.total.records, records);
  EXPECT_EQ(r.total.valid, records);
  EXPECT_EQ(r.total.bytes, records * 100);
  EXPECT_EQ(r.total.invalid, 0);
  EXPECT_EQ(r.dropped, 0);
  EXPECT_EQ(r.exit_code, 0);
}

INSTANTIATE_TEST_SUITE_P(OneToEightWorkers, PerlBenchExactModeTest,
                         testing::Combine(testing::Bool(), testing::Range(1, 9)),
                         [](const testing::TestParamInfo<std::tuple<bool, int>>& p) {
                           return std::string(std::get<0>(p.param) ? "Mpsc" : "Library") +
                                  std::to_string(std::get<1>(p.param)) + "Workers";
                         });

TEST(PerlBenchRunTest, SharedQueueTopologyIsExact) {
  for (const char* mpsc : {"true", "false"}) {
    const BenchResult r =
        RunPerlBench({"-writers", "4", "-records", "400001", "-time", "ns", "-mpscqueue", mpsc,
                      "--maxQs", "1", "--maxPendingPerWorker", "64", "--progress", "false"});
    EXPECT_EQ(r.total.records, 400001) << mpsc;
    EXPECT_EQ(r.exit_code, 0);
  }
}

TEST(PerlBenchRunTest, ReadersPathIsExact) {
  const BenchResult r = RunPerlBench({"-readers", "3", "-size", "4096", "-records", "90001",
                                      "-time", "mcs", "--progress", "false"});
  EXPECT_EQ(r.total.records, 90001);
  EXPECT_EQ(r.total.bytes, 90001LL * 4096);
  EXPECT_EQ(r.exit_code, 0);
}

TEST(PerlBenchRunTest, WritersAndReadersTogether) {
  std::string out;
  const BenchResult r = RunPerlBench(
      {"-writers", "2", "-readers", "2", "-records", "50001", "--progress", "false"}, &out);
  EXPECT_EQ(r.total.records, 50001);
  EXPECT_NE(out.find("Total PerlBench Write_Reading"), std::string::npos) << out;
}

TEST(PerlBenchRunTest, TimedModeStopsAtItsDeadlineAndReportsWhatWasRecorded) {
  std::string out;
  const BenchResult r = RunPerlBench(
      {"-writers", "2", "-seconds", "2", "-time", "ns", "-interval", "1", "--progress", "false"},
      &out);
  EXPECT_GT(r.total.records, 0);
  EXPECT_EQ(r.total.records, r.attempted) << "every operation run was recorded";
  EXPECT_GE(r.seconds, 2.0) << "ran until the deadline";
  EXPECT_LT(r.seconds, 30.0) << "stopped by itself";
  EXPECT_GE(r.windows_reported, 1) << out;
  EXPECT_EQ(r.exit_code, 0);
}

TEST(PerlBenchRunTest, RateControlLandsWithinFivePercentOfTarget) {
  // 8 MB/s of 4 KiB records = 2048 records/s over 5 s.
  const BenchResult r = RunPerlBench({"-writers", "2", "-size", "4096", "-seconds", "5",
                                      "-throughput", "8", "-time", "mcs", "--progress", "false"});
  const double mb_per_sec = static_cast<double>(r.total.bytes) / (1024.0 * 1024.0) / 5.0;
  EXPECT_NEAR(mb_per_sec, 8.0, 0.4) << r.total.records << " records";
  EXPECT_EQ(r.exit_code, 0);
}

TEST(PerlBenchRunTest, CsvFileHasHeaderRegularAndTotalRows) {
  const std::string path = ::testing::TempDir() + "/perlbench_run_test.csv";
  RunPerlBench({"-writers", "1", "-seconds", "2.2", "-interval", "1", "-time", "ns", "-csvfile",
                path, "--progress", "false"});
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("ID,Date,Time,Header,Type,", 0), 0u);
  const std::vector<std::string> first = absl::StrSplit(lines[1], ',');
  const std::vector<std::string> last = absl::StrSplit(lines.back(), ',');
  EXPECT_EQ(first[4], "Regular");
  EXPECT_EQ(last[4], "Total");
  EXPECT_EQ(first.size(),
            static_cast<size_t>(std::count(lines[0].begin(), lines[0].end(), ',') + 1));
}

TEST(PerlBenchRunTest, DropPolicyIsCountedAndFailsTheRun) {
  // A 2-node bound with drops: some timestamps are dropped, never silently.
  const BenchResult r =
      RunPerlBench({"-writers", "2", "-records", "200000", "-time", "ns", "--maxPendingPerWorker",
                    "2", "--overflow", "drop", "--progress", "false"});
  EXPECT_EQ(r.total.records + r.dropped, 200000);
  if (r.dropped > 0) {
    EXPECT_EQ(r.exit_code, 1);
  }
}

TEST(PerlBenchRunTest, StartupLinesNameQueueAndTopology) {
  std::string out;
  RunPerlBench({"-writers", "1", "-records", "10", "-mpscqueue", "false", "--maxQs", "1",
                "--progress", "false"},
               &out);
  EXPECT_NE(out.find("PerL Timestamp Queue: moodycamel::ConcurrentQueue (library)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("PerL Timestamp Queue Topology: 1 shared queue(s)"), std::string::npos);
}

}  // namespace
}  // namespace perld::jobs
