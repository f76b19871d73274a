// ShortenText: descriptive text the client sends (a clock's description)
// fits the daemon's bound, cut visibly and never inside a UTF-8 sequence.
#include <string>

#include "client/lib/client_internal.h"
#include "gtest/gtest.h"

namespace perld::client {
namespace {

TEST(ShortenTextTest, TextThatFitsIsSentAsItIs) {
  EXPECT_EQ(ShortenText("CLOCK_MONOTONIC", 256), "CLOCK_MONOTONIC");
  EXPECT_EQ(ShortenText(std::string(256, 'x'), 256), std::string(256, 'x'));
}

TEST(ShortenTextTest, LongerTextIsCutToTheBoundAndSaysSo) {
  const std::string cut = ShortenText(std::string(300, 'x'), 256);
  EXPECT_EQ(cut.size(), 256u);
  EXPECT_EQ(cut, std::string(253, 'x') + "...");
}

TEST(ShortenTextTest, NeverCutsInsideAUtf8Sequence) {
  // "±" is two bytes (C2 B1); the cut at byte 7 would fall between them.
  const std::string text =
      "abcdef\xC2\xB1"
      "0.5 ns and more";
  const std::string cut = ShortenText(text, 10);
  EXPECT_EQ(cut, "abcdef...");
  EXPECT_LE(cut.size(), 10u);
}

TEST(ShortenTextTest, ABoundBelowTheEllipsisKeepsWithinIt) {
  EXPECT_EQ(ShortenText("abcdef", 2), "");
  EXPECT_EQ(ShortenText("abcdef", 3), "...");
}

}  // namespace
}  // namespace perld::client
