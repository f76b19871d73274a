#include "daemon/common/crc32c.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace perld::common {
namespace {

TEST(Crc32cTest, StandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(internal::Crc32cExtendSoftware(0, "123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
}

// RFC 3720 (iSCSI) appendix B.4 test vectors.
TEST(Crc32cTest, Rfc3720Vectors) {
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending;
  std::string descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(descending), 0x113FDB5Cu);
}

TEST(Crc32cTest, ExtendEqualsWhole) {
  const std::string data = "The quick brown fox jumps over the lazy dog, twice over.";
  for (size_t cut = 0; cut <= data.size(); ++cut) {
    EXPECT_EQ(Crc32cExtend(Crc32c(data.substr(0, cut)), data.substr(cut)), Crc32c(data)) << cut;
  }
}

TEST(Crc32cTest, HardwareEqualsSoftwareOnRandomData) {
  if (!internal::Crc32cHardwareAvailable()) {
    GTEST_SKIP() << "no SSE4.2 on this CPU";
  }
  std::mt19937_64 rng(42);
  std::string buffer(4096 + 16, '\0');
  for (char& c : buffer) {
    c = static_cast<char>(rng());
  }
  // Every length up to 300 at every alignment 0..7, then a few long ones.
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t length = 0; length <= 300; ++length) {
      const std::string_view data(buffer.data() + offset, length);
      const auto seed = static_cast<uint32_t>(rng());
      ASSERT_EQ(internal::Crc32cExtendHardware(seed, data),
                internal::Crc32cExtendSoftware(seed, data))
          << "offset " << offset << " length " << length;
    }
  }
  for (size_t length : {1024u, 4095u, 4096u}) {
    const std::string_view data(buffer.data() + 3, length);
    EXPECT_EQ(internal::Crc32cExtendHardware(0, data), internal::Crc32cExtendSoftware(0, data));
  }
}

// The hardware path runs three streams side by side in rounds of 3 x 128
// and 3 x 2,048 bytes and joins them: every length around and between those
// round sizes (a spool record is 528 bytes), at two alignments.
TEST(Crc32cTest, HardwareEqualsSoftwareAcrossThreeWayRounds) {
  if (!internal::Crc32cHardwareAvailable()) {
    GTEST_SKIP() << "no SSE4.2 on this CPU";
  }
  std::mt19937_64 rng(7);
  std::string buffer(3 * 3 * 2048 + 64, '\0');
  for (char& c : buffer) {
    c = static_cast<char>(rng());
  }
  std::vector<size_t> lengths;
  for (size_t length = 300; length <= 1200; ++length) lengths.push_back(length);
  for (size_t round : {size_t{6144}, size_t{12288}}) {  // one and two rounds of 3 x 2,048
    for (size_t delta = 0; delta <= 3 * 128 + 9; ++delta) {
      lengths.push_back(round + delta);
      lengths.push_back(round - 1 - delta);
    }
  }
  lengths.push_back(buffer.size() - 8);
  for (size_t offset : {size_t{0}, size_t{5}}) {
    for (size_t length : lengths) {
      const std::string_view data(buffer.data() + offset, length);
      const auto seed = static_cast<uint32_t>(rng());
      ASSERT_EQ(internal::Crc32cExtendHardware(seed, data),
                internal::Crc32cExtendSoftware(seed, data))
          << "offset " << offset << " length " << length;
    }
  }
}

}  // namespace
}  // namespace perld::common
