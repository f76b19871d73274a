#include "daemon/http/http_request_parser.h"

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace perld::http {
namespace {

// RFC 9110 tchar: the characters of a method or a header field name.
bool IsTokenChar(unsigned char c) {
  if (absl::ascii_isalnum(c)) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTokenChar(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// A field value: visible characters, spaces, tabs and obs-text; no CTLs.
bool IsFieldValue(absl::string_view s) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

// A request target: visible ASCII only (anything else must be %-encoded).
bool IsTargetText(absl::string_view s) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

absl::string_view TrimOws(absl::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

ParsedHead Refuse(int status, std::string message) {
  ParsedHead out;
  out.status = status;
  out.message = std::move(message);
  return out;
}

// The head's lines without their terminators (CRLF or LF), up to the blank line.
std::vector<absl::string_view> HeadLines(absl::string_view head) {
  std::vector<absl::string_view> lines;
  while (!head.empty()) {
    const size_t nl = head.find('\n');
    absl::string_view line = head.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;
    lines.push_back(line);
    if (nl == absl::string_view::npos) break;
    head.remove_prefix(nl + 1);
  }
  return lines;
}

}  // namespace

size_t FindHeadEnd(absl::string_view data, size_t scan_from) {
  // A line break followed by an optional CR and another line break. Leading
  // empty lines before a request line are not allowed (the parser refuses).
  size_t at = scan_from > 2 ? scan_from - 2 : 0;
  while (true) {
    const size_t nl = data.find('\n', at);
    if (nl == absl::string_view::npos) return absl::string_view::npos;
    size_t next = nl + 1;
    if (next < data.size() && data[next] == '\r') ++next;
    if (next >= data.size()) return absl::string_view::npos;
    if (data[next] == '\n') return next + 1;
    at = nl + 1;
  }
}

bool PercentDecode(absl::string_view text, bool plus_is_space, std::string* out) {
  out->clear();
  out->reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return false;
      const int hi = HexValue(text[i + 1]);
      const int lo = HexValue(text[i + 2]);
      if (hi < 0 || lo < 0) return false;
      const char decoded = static_cast<char>(hi * 16 + lo);
      if (decoded == '\0') return false;
      out->push_back(decoded);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

ParsedHead ParseRequestHead(absl::string_view head) {
  const std::vector<absl::string_view> lines = HeadLines(head);
  if (lines.empty()) return Refuse(400, "empty request line");

  // Request line: METHOD SP TARGET SP HTTP/1.x
  const std::vector<absl::string_view> parts = absl::StrSplit(lines[0], ' ');
  if (parts.size() != 3) return Refuse(400, "malformed request line");
  const absl::string_view method = parts[0];
  const absl::string_view target = parts[1];
  const absl::string_view version = parts[2];
  if (!IsToken(method)) return Refuse(400, "malformed method");
  if (target.empty() || target[0] != '/' || !IsTargetText(target)) {
    return Refuse(400, "the request target must be a path (origin form)");
  }
  if (version.size() != 8 || !absl::StartsWith(version, "HTTP/") || version[6] != '.' ||
      !absl::ascii_isdigit(static_cast<unsigned char>(version[5])) ||
      !absl::ascii_isdigit(static_cast<unsigned char>(version[7]))) {
    return Refuse(400, "malformed HTTP version");
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return Refuse(505, "only HTTP/1.0 and HTTP/1.1 are served");
  }
  const bool http11 = version == "HTTP/1.1";

  ParsedHead out;
  HttpRequest& request = out.request;
  request.method = std::string(method);

  // Header fields.
  if (lines.size() - 1 > static_cast<size_t>(kMaxHeaderFields)) {
    return Refuse(431, absl::StrCat("more than ", kMaxHeaderFields, " header fields"));
  }
  int hosts = 0;
  bool have_length = false;
  uint64_t content_length = 0;
  bool chunked_or_coded = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    const absl::string_view line = lines[i];
    if (line[0] == ' ' || line[0] == '\t') return Refuse(400, "obsolete header line folding");
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) return Refuse(400, "malformed header line");
    const absl::string_view name = line.substr(0, colon);
    if (!IsToken(name)) return Refuse(400, "malformed header name");
    const absl::string_view value = TrimOws(line.substr(colon + 1));
    if (!IsFieldValue(value)) return Refuse(400, "control character in a header value");
    const std::string lower = absl::AsciiStrToLower(name);
    if (lower == "host") ++hosts;
    if (lower == "content-length") {
      if (value.empty() || value.size() > 18) return Refuse(400, "malformed Content-Length");
      uint64_t n = 0;
      for (char c : value) {
        if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
          return Refuse(400, "malformed Content-Length");
        }
        n = n * 10 + static_cast<uint64_t>(c - '0');
      }
      if (have_length && n != content_length) return Refuse(400, "conflicting Content-Length");
      have_length = true;
      content_length = n;
    }
    if (lower == "transfer-encoding") chunked_or_coded = true;
    auto [it, inserted] = request.headers.try_emplace(lower, value);
    if (!inserted) absl::StrAppend(&it->second, ", ", value);
  }
  if (http11 && hosts != 1) return Refuse(400, "an HTTP/1.1 request needs exactly one Host");

  if (method != "GET" && method != "HEAD") {
    return Refuse(405, absl::StrCat("method ", method, " is not allowed (GET, HEAD)"));
  }
  if (chunked_or_coded || content_length > 0) {
    return Refuse(413, "request bodies are not accepted");
  }

  // Target: path ['?' query] (a fragment is never sent; cut it if it is).
  absl::string_view raw = target.substr(0, target.find('#'));
  const size_t question = raw.find('?');
  const absl::string_view raw_path = raw.substr(0, question);
  if (!PercentDecode(raw_path, /*plus_is_space=*/false, &request.path)) {
    return Refuse(400, "malformed %-escape in the path");
  }
  if (question != absl::string_view::npos) {
    std::string key;
    std::string value;
    for (absl::string_view pair : absl::StrSplit(raw.substr(question + 1), '&')) {
      if (pair.empty()) continue;
      const size_t eq = pair.find('=');
      if (!PercentDecode(pair.substr(0, eq), true, &key) ||
          !PercentDecode(eq == absl::string_view::npos ? absl::string_view() : pair.substr(eq + 1),
                         true, &value)) {
        return Refuse(400, "malformed %-escape in the query");
      }
      request.params[key] = value;  // the last of repeated ones
    }
  }

  if (auto it = request.headers.find("authorization"); it != request.headers.end()) {
    request.authorization = it->second;
  }
  out.keep_alive = http11;
  if (auto it = request.headers.find("connection"); it != request.headers.end()) {
    for (absl::string_view option : absl::StrSplit(it->second, ',')) {
      if (absl::EqualsIgnoreCase(TrimOws(option), "close")) out.keep_alive = false;
    }
  }
  return out;
}

}  // namespace perld::http
