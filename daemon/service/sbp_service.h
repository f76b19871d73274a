// SbpService: SBK's Storage Benchmark Protocol 4.0 (proto/sbp/sbp.proto),
// served beside perld.v1 so SBK clients (`-out GrpcLogger -sbm HOST -sbmport
// 9717`) stream into perld unchanged: perld as a drop-in SBM.
//
// The SBP clients of the configured storage/action form one run (source sbp,
// named "sbp:<storage>:<action>", labels class=<storage>, action=<action>).
// Every SBP call maps onto the ingest machinery (ingest::RunTable), so remote
// windows take the same exact, exactly-once path as perld.v1.Ingest:
//   getVersion          {4, 0}; isVersionSupported: the major is 4.
//   getConfig           sbp.storageName, sbp.action, the daemon's timeUnit and
//                       latency range, request flags, and maxRecordSizeBytes:
//                       the largest SBP message accepted, MaxMessageBytes().
//   registerClient      the client's Config must name the same storage, action
//                       and time unit (case-insensitive storage; else
//                       FAILED_PRECONDITION); ids from 1, never reused; more
//                       than sbp.maxConnections registrations held at once:
//                       RESOURCE_EXHAUSTED. The client joins the run here (up
//                       to ingest.maxClientsPerRun clients over a run's life),
//                       so the run lasts until every registered client has
//                       streamed and closed. The registration belongs to the
//                       calling connection (SbpSlots): any other connection or
//                       token using the id gets PERMISSION_DENIED.
//   streamLatencies     joins the run as client "sbp-<id>" (windows mode);
//                       each record is one window delta: sequence numbers
//                       from 1 rising by 1 (else DATA_LOSS), one client id
//                       per stream (else INVALID_ARGUMENT), an unknown or
//                       freed id NOT_FOUND, a second stream of an id
//                       FAILED_PRECONDITION; the unsorted value -> count map
//                       is sorted and merged, and its counts must sum to
//                       validLatencyRecords (else INVALID_ARGUMENT). Records
//                       applied before an error stay applied. The stream's
//                       clean end closes the client in the run.
//   reportClientFailure logged and counted.
//   closeClient         frees the registration's slot. A client that never
//                       streamed, or whose stream ended in an error, gives
//                       its part of the run up at once (RunTable::Abandon:
//                       the run does not wait ingest.clientTimeoutMs for it
//                       and ends failed naming it).
// A slot is also freed when its client is gone from the run (not back within
// ingest.clientTimeoutMs) or the run ends (Control.StopRun included), counted
// by reason (SbpSlots). Every message larger than MaxMessageBytes() is
// refused with RESOURCE_EXHAUSTED, counted as an ingest refusal
// (reason="message_size"), as perld.v1.Ingest does past limits.maxMessageBytes.
// Errors other than those: INVALID_ARGUMENT (a message that does not parse),
// UNIMPLEMENTED (a method SBP does not have), UNAVAILABLE (shutting down).
// The run ends when every client that joined it has closed (or is gone, like
// an ingest client); the next registration starts a new run.
//
// C++: protoc's gRPC plugin cannot compile a service named `Service` (its
// generated `Service::Service` nests a class named like its enclosing one),
// so only SBP's messages are generated (sbp.pb.h) and this class is gRPC's
// public callback generic service: every method no registered service has
// comes here as bytes; `/Service/<name>` calls are parsed and answered with
// SBP's messages, anything else is UNIMPLEMENTED. There can be one generic
// service per server: this is it.
//
// Threads: gRPC's callback threads run the reactors; a record waiting for
// ingest memory (ingest.maxClientMemoryBytes) holds its callback thread
// until the recorder merged enough or the call is cancelled. Registrations
// live in SbpSlots (its own lock); the RunTable reports departures on its
// reaper thread (DepartureHook).
#pragma once

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/support/byte_buffer.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "daemon/config/current_config.h"
#include "daemon/ingest/ingest_stats.h"
#include "daemon/ingest/run_table.h"
#include "daemon/service/call_auth.h"
#include "daemon/service/sbp_slots.h"
#include "sbp/sbp.pb.h"

namespace perld::service {

// One SBP record as a run's remote window: counters copied, the unsorted
// value -> count map sorted by value (equal values merged), then the checks
// every remote window passes (ingest_codec.h). Errors name the record.
absl::StatusOr<runs::RemoteWindow> SbpWindow(const ::MessageLatenciesRecord& r,
                                             const LatencyConfig& run, int64_t max_pairs);

class SbpService final : public grpc::CallbackGenericService {
 public:
  static constexpr int32_t kMajor = 4;
  static constexpr int32_t kMinor = 0;

  // Every call needs Access::kSbp from `auth`; refusals are counted in `stats`.
  SbpService(ingest::RunTable& runs, ingest::IngestStats& stats,
             const config::CurrentConfig& config, const CallAuth& auth);

  // The largest SBP message accepted (and told to clients as
  // maxRecordSizeBytes): limits.maxMessageBytes, or sbp.maxRecordSizeMB
  // when that is smaller.
  static int64_t MaxMessageBytes(const config::DaemonConfig& config);

  // gRPC: a reactor for every call no registered service takes.
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

  // For RunTable::SetDepartureHook: frees the slots of clients gone and
  // of runs ended. Keeps the slots alive as long as the hook exists.
  ingest::RunTable::DepartureHook DepartureHook() const;

  const SbpSlots& slots() const { return *slots_; }
  // Failures SBK clients reported (reportClientFailure).
  uint64_t client_failures() const { return failures_.load(std::memory_order_relaxed); }

 private:
  class UnaryCall;
  class LatencyStream;
  // A unary method: the request's bytes in, the response's bytes out.
  using Unary =
      std::function<grpc::Status(SbpService& service, grpc::GenericCallbackServerContext* context,
                                 grpc::ByteBuffer* request, grpc::ByteBuffer* response)>;
  template <typename Request, typename Response>
  static Unary Handler(grpc::Status (SbpService::*method)(grpc::GenericCallbackServerContext*,
                                                          const Request&, Response*));

  grpc::Status GetVersion(grpc::GenericCallbackServerContext* context,
                          const google::protobuf::Empty& request, ::Version* response);
  grpc::Status IsVersionSupported(grpc::GenericCallbackServerContext* context,
                                  const ::Version& request, google::protobuf::BoolValue* response);
  grpc::Status GetConfig(grpc::GenericCallbackServerContext* context,
                         const google::protobuf::Empty& request, ::Config* response);
  grpc::Status RegisterClient(grpc::GenericCallbackServerContext* context, const ::Config& request,
                              ::ClientID* response);
  grpc::Status ReportClientFailure(grpc::GenericCallbackServerContext* context,
                                   const ::ClientFailure& request,
                                   google::protobuf::Empty* response);
  grpc::Status CloseClient(grpc::GenericCallbackServerContext* context, const ::ClientID& request,
                           google::protobuf::Empty* response);

  // RESOURCE_EXHAUSTED (counted) when `message` is larger than accepted.
  grpc::Status CheckSize(const grpc::ByteBuffer& message, const config::DaemonConfig& config);

  ingest::RunTable& runs_;
  ingest::IngestStats& stats_;
  const config::CurrentConfig& config_;
  const CallAuth& auth_;
  const std::map<std::string, Unary> unary_;  // by full method name, "/Service/getVersion"
  std::shared_ptr<SbpSlots> slots_ = std::make_shared<SbpSlots>();
  std::atomic<uint64_t> failures_{0};
};

}  // namespace perld::service
