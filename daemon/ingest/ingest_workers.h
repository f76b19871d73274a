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

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "daemon/common/mutex.h"

namespace perld::ingest {

class IngestWorkers {
 public:
  explicit IngestWorkers(int threads);
  ~IngestWorkers();
  IngestWorkers(const IngestWorkers&) = delete;
  IngestWorkers& operator=(const IngestWorkers&) = delete;

  void Post(std::function<void()> task);

  // `configured` (ingest.workers) when > 0; else one fewer than the
  // hardware threads, 1 to 4: the decode keeps pace with the single
  // recorder thread, which merges what it produces, and leaves that thread
  // a core of its own. On 2 cores that is one worker: two made a query's
  // tail under a flood of clients ~1.5x longer for 5-8% more peak throughput
  // (tests/bench/DAEMON.md, "One ingest worker on 2 cores").
  static int ThreadsFor(int64_t configured);
  static int DefaultThreads() { return ThreadsFor(0); }

 private:
  void Loop();

  Mutex mu_;
  CondVar ready_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace perld::ingest
