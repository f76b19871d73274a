// The HTTP messages perld's routes see: HttpRequest (a parsed GET or HEAD:
// path, decoded query parameters, headers), HttpResponse (what a handler
// answers) and HttpRoute (one exact path and its handler). HttpServer
// (http_server.h) parses and writes them; handlers never see the wire.
//
// Plain data. Threads: a request is built on the server's event thread and
// then owned by the handler thread that runs the route.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

namespace perld::http {

inline constexpr char kDefaultMetricsHost[] = "127.0.0.1";
inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";
inline constexpr char kTextContentType[] = "text/plain; charset=utf-8";

struct HttpResponse {
  HttpResponse() = default;
  HttpResponse(int status_code, std::string text, std::string type = kTextContentType)
      : status(status_code), body(std::move(text)), content_type(std::move(type)) {}

  int status = 200;
  std::string body;
  std::string content_type = kTextContentType;
  // When set, the body is sent from this buffer without a copy (a large
  // body the handler renders into a reused buffer); `body` is ignored. The
  // server holds the pointer until the last byte is written.
  std::shared_ptr<const std::string> shared_body;
};

struct HttpRequest {
  std::string method;                         // "GET" or "HEAD"
  std::string path;                           // percent-decoded, without the query
  std::map<std::string, std::string> params;  // query parameters, percent-decoded ('+' is a
                                              // space); the last of repeated ones
  // Request headers by lowercase name; repeated ones joined with ", ".
  std::map<std::string, std::string> headers;
  std::string authorization;  // the Authorization header ("" when absent)

  // The header `lowercase_name`, or "" when absent.
  const std::string& Header(const std::string& lowercase_name) const {
    static const std::string kEmpty;
    auto it = headers.find(lowercase_name);
    return it == headers.end() ? kEmpty : it->second;
  }
};

// One exact path and its handler (run on one of the server's handler
// threads, concurrently with other routes and itself: it must be
// thread-safe).
struct HttpRoute {
  std::string path;  // starts with '/'
  std::function<HttpResponse(const HttpRequest&)> handler;
};

}  // namespace perld::http
