// record_example: records operations from several threads into a perld run
// through the installed client library, closes, and checks that the daemon
// acknowledged every record and that the client's exact total counts them.
//
//   record_example TARGET RUN MODE(raw|windows) RECORDS_PER_THREAD THREADS
#include <perld/client.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: record_example TARGET RUN raw|windows RECORDS THREADS\n");
    return 2;
  }
  perld::ClientOptions options;
  options.target = argv[1];
  options.run = argv[2];
  options.mode =
      std::string(argv[3]) == "windows" ? perld::IngestMode::kWindows : perld::IngestMode::kRaw;
  options.time_unit = perld::LatencyUnit::kUs;
  options.reporting_interval_ms = 100;
  const long per_thread = std::atol(argv[4]);
  const int threads = std::atoi(argv[5]);
  std::string error;
  std::unique_ptr<perld::Client> client = perld::Client::Create(options, &error);
  if (!client) {
    std::fprintf(stderr, "record_example: %s\n", error.c_str());
    return 1;
  }
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    perld::Recorder* recorder = client->NewRecorder();
    workers.emplace_back([recorder, per_thread, t] {
      for (long i = 0; i < per_thread; ++i) {
        const int64_t start = i * 10;
        recorder->Record(start, start + 1 + (i + t) % 977, 1, 512);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  // Flush: everything recorded so far acknowledged, the client still open.
  const perld::FlushResult flushed = client->Flush(std::chrono::seconds(60));
  const int64_t acked_at_flush = client->counters().acked_records;
  std::printf("record_example: flush %s, %lld records acknowledged\n",
              flushed.acked ? "acked" : flushed.error.c_str(),
              static_cast<long long>(acked_at_flush));
  if (!flushed.acked || acked_at_flush != per_thread * threads) return 1;
  const perld::FlushResult done = client->Close(std::chrono::seconds(60));
  const perld::LocalTotal total = client->Total();
  const perld::Counters counters = client->counters();
  std::printf("record_example: run %llu, %lld records, acked %s, acked records %lld%s%s\n",
              static_cast<unsigned long long>(counters.run_id),
              static_cast<long long>(total.records), done.acked ? "yes" : "no",
              static_cast<long long>(counters.acked_records), done.error.empty() ? "" : ": ",
              done.error.c_str());
  return done.acked && total.records == per_thread * threads &&
                 counters.acked_records == total.records
             ? 0
             : 1;
}
