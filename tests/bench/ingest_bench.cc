// ingest_bench: the daemon's ingest rate from one client process over one
// perld.v1.Ingest stream, the wire only: messages are encoded before the
// clock starts (so the client's own load generation is not measured), then
// streamed with fresh sequence numbers and at most --inflight unacknowledged.
// It waits for the final ack and the close, checks the run's total against
// what it sent (exact count), and prints the rate, the bytes on the wire per
// timestamp (or pair) and the CPU seconds per million on both sides
// (--server-pid: the daemon's /proc/PID/stat). A benchmark command, not a
// test: see tests/bench/INGEST.md.
//
//   ingest_bench --target 127.0.0.1:9717|unix:PATH --mode raw|windows
//                [--seconds 5] [--batch 4096] [--inflight 32] [--server-pid PID]
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "perld/v1/ingest.grpc.pb.h"
#include "perld/v1/perld.grpc.pb.h"

namespace {

using perld::v1::IngestRequest;
using perld::v1::IngestResponse;

double CpuSeconds(int pid) {
  if (pid == 0) {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  }
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> fields;
  size_t pos = close + 2;
  while (pos < text.size()) {
    size_t space = text.find(' ', pos);
    if (space == std::string::npos) space = text.size();
    fields.push_back(text.substr(pos, space - pos));
    pos = space + 1;
  }
  // fields[0] is field 3 (state): utime is field 14, stime field 15.
  return static_cast<double>(std::atoll(fields[11].c_str()) + std::atoll(fields[12].c_str())) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

int main(int argc, char** argv) {
  std::string target = "127.0.0.1:9717";
  std::string mode = "raw";
  double seconds = 5;
  int batch = 4096;
  int inflight = 32;
  int server_pid = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--target") {
      target = value;
    } else if (flag == "--mode") {
      mode = value;
    } else if (flag == "--seconds") {
      seconds = std::atof(value.c_str());
    } else if (flag == "--batch") {
      batch = std::atoi(value.c_str());
    } else if (flag == "--inflight") {
      inflight = std::atoi(value.c_str());
    } else if (flag == "--server-pid") {
      server_pid = std::atoi(value.c_str());
    } else {
      std::fprintf(stderr, "ingest_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const bool raw = mode == "raw";
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto ingest = perld::v1::Ingest::NewStub(channel);
  auto query = perld::v1::Query::NewStub(channel);

  // Pre-encoded messages: 16 distinct bodies, latencies 100..20000 ns.
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int64_t> latency(100, 20'000);
  std::vector<IngestRequest> bodies(16);
  std::vector<int64_t> records_of(bodies.size());  // timestamps (raw) or records (windows)
  std::vector<int64_t> pairs_of(bodies.size());
  for (size_t k = 0; k < bodies.size(); ++k) {
    IngestRequest& r = bodies[k];
    if (raw) {
      perld::v1::TimestampBatch* b = r.mutable_batch();
      b->set_count(static_cast<uint32_t>(batch));
      b->set_constant_bytes(1024);
      int64_t prev = 0;
      for (int i = 0; i < batch; ++i) {
        const int64_t v = latency(rng);
        b->add_latency_delta(v - prev);
        prev = v;
      }
      records_of[k] = batch;
      pairs_of[k] = batch;
    } else {
      std::vector<int64_t> values(static_cast<size_t>(batch));
      for (int64_t& v : values) v = latency(rng) * 100;  // distinct with high probability
      std::sort(values.begin(), values.end());
      values.erase(std::unique(values.begin(), values.end()), values.end());
      perld::v1::WindowReport* w = r.mutable_window();
      int64_t prev = 0;
      int64_t valid = 0;
      int64_t sum = 0;
      for (int64_t v : values) {
        w->add_latency_delta(static_cast<uint64_t>(v - prev));
        w->add_count(3);
        prev = v;
        valid += 3;
        sum += v * 3;
      }
      w->set_records(valid);
      w->set_bytes(valid * 1024);
      w->set_valid_latency_records(valid);
      w->set_total_latency(sum);
      w->set_min_latency(values.front());
      w->set_max_latency(values.back());
      records_of[k] = valid;
      pairs_of[k] = static_cast<int64_t>(values.size());
    }
  }

  grpc::ClientContext context;
  auto stream = ingest->Stream(&context);
  IngestRequest open;
  perld::v1::IngestOpen* o = open.mutable_open();
  o->set_run_name("ingest-bench-" + mode);
  o->set_client_id("ingest-bench-" + std::to_string(getpid()));
  o->set_client_name("ingest_bench");
  o->set_mode(raw ? perld::v1::IngestOpen::MODE_RAW : perld::v1::IngestOpen::MODE_WINDOWS);
  o->set_time_unit(perld::v1::TIME_UNIT_NS);
  IngestResponse response;
  if (!stream->Write(open) || !stream->Read(&response) || !response.has_opened()) {
    std::fprintf(stderr, "ingest_bench: open failed: %s\n",
                 stream->Finish().error_message().c_str());
    return 1;
  }
  const uint64_t run_id = response.opened().run_id();

  std::atomic<uint64_t> acked{0};
  std::atomic<bool> reader_failed{false};
  std::thread reader([&] {
    IngestResponse r;
    while (stream->Read(&r)) acked.store(r.ack().acked_sequence(), std::memory_order_release);
    reader_failed.store(true);
  });

  const double client_cpu0 = CpuSeconds(0);
  const double server_cpu0 = server_pid ? CpuSeconds(server_pid) : 0;
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + std::chrono::duration<double>(seconds);
  uint64_t seq = 0;
  int64_t wire_bytes = 0;
  int64_t sent = 0;   // timestamps or records
  int64_t units = 0;  // timestamps or pairs
  std::string wire;
  while (std::chrono::steady_clock::now() < deadline && !reader_failed.load()) {
    while (seq - acked.load(std::memory_order_acquire) >= static_cast<uint64_t>(inflight)) {
      std::this_thread::yield();
    }
    const size_t k = seq % bodies.size();
    IngestRequest& r = bodies[k];
    sent += records_of[k];
    units += pairs_of[k];
    ++seq;
    if (raw) {
      r.mutable_batch()->set_sequence(seq);
    } else {
      r.mutable_window()->set_sequence(seq);
    }
    wire_bytes += static_cast<int64_t>(r.ByteSizeLong());
    if (!stream->Write(r)) break;
  }
  IngestRequest close;
  close.mutable_close()->set_last_sequence(seq);
  stream->Write(close);
  stream->WritesDone();
  while (acked.load() < seq && !reader_failed.load()) std::this_thread::yield();
  const auto t1 = std::chrono::steady_clock::now();
  const double client_cpu = CpuSeconds(0) - client_cpu0;
  const double server_cpu = server_pid ? CpuSeconds(server_pid) - server_cpu0 : 0;
  reader.join();
  const grpc::Status status = stream->Finish();
  if (!status.ok() || acked.load() != seq) {
    std::fprintf(stderr, "ingest_bench: stream ended %d %s after %llu of %llu acks\n",
                 status.error_code(), status.error_message().c_str(),
                 static_cast<unsigned long long>(acked.load()),
                 static_cast<unsigned long long>(seq));
    return 1;
  }

  // Exact count: the run's total once it ended.
  perld::v1::GetRunResponse run;
  for (int i = 0; i < 600; ++i) {
    grpc::ClientContext c;
    perld::v1::GetRunRequest req;
    req.set_run(std::to_string(run_id));
    if (query->GetRun(&c, req, &run).ok() && run.run().state() != perld::v1::RUN_STATE_RUNNING) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double wall = std::chrono::duration<double>(t1 - t0).count();
  const double millions = static_cast<double>(units) / 1e6;
  std::printf(
      "ingest_bench mode=%s target=%s messages=%llu %s=%lld in %.3f s: %.2f M %s/s; "
      "daemon total records=%lld (%s); wire %.2f bytes per %s; CPU s per million %s: client %.3f, "
      "daemon %s\n",
      mode.c_str(), target.c_str(), static_cast<unsigned long long>(seq),
      raw ? "timestamps" : "records", static_cast<long long>(sent), wall, millions / wall,
      raw ? "timestamps" : "pairs", static_cast<long long>(run.total().records()),
      run.total().records() == sent ? "exact" : "MISMATCH",
      static_cast<double>(wire_bytes) / (millions * 1e6), raw ? "timestamp" : "pair",
      raw ? "timestamps" : "pairs", client_cpu / millions,
      server_pid ? std::to_string(server_cpu / millions).c_str() : "n/a");
  return run.total().records() == sent ? 0 : 1;
}
