#include "daemon/service/call_auth.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/secret_file.h"

namespace perld::service {
namespace {

// Equal strings, in time that depends only on their lengths.
bool SameToken(std::string_view given, const std::string& expected) {
  if (expected.empty() || given.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  }
  return diff == 0;
}

absl::Status ReadToken(const std::string& path, const char* key, std::string* token) {
  if (path.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> read = common::ReadTokenFile(path, key);
  if (!read.ok()) return read.status();
  *token = std::move(*read);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CallAuth>> CallAuth::Create(const config::AuthConfig& auth) {
  auto result = std::make_unique<CallAuth>();
  if (absl::Status s =
          ReadToken(auth.ingest_token_file, "auth.ingestTokenFile", &result->ingest_token_);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          ReadToken(auth.query_token_file, "auth.queryTokenFile", &result->query_token_);
      !s.ok()) {
    return s;
  }
  if (!result->ingest_token_.empty() && result->ingest_token_ == result->query_token_) {
    return absl::InvalidArgumentError(
        "auth.ingestTokenFile and auth.queryTokenFile hold the same token: the query token "
        "would grant writes");
  }
  result->sbp_open_ = auth.sbp_open;
  return result;
}

AuthVerdict CallAuth::Check(std::string_view authorization, Access access) const {
  if (!enabled() || (access == Access::kSbp && sbp_open_)) return AuthVerdict::kAllowed;
  std::string_view token;
  // RFC 6750: the scheme is case-insensitive, one space before the token.
  if (authorization.size() > 7 &&
      absl::StartsWithIgnoreCase(absl::string_view(authorization.data(), 7), "bearer ")) {
    token = authorization.substr(7);
  }
  if (SameToken(token, ingest_token_)) return AuthVerdict::kAllowed;
  if (SameToken(token, query_token_)) {
    if (access == Access::kRead) return AuthVerdict::kAllowed;
    permission_denied_.fetch_add(1, std::memory_order_relaxed);
    return AuthVerdict::kPermissionDenied;
  }
  unauthenticated_.fetch_add(1, std::memory_order_relaxed);
  return AuthVerdict::kUnauthenticated;
}

grpc::Status CallAuth::CheckCall(const grpc::ServerContextBase& context, Access access) const {
  if (!enabled()) return grpc::Status::OK;
  std::string_view authorization;
  const auto& metadata = context.client_metadata();
  if (const auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = std::string_view(it->second.data(), it->second.size());
  }
  switch (Check(authorization, access)) {
    case AuthVerdict::kAllowed:
      return grpc::Status::OK;
    case AuthVerdict::kPermissionDenied:
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "the query token may only read (Query); Ingest, Control and SBP need "
                          "the ingest token");
    case AuthVerdict::kUnauthenticated:
      break;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      authorization.empty()
                          ? "this perld requires a token: send 'authorization: Bearer <token>' "
                            "(perlctl --token-file FILE)"
                          : "the bearer token is not one of this perld's tokens");
}

}  // namespace perld::service
