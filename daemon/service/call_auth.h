// CallAuth: the bearer-token check of every gRPC call and HTTP route
// (README "Security", config section auth).
//
// Auth is on when either token file is configured. Then a caller sends
// "authorization: Bearer <token>": the ingest token may do everything
// (Ingest, Control, SBP, Query), the query token may only read (Query, the
// HTTP read routes). No token or an unknown one: UNAUTHENTICATED; a query
// token on a write: PERMISSION_DENIED. SBP calls need the ingest token
// unless auth.sbpOpen. Tokens are compared in constant time and never
// logged or echoed in a message. Every refusal is counted.
//
// Threads: immutable after Create; Check/CheckCall from any thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "daemon/config/daemon_config.h"

namespace perld::service {

enum class Access {
  kRead,   // Query, /api/*, /metrics when protected
  kWrite,  // Ingest, Control
  kSbp,    // SBK's SBP service: kWrite unless auth.sbpOpen
};

enum class AuthVerdict { kAllowed, kUnauthenticated, kPermissionDenied };

class CallAuth {
 public:
  // Auth off: every call is allowed.
  CallAuth() = default;
  // Reads the token files (common::ReadTokenFile in daemon/common/secret_file.h:
  // a file that grants anything to others is refused); errors name the key
  // and file, never a token.
  static absl::StatusOr<std::unique_ptr<CallAuth>> Create(const config::AuthConfig& auth);

  bool enabled() const { return !ingest_token_.empty() || !query_token_.empty(); }
  // `authorization`: the header's value ("" when absent).
  AuthVerdict Check(std::string_view authorization, Access access) const;
  // Check on the call's "authorization" metadata, as the call's status.
  grpc::Status CheckCall(const grpc::ServerContextBase& context, Access access) const;

  uint64_t unauthenticated() const { return unauthenticated_.load(std::memory_order_relaxed); }
  uint64_t permission_denied() const { return permission_denied_.load(std::memory_order_relaxed); }

 private:
  std::string ingest_token_;
  std::string query_token_;
  bool sbp_open_ = false;
  mutable std::atomic<uint64_t> unauthenticated_{0};
  mutable std::atomic<uint64_t> permission_denied_{0};
};

}  // namespace perld::service
