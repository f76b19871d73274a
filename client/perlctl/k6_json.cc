#include "client/perlctl/k6_json.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/common/json_string.h"

namespace perld::perlctl {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(absl::string_view text) : s_(text) {}

  absl::StatusOr<JsonValue> Document() {
    JsonValue v;
    SkipSpace();
    if (!Value(&v, 0)) return Error();
    SkipSpace();
    if (i_ != s_.size()) {
      Fail("unexpected text after the value");
      return Error();
    }
    return v;
  }

 private:
  absl::Status Error() const {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON at column ", at_ + 1, ": ", why_));
  }
  bool Fail(std::string why) {
    if (why_.empty()) {
      why_ = std::move(why);
      at_ = i_;
    }
    return false;
  }
  void SkipSpace() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) {
      ++i_;
    }
  }
  bool Literal(absl::string_view word) {
    if (s_.substr(i_, word.size()) != word) return Fail("unknown literal");
    i_ += word.size();
    return true;
  }

  bool Value(JsonValue* v, int depth) {
    if (depth >= kMaxDepth) return Fail("nested deeper than 64");
    if (i_ >= s_.size()) return Fail("a value is missing (the line ends)");
    switch (s_[i_]) {
      case '{':
        return Object(v, depth);
      case '[':
        return Array(v, depth);
      case '"':
        v->type = JsonValue::Type::kString;
        return String(&v->text);
      case 't':
        v->type = JsonValue::Type::kBool;
        v->boolean = true;
        return Literal("true");
      case 'f':
        v->type = JsonValue::Type::kBool;
        return Literal("false");
      case 'n':
        v->type = JsonValue::Type::kNull;
        return Literal("null");
      default:
        v->type = JsonValue::Type::kNumber;
        return Number(&v->text);
    }
  }

  bool Object(JsonValue* v, int depth) {
    v->type = JsonValue::Type::kObject;
    ++i_;  // '{'
    SkipSpace();
    if (i_ < s_.size() && s_[i_] == '}') {
      ++i_;
      return true;
    }
    for (;;) {
      SkipSpace();
      if (i_ >= s_.size() || s_[i_] != '"') return Fail("a member name (a string) is expected");
      std::string key;
      if (!String(&key)) return false;
      SkipSpace();
      if (i_ >= s_.size() || s_[i_] != ':') return Fail("':' is expected after a member name");
      ++i_;
      SkipSpace();
      JsonValue member;
      if (!Value(&member, depth + 1)) return false;
      v->keys.push_back(std::move(key));
      v->items.push_back(std::move(member));
      SkipSpace();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < s_.size() && s_[i_] == '}') {
        ++i_;
        return true;
      }
      return Fail("',' or '}' is expected in an object");
    }
  }

  bool Array(JsonValue* v, int depth) {
    v->type = JsonValue::Type::kArray;
    ++i_;  // '['
    SkipSpace();
    if (i_ < s_.size() && s_[i_] == ']') {
      ++i_;
      return true;
    }
    for (;;) {
      SkipSpace();
      JsonValue item;
      if (!Value(&item, depth + 1)) return false;
      v->items.push_back(std::move(item));
      SkipSpace();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < s_.size() && s_[i_] == ']') {
        ++i_;
        return true;
      }
      return Fail("',' or ']' is expected in an array");
    }
  }

  bool String(std::string* out) {
    ++i_;  // '"'
    const char* why = nullptr;
    if (json::ReadStringBody(std::string_view(s_.data(), s_.size()), &i_, out, &why)) return true;
    return Fail(why);
  }

  // RFC 8259's number grammar; the text is kept as written.
  bool Number(std::string* out) {
    const size_t begin = i_;
    const auto digits = [&] {
      const size_t from = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ - from;
    };
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    const size_t int_begin = i_;
    const size_t n = digits();
    if (n == 0) {
      i_ = begin;
      return Fail("a value is expected (object, array, string, number, true, false or null)");
    }
    if (n > 1 && s_[int_begin] == '0') return Fail("a number with a leading zero");
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (digits() == 0) return Fail("a number needs digits after '.'");
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (digits() == 0) return Fail("a number needs digits in its exponent");
    }
    *out = std::string(s_.substr(begin, i_ - begin));
    return true;
  }

  absl::string_view s_;
  size_t i_ = 0;
  size_t at_ = 0;
  std::string why_;
};

