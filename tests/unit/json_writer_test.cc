#include "daemon/common/json_writer.h"

#include <gtest/gtest.h>

#include <clocale>
#include <cmath>
#include <limits>

namespace perld::json {
namespace {

TEST(JsonWriterTest, WritesNestedObjectsWithExactIntegers) {
  JsonWriter j;
  j.BeginObject()
      .Key("id")
      .Uint(18446744073709551615ull)
      .Key("min")
      .Int(std::numeric_limits<int64_t>::min())
      .Key("percentiles")
      .BeginObject()
      .Key("99.9")
      .Int(1234)
      .EndObject()
      .Key("list")
      .BeginArray()
      .Double(92.5)
      .Double(50)
      .Bool(true)
      .Null()
      .EndArray()
      .Key("empty")
      .BeginObject()
      .EndObject()
      .EndObject();
  EXPECT_EQ(j.str(),
            R"({"id":18446744073709551615,"min":-9223372036854775808,"percentiles":{"99.9":1234},)"
            R"("list":[92.5,50,true,null],"empty":{}})");
}

TEST(JsonWriterTest, EscapesStringsAndWritesNonFiniteAsNull) {
  JsonWriter j;
  j.BeginArray()
      .String("a\"b\\c\nd\te\x01")
      .Double(std::nan(""))
      .Double(-std::numeric_limits<double>::infinity())
      .EndArray();
  EXPECT_EQ(j.str(), R"(["a\"b\\c\nd\te\u0001",null,null])");
}

TEST(JsonWriterTest, PercentKeysAreWrittenAsThePercentIsWritten) {
  EXPECT_EQ(ShortestDouble(50), "50");
  EXPECT_EQ(ShortestDouble(99.9), "99.9");
  EXPECT_EQ(ShortestDouble(99.99), "99.99");
  EXPECT_EQ(ShortestDouble(92.5), "92.5");
  EXPECT_EQ(ShortestDouble(0.001), "0.001");
  // A locale with a decimal comma never leaks into the output.
  if (std::setlocale(LC_NUMERIC, "de_DE.UTF-8") != nullptr) {
    EXPECT_EQ(ShortestDouble(99.9), "99.9");
    std::setlocale(LC_NUMERIC, "C");
  }
}

}  // namespace
}  // namespace perld::json
