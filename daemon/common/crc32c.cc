#include "daemon/common/crc32c.h"

#include <array>
#include <cstddef>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace perld::common {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78;  // reflected Castagnoli

// kTables[0] is the classic byte-at-a-time table; kTables[k][b] is the CRC of
// byte b followed by k zero bytes, so 8 lookups consume 8 input bytes.
using Tables = std::array<std::array<uint32_t, 256>, 8>;
constexpr Tables MakeTables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ ((crc & 1) != 0 ? kPolynomial : 0);
    }
    t[0][b] = crc;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (size_t b = 0; b < 256; ++b) {
      t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
    }
  }
  return t;
}
constexpr Tables kTables = MakeTables();

uint64_t LoadLittleEndian64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));  // x86-64 and every supported target: little-endian
  return v;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const unsigned char* p,
                                                       size_t n) {
  uint64_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    c = _mm_crc32_u64(c, LoadLittleEndian64(p));
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) {
    c32 = _mm_crc32_u8(c32, *p);
  }
  return ~c32;
}
#endif

using ExtendFn = uint32_t (*)(uint32_t, std::string_view);

ExtendFn Choose() {
  return internal::Crc32cHardwareAvailable() ? internal::Crc32cExtendHardware
                                             : internal::Crc32cExtendSoftware;
}

}  // namespace

namespace internal {

uint32_t Crc32cExtendSoftware(uint32_t crc, std::string_view data) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    const uint64_t v = LoadLittleEndian64(p) ^ c;
    c = kTables[7][v & 0xFF] ^ kTables[6][(v >> 8) & 0xFF] ^ kTables[5][(v >> 16) & 0xFF] ^
        kTables[4][(v >> 24) & 0xFF] ^ kTables[3][(v >> 32) & 0xFF] ^ kTables[2][(v >> 40) & 0xFF] ^
        kTables[1][(v >> 48) & 0xFF] ^ kTables[0][v >> 56];
  }
  for (; n > 0; --n, ++p) {
    c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xFF];
  }
  return ~c;
}

uint32_t Crc32cExtendHardware(uint32_t crc, std::string_view data) {
#if defined(__x86_64__)
  return ExtendSse42(crc, reinterpret_cast<const unsigned char*>(data.data()), data.size());
#else
  return Crc32cExtendSoftware(crc, data);
#endif
}

bool Crc32cHardwareAvailable() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("sse4.2") != 0;
#else
  return false;
#endif
}

}  // namespace internal

uint32_t Crc32cExtend(uint32_t crc, std::string_view data) {
  static const ExtendFn kExtend = Choose();  // thread-safe one-time CPU check
  return kExtend(crc, data);
}

uint32_t Crc32c(std::string_view data) { return Crc32cExtend(0, data); }

}  // namespace perld::common
