// k6's JSON output (`k6 run --out json=FILE`, newline-delimited) for
// `perlctl import --format k6`. Each line is one object:
//
//   {"type":"Metric","data":{"type":"trend","contains":"time",...},"metric":"http_req_duration"}
//   {"type":"Point","data":{"time":"2024-01-01T10:00:00.123456789+01:00","value":12.345678,
//                           "tags":{...}},"metric":"http_req_duration"}
//
// A Metric line declares a metric once, before its first Point; a Point is
// one sample. Values of a trend that `contains` "time" are milliseconds
// (k6 writes a duration as float64 ms, so its text has up to nanosecond
// digits). K6MetricReader keeps the Points of one metric, which must be
// declared a trend of time: a counter, rate or gauge (or a trend of plain
// numbers) is refused with the metric's type, a Point of the metric before
// its Metric line too. Every line must be a JSON object (a malformed line is
// refused, naming its column), whatever metric it is about.
//
// ParseJson is a small strict JSON (RFC 8259) reader: numbers keep their
// text, so a value is scaled exactly (decimal_scale.h), never through a
// double.
//
// Not thread-safe (one reader per file pass); the functions are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace perld::perlctl {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  std::string text;               // a string's decoded text, or a number's text
  std::vector<JsonValue> items;   // an array's items, an object's values
  std::vector<std::string> keys;  // an object's keys (parallel to items)

  // The first member named `key` of an object, or null.
  const JsonValue* Find(absl::string_view key) const;
};

// One JSON value filling `text` (whitespace around it allowed). Nesting
// deeper than 64 is refused. InvalidArgument naming the (1-based) column.
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

// A Point of the metric read.
struct K6Point {
  int64_t unix_ns = 0;  // its "time" (RFC 3339 with a zone)
  std::string value;    // its "value" as k6 wrote it (milliseconds for time trends)
};

class K6MetricReader {
 public:
  explicit K6MetricReader(std::string metric) : metric_(std::move(metric)) {}

  // One line of the file (without its newline; blank lines are skipped by
  // the caller). The metric's Point, or nullopt for any other line; an
  // error (InvalidArgument for malformed input, FailedPrecondition for a
  // metric that is not a trend of time) ends the file.
  absl::StatusOr<std::optional<K6Point>> Line(absl::string_view line);

  // The metric's Metric line was read (its type was a trend of time).
  bool declared() const { return declared_; }
  // Every metric a Metric line declared, in order, as "name (type)": for a
  // message naming the metrics a file has when the one asked for is not there.
  const std::vector<std::string>& metrics_seen() const { return metrics_seen_; }

 private:
  const std::string metric_;
  bool declared_ = false;
  std::vector<std::string> metrics_seen_;
};

}  // namespace perld::perlctl
