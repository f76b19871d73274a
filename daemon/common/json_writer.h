// JsonWriter: a small streaming JSON writer (perlctl's --json, the daemon's
// /api endpoints).
// Integers are written as JSON numbers (exact, never as strings); doubles in
// their shortest round-trip form (locale-independent), NaN and infinities as
// null; strings escaped per RFC 8259. Keys keep the order they are written.
//
// Threads: one writer per thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace perld::json {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();

  const std::string& str() const { return out_; }

 private:
  void Separate();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

// Shortest round-trip decimal text of `v` ("50", "99.9", "0.001").
std::string ShortestDouble(double v);

}  // namespace perld::json
