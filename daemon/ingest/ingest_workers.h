// IngestWorkers: the threads that handle ingest messages -- protobuf parse,
// decode, the run table's offer -- so that gRPC's callback threads (two on a
// 2-core host, shared by every callback method) only move bytes and stay
// free for queries: a GetClients or GetRun is answered in milliseconds while
// every client streams at full speed, instead of queueing behind thousands
// of window decodes (tests/bench/DAEMON.md, "Queries while every client
// streams").
//
// A fixed pool of `threads` threads ("perld-ingest-N") over one FIFO. A
// stream posts at most one message at a time (its reads are sequential: the
// next read starts when the last message was handled), so one stream's
// messages are handled in order and never concurrently.
//
// Threads: Post from any thread. Stop (the destructor) runs what is queued,
// then joins; call it after the gRPC server stopped (no more posts).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace perld::ingest {

class IngestWorkers {
 public:
  explicit IngestWorkers(int threads);
  ~IngestWorkers();
  IngestWorkers(const IngestWorkers&) = delete;
  IngestWorkers& operator=(const IngestWorkers&) = delete;

  void Post(std::function<void()> task);

  // min(hardware threads, 4), at least 1: the decode keeps pace with the
  // single recorder thread, which merges what it produces.
  static int DefaultThreads();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace perld::ingest
