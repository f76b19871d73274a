#include "daemon/state/json_columns.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "daemon/common/json_string.h"

namespace perld::state {
namespace {

void AppendString(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (u < 0x20) {
      out->append("\\u00");
      out->push_back(kHex[u >> 4]);
      out->push_back(kHex[u & 0xF]);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

void AppendDouble(std::string* out, double v) {
  if (!std::isfinite(v)) {
    out->append("null");
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);  // shortest round trip
  out->append(buf, r.ptr);
}

void AppendInt(std::string* out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

// A cursor over one JSON text. Every method skips leading whitespace, and
// returns false (leaving the position at the offending byte) on a mismatch.
class JsonReader {
 public:
  explicit JsonReader(std::string_view in) : in_(in) {}

  bool Consume(char c) {
    SkipSpace();
    if (pos_ < in_.size() && in_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  bool String(std::string* out) {
    if (!Consume('"')) {
      return false;
    }
    out->clear();
    const char* why = nullptr;
    return json::ReadStringBody(in_, &pos_, out, &why);
  }

  bool Int64(int64_t* out) {
    bool integral = false;
    const std::string_view token = NumberToken(&integral);
    if (token.empty() || !integral) {
      return false;
    }
    const auto r = std::from_chars(token.data(), token.data() + token.size(), *out);
    return r.ec == std::errc() && r.ptr == token.data() + token.size();
  }

  // A JSON number, or null (read as NaN).
  bool Double(double* out) {
    SkipSpace();
    if (in_.substr(pos_, 4) == "null") {
      pos_ += 4;
      *out = std::numeric_limits<double>::quiet_NaN();
      return true;
    }
    bool integral = false;
    const std::string_view token = NumberToken(&integral);
    if (token.empty()) {
      return false;
    }
    const auto r = std::from_chars(token.data(), token.data() + token.size(), *out);
    return r.ec == std::errc() && r.ptr == token.data() + token.size();
  }

  bool AtEnd() {
    SkipSpace();
    return pos_ == in_.size();
  }

  size_t pos() const { return pos_; }

 private:
  void SkipSpace() {
    while (pos_ < in_.size() &&
           (in_[pos_] == ' ' || in_[pos_] == '\t' || in_[pos_] == '\n' || in_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Digits() {
    const size_t start = pos_;
    while (pos_ < in_.size() && in_[pos_] >= '0' && in_[pos_] <= '9') {
      ++pos_;
    }
    return pos_ > start;
  }

  // Consumes -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? and returns it;
  // empty (position unchanged) when the grammar is not met.
  std::string_view NumberToken(bool* integral) {
    SkipSpace();
    const size_t start = pos_;
    auto fail = [&] {
      pos_ = start;
      return std::string_view();
    };
    if (pos_ < in_.size() && in_[pos_] == '-') {
      ++pos_;
    }
    const size_t int_start = pos_;
    if (!Digits() || (in_[int_start] == '0' && pos_ - int_start > 1)) {
      return fail();
    }
    *integral = true;
    if (pos_ < in_.size() && in_[pos_] == '.') {
      ++pos_;
      *integral = false;
      if (!Digits()) {
        return fail();
      }
    }
    if (pos_ < in_.size() && (in_[pos_] == 'e' || in_[pos_] == 'E')) {
      ++pos_;
      *integral = false;
      if (pos_ < in_.size() && (in_[pos_] == '+' || in_[pos_] == '-')) {
        ++pos_;
      }
      if (!Digits()) {
        return fail();
      }
    }
    return in_.substr(start, pos_ - start);
  }

  std::string_view in_;
  size_t pos_ = 0;
};

absl::Status Malformed(absl::string_view column, const JsonReader& r, absl::string_view expected) {
  return absl::InvalidArgumentError(
      absl::StrCat(column, " JSON: expected ", expected, " at offset ", r.pos()));
}

// Reads "[" elem ("," elem)* "]" or "[]", calling `elem` for each element.
template <typename ElemFn>
absl::Status ReadArray(JsonReader& r, absl::string_view column, ElemFn&& elem) {
  if (!r.Consume('[')) {
    return Malformed(column, r, "'['");
  }
  if (r.Consume(']')) {
    return absl::OkStatus();
  }
  do {
    if (absl::Status s = elem(); !s.ok()) {
      return s;
    }
  } while (r.Consume(','));
  if (!r.Consume(']')) {
    return Malformed(column, r, "',' or ']'");
  }
  return absl::OkStatus();
}

absl::Status ExpectEnd(JsonReader& r, absl::string_view column) {
  return r.AtEnd() ? absl::OkStatus() : Malformed(column, r, "the end of the text");
}

}  // namespace

std::string LabelsToJson(const std::map<std::string, std::string>& labels) {
  std::string out = "{";
  for (const auto& [key, value] : labels) {
    if (out.size() > 1) {
      out.push_back(',');
    }
    AppendString(&out, key);
    out.push_back(':');
    AppendString(&out, value);
  }
  out.push_back('}');
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> LabelsFromJson(std::string_view json) {
  constexpr char kColumn[] = "labels";
  JsonReader r(json);
  std::map<std::string, std::string> labels;
  if (!r.Consume('{')) {
    return Malformed(kColumn, r, "'{'");
  }
  if (!r.Consume('}')) {
    std::string key;
    std::string value;
    do {
      if (!r.String(&key)) {
        return Malformed(kColumn, r, "a key string");
      }
      if (!r.Consume(':')) {
        return Malformed(kColumn, r, "':'");
      }
      if (!r.String(&value)) {
        return Malformed(kColumn, r, "a value string");
      }
      if (!labels.emplace(key, value).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(kColumn, " JSON: duplicate key \"", key, "\""));
      }
    } while (r.Consume(','));
    if (!r.Consume('}')) {
      return Malformed(kColumn, r, "',' or '}'");
    }
  }
  if (absl::Status s = ExpectEnd(r, kColumn); !s.ok()) {
    return s;
  }
  return labels;
}

std::string PercentsToJson(std::span<const double> percents) {
  std::string out = "[";
  for (size_t i = 0; i < percents.size(); ++i) {
    if (i > 0) {
      out.push_back(',');
    }
    AppendDouble(&out, percents[i]);
  }
  out.push_back(']');
  return out;
}

absl::StatusOr<std::vector<double>> PercentsFromJson(std::string_view json) {
  constexpr char kColumn[] = "percentiles";
  JsonReader r(json);
  std::vector<double> percents;
  absl::Status s = ReadArray(r, kColumn, [&]() -> absl::Status {
    double v = 0;
    if (!r.Double(&v)) {
      return Malformed(kColumn, r, "a number");
    }
    percents.push_back(v);
    return absl::OkStatus();
  });
  if (s.ok()) {
    s = ExpectEnd(r, kColumn);
  }
  if (!s.ok()) {
    return s;
  }
  return percents;
}

absl::StatusOr<std::string> PercentilesToJson(const LatencySnapshot& snapshot) {
  if (!snapshot.percentiles_exact) return std::string("null");  // a total without any
  const size_t n = snapshot.percents.size();
  if (snapshot.values.size() != n || snapshot.counts.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot percentiles: ", n, " percents, ", snapshot.values.size(),
                     " values and ", snapshot.counts.size(), " counts differ in length"));
  }
  std::string out = "[";
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) {
      out.push_back(',');
    }
    out.push_back('[');
    AppendDouble(&out, snapshot.percents[i]);
    out.push_back(',');
    AppendInt(&out, snapshot.values[i]);
    out.push_back(',');
    AppendInt(&out, snapshot.counts[i]);
    out.push_back(']');
  }
  out.push_back(']');
  return out;
}

absl::Status PercentilesFromJson(std::string_view json, LatencySnapshot* out) {
  constexpr char kColumn[] = "percentiles";
  out->percents.clear();
  out->fractions.clear();
  out->values.clear();
  out->counts.clear();
  out->percentiles_exact = json != "null";
  if (!out->percentiles_exact) {
    out->median = 0;
    return absl::OkStatus();
  }
  JsonReader r(json);
  absl::Status s = ReadArray(r, kColumn, [&]() -> absl::Status {
    double percent = 0;
    int64_t value = 0;
    int64_t count = 0;
    if (!r.Consume('[')) {
      return Malformed(kColumn, r, "'[' opening a [percent,value,count] triple");
    }
    if (!r.Double(&percent)) {
      return Malformed(kColumn, r, "a percent");
    }
    if (!r.Consume(',') || !r.Int64(&value)) {
      return Malformed(kColumn, r, "',' and an integer value");
    }
    if (!r.Consume(',') || !r.Int64(&count)) {
      return Malformed(kColumn, r, "',' and an integer count");
    }
    if (!r.Consume(']')) {
      return Malformed(kColumn, r, "']' closing the triple");
    }
    out->percents.push_back(percent);
    out->fractions.push_back(percent / 100.0);
    out->values.push_back(value);
    out->counts.push_back(count);
    return absl::OkStatus();
  });
  if (s.ok()) {
    s = ExpectEnd(r, kColumn);
  }
  return s;
}

}  // namespace perld::state
