// SbpService: SBK's Storage Benchmark Protocol 4.0 (proto/sbp/sbp.proto),
// served beside perld.v1 so SBK clients (`-out GrpcLogger -sbm HOST -sbmport
// 9717`) stream into perld unchanged: perld as a drop-in SBM.
//
// The SBP clients of the configured storage/action form one run (source sbp,
// named "sbp:<storage>:<action>", labels class=<storage>, action=<action>).
// Every SBP call maps onto the ingest machinery (IngestRuns), so remote
// windows take the same exact, exactly-once path as perld.v1.Ingest:
//   getVersion          {4, 0}; isVersionSupported: the major is 4.
//   getConfig           sbp.storageName, sbp.action, the daemon's timeUnit and
//                       latency range, request flags, sbp.maxRecordSizeMB.
//   registerClient      the client's Config must name the same storage, action
//                       and time unit (case-insensitive storage; else
//                       FAILED_PRECONDITION); ids from 1, never reused; more
//                       than sbp.maxConnections clients registered and not
//                       closed at once: RESOURCE_EXHAUSTED. The client joins
//                       the run here (up to ingest.maxClientsPerRun clients
//                       over a run's life), so the run lasts until every
//                       registered client has streamed and closed.
//   streamLatencies     joins the run as client "sbp-<id>" (windows mode);
//                       each record is one window delta: sequence numbers
//                       from 1 rising by 1 (else DATA_LOSS), one client id
//                       per stream (else INVALID_ARGUMENT), an unknown id
//                       NOT_FOUND; the unsorted value -> count map is sorted
//                       and merged, and its counts must sum to
//                       validLatencyRecords (else INVALID_ARGUMENT). Records
//                       applied before an error stay applied. The stream's
//                       end closes the client in the run.
//   reportClientFailure logged and counted; closeClient frees the connection.
// The run ends when every client that joined it has closed (or is gone after
// ingest.clientTimeoutMs, like an ingest client); the next registration
// starts a new run.
//
// C++: protoc's gRPC plugin cannot compile a service named `Service` (its
// generated `Service::Service` nests a class named like its enclosing one),
// so only SBP's messages are generated (sbp.pb.h) and this class registers
// the seven `/Service/<name>` methods itself with gRPC's handler templates,
// as generated code does.
//
// Threads: gRPC handler threads; the client table is guarded by one mutex,
// taken per call (never per record).
#pragma once

#include <google/protobuf/empty.pb.h>
#include <google/protobuf/wrappers.pb.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/impl/service_type.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>

#include "daemon/service/call_auth.h"
#include "daemon/service/current_config.h"
#include "daemon/service/ingest_runs.h"
#include "sbp/sbp.pb.h"

namespace perld::service {

// One SBP record as a run's remote window: counters copied, the unsorted
// value -> count map sorted by value (equal values merged), then the checks
// every remote window passes (ingest_codec.h). Errors name the record.
absl::StatusOr<runs::RemoteWindow> SbpWindow(const ::MessageLatenciesRecord& r,
                                             const LatencyConfig& run, int64_t max_pairs);

class SbpService final : public grpc::Service {
 public:
  static constexpr int32_t kMajor = 4;
  static constexpr int32_t kMinor = 0;

  // Every call needs Access::kSbp from `auth`.
  SbpService(IngestRuns& runs, const CurrentConfig& config, const CallAuth& auth);

  // The handlers (called by gRPC through the registered methods).
  grpc::Status getVersion(grpc::ServerContext* context, const google::protobuf::Empty* request,
                          ::Version* response);
  grpc::Status isVersionSupported(grpc::ServerContext* context, const ::Version* request,
                                  google::protobuf::BoolValue* response);
  grpc::Status getConfig(grpc::ServerContext* context, const google::protobuf::Empty* request,
                         ::Config* response);
  grpc::Status registerClient(grpc::ServerContext* context, const ::Config* request,
                              ::ClientID* response);
  grpc::Status streamLatencies(grpc::ServerContext* context,
                               grpc::ServerReader<::MessageLatenciesRecord>* reader,
                               google::protobuf::Empty* response);
  grpc::Status reportClientFailure(grpc::ServerContext* context, const ::ClientFailure* request,
                                   google::protobuf::Empty* response);
  grpc::Status closeClient(grpc::ServerContext* context, const ::ClientID* request,
                           google::protobuf::Empty* response);

  // Failures SBK clients reported (reportClientFailure).
  uint64_t client_failures() const { return failures_.load(std::memory_order_relaxed); }

 private:
  IngestRuns& runs_;
  const CurrentConfig& config_;
  const CallAuth& auth_;
  std::atomic<uint64_t> failures_{0};

  std::mutex mu_;
  int64_t next_id_ = 1;                 // mu_
  std::map<int64_t, bool> registered_;  // mu_: id -> streamed already
};

}  // namespace perld::service
