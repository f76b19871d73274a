// libFuzzer target: HTTP request heads as perld's HTTP server reads them
// from untrusted clients. Any bytes: FindHeadEnd finds the same end however
// they are split, and a parsed head is either refused with one of the
// documented statuses or a GET/HEAD with a path that starts with '/'.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "daemon/http/http_request_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  const size_t end = perld::http::FindHeadEnd(bytes);
  // Scanning on from any earlier point finds the same end.
  if (perld::http::FindHeadEnd(bytes, size / 2) != end && end > size / 2) std::abort();
  if (end == absl::string_view::npos) return 0;
  if (end > size) std::abort();
  const perld::http::ParsedHead head = perld::http::ParseRequestHead(bytes.substr(0, end));
  switch (head.status) {
    case 0:
      if (head.request.method != "GET" && head.request.method != "HEAD") std::abort();
      if (head.request.path.empty() || head.request.path[0] != '/') std::abort();
      break;
    case 400:
    case 405:
    case 413:
    case 431:
    case 505:
      if (head.message.empty()) std::abort();
      break;
    default:
      std::abort();
  }
  return 0;
}