const char* TypeName(JsonValue::Type t) {
  switch (t) {
    case JsonValue::Type::kNull:
      return "null";
    case JsonValue::Type::kBool:
      return "a boolean";
    case JsonValue::Type::kNumber:
      return "a number";
    case JsonValue::Type::kString:
      return "a string";
    case JsonValue::Type::kArray:
      return "an array";
    case JsonValue::Type::kObject:
      break;
  }
  return "an object";
}

// The string member `key` of `object` (InvalidArgument if missing or not a string).
absl::StatusOr<absl::string_view> StringMember(const JsonValue& object, absl::string_view key,
                                               absl::string_view where) {
  const JsonValue* v = object.Find(key);
  if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, " has no \"", key, "\""));
  if (v->type != JsonValue::Type::kString) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "'s \"", key, "\" is ", TypeName(v->type), ", not a string"));
  }
  return absl::string_view(v->text);
}

}  // namespace

const JsonValue* JsonValue::Find(absl::string_view key) const {
  if (type != Type::kObject) return nullptr;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] == key) return &items[i];
  }
  return nullptr;
}

absl::StatusOr<JsonValue> ParseJson(absl::string_view text) { return Parser(text).Document(); }

absl::StatusOr<std::optional<K6Point>> K6MetricReader::Line(absl::string_view line) {
  absl::StatusOr<JsonValue> parsed = ParseJson(line);
  if (!parsed.ok()) return parsed.status();
  const JsonValue& root = *parsed;
  if (root.type != JsonValue::Type::kObject) {
    return absl::InvalidArgumentError(
        absl::StrCat("the line is ", TypeName(root.type), ", not a k6 JSON object"));
  }
  absl::StatusOr<absl::string_view> type = StringMember(root, "type", "the line");
  if (!type.ok()) return type.status();
  absl::StatusOr<absl::string_view> metric = StringMember(root, "metric", "the line");
  if (!metric.ok()) return metric.status();
  const JsonValue* data = root.Find("data");
  if (data == nullptr || data->type != JsonValue::Type::kObject) {
    return absl::InvalidArgumentError("the line has no \"data\" object");
  }
  if (*type == "Metric") {
    absl::StatusOr<absl::string_view> metric_type = StringMember(*data, "type", "\"data\"");
    if (!metric_type.ok()) return metric_type.status();
    metrics_seen_.push_back(absl::StrCat(*metric, " (", *metric_type, ")"));
    if (*metric != metric_) return std::nullopt;
    if (*metric_type != "trend") {
      return absl::FailedPreconditionError(absl::StrCat(
          "metric '", metric_, "' is a ", *metric_type,
          ", not a trend: perlctl import takes a trend's samples (http_req_duration, "
          "http_req_waiting, iteration_duration, ... or a custom Trend), one record each"));
    }
    const JsonValue* contains = data->Find("contains");
    const absl::string_view what = contains != nullptr && contains->type == JsonValue::Type::kString
                                       ? absl::string_view(contains->text)
                                       : absl::string_view("(nothing)");
    if (what != "time") {
      return absl::FailedPreconditionError(
          absl::StrCat("metric '", metric_, "' is a trend of '", what,
                       "', not of time: its values are not durations (a custom Trend needs "
                       "new Trend(name, true) to hold milliseconds)"));
    }
    declared_ = true;
    return std::nullopt;
  }
  if (*type != "Point") {
    return absl::InvalidArgumentError(
        absl::StrCat("\"type\" is '", *type, "', not Metric or Point"));
  }
  if (*metric != metric_) return std::nullopt;
  if (!declared_) {
    return absl::InvalidArgumentError(
        absl::StrCat("a Point of '", metric_,
                     "' before its Metric line: its type is unknown (k6 declares each metric "
                     "before its first Point)"));
  }
  K6Point point;
  const JsonValue* value = data->Find("value");
  if (value == nullptr || value->type != JsonValue::Type::kNumber) {
    return absl::InvalidArgumentError(
        absl::StrCat("the Point's \"value\" is ",
                     value == nullptr ? "missing" : TypeName(value->type), ", not a number"));
  }
  point.value = value->text;
  absl::StatusOr<absl::string_view> time = StringMember(*data, "time", "the Point");
  if (!time.ok()) return time.status();
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, *time, &t, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the Point's \"time\" '", *time, "' is not RFC 3339: ", error));
  }
  point.unix_ns = absl::ToUnixNanos(t);
  return std::optional<K6Point>(std::move(point));
}

}  // namespace perld::perlctl
