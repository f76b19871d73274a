// HTTP/1.x request heads (RFC 9112), parsed strictly: the request line and
// the header block of a GET or HEAD without a body, as HttpServer reads them
// from untrusted clients. A head that is not one is answered with a status:
//   400  malformed request line, target, header line or escape; a
//        HTTP/1.1 request without exactly one Host; a bad Content-Length
//   405  a method other than GET and HEAD (the answer names them in Allow)
//   413  a request body (Content-Length > 0, or any Transfer-Encoding)
//   431  more than kMaxHeaderFields header fields
//   505  a version other than HTTP/1.0 and HTTP/1.1
// The caller bounds the head's size (FindHeadEnd finds its end).
//
// Pure functions; any thread.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "daemon/http/http_message.h"

namespace perld::http {

inline constexpr int kMaxHeaderFields = 100;

// The offset just past the blank line that ends the head at the start of
// `data` (lines end in CRLF or a bare LF), or absl::string_view::npos while it
// is incomplete. `scan_from` skips bytes already scanned (a multiple call on
// a growing buffer stays linear).
size_t FindHeadEnd(absl::string_view data, size_t scan_from = 0);

struct ParsedHead {
  int status = 0;       // 0: a request; else the status to answer (see above)
  std::string message;  // why not, for the answer's body
  HttpRequest request;
  bool keep_alive = false;  // HTTP/1.1 without "Connection: close"
};

// Parses `head` (the bytes up to FindHeadEnd, blank line included).
ParsedHead ParseRequestHead(absl::string_view head);

// %XX escapes decoded (and '+' as a space when `plus_is_space`, as in a
// query); false on a malformed escape or a decoded NUL.
bool PercentDecode(absl::string_view text, bool plus_is_space, std::string* out);

}  // namespace perld::http
