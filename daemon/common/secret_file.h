// Reading the files that hold secrets and certificates: tokens (the
// daemon's auth.*TokenFile, a client's token file), private keys and PEM
// certificates (the daemon's TLS setup, a client's channel). Shared by the
// daemon (service/call_auth, server/server_security) and the client library
// (client/lib/secure_channel).
//
// Secret files -- a token or a private key -- must be regular files that
// grant nothing to "others" (mode & 007 == 0): a file anyone on the host can
// read is refused with its path and mode, never its content. A token file
// holds one token: surrounding whitespace (the trailing newline) is removed,
// the rest must be non-empty printable ASCII without spaces. Errors name the
// file and `what` (e.g. "token file"), never the content.
//
// Threads: free functions, no shared state.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace perld::common {

inline constexpr size_t kMaxSecretFileBytes = size_t{64} << 10;
inline constexpr size_t kMaxPemFileBytes = size_t{1} << 20;

// A secret file's content (see the header comment); `what` names it in errors.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what);
// A token file's token: ReadSecretFile, trimmed and checked.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& what);
// A public PEM file (certificate, CA bundle): any mode, at most kMaxPemFileBytes.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what);

}  // namespace perld::common
