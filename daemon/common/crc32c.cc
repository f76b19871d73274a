#include "daemon/common/crc32c.h"

#include <array>
#include <bit>
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
// Running a CRC register through zero bytes is linear over GF(2), so the
// register `x` becomes after `bytes` zero bytes is the XOR of four lookups,
// one per byte of x: MakeShift(bytes)[k][b] is what b << 8k becomes. This
// is what joins three CRCs computed side by side into the CRC of their
// concatenation (Mark Adler's crc32c.c does the same).
using ShiftTable = std::array<std::array<uint32_t, 256>, 4>;
using BitImages = std::array<uint32_t, 32>;  // what each register bit becomes
constexpr uint32_t Apply(const BitImages& images, uint32_t x) {
  uint32_t y = 0;
  for (size_t i = 0; i < 32; ++i) {
    if (((x >> i) & 1) != 0) y ^= images[i];
  }
  return y;
}
// The images after `bytes` zero bytes, a power of two: one byte's images,
// then squared (through 2n bytes = through n bytes twice). Cheap enough for
// any compiler's constant-evaluation limits.
constexpr BitImages ZeroBytesImages(size_t bytes) {
  BitImages images{};
  for (size_t i = 0; i < 32; ++i) {
    const uint32_t bit = uint32_t{1} << i;
    images[i] = (bit >> 8) ^ kTables[0][bit & 0xFF];
  }
  for (size_t n = 1; n < bytes; n *= 2) {
    BitImages twice{};
    for (size_t i = 0; i < 32; ++i) twice[i] = Apply(images, images[i]);
    images = twice;
  }
  return images;
}
constexpr ShiftTable MakeShift(size_t bytes) {
  const BitImages images = ZeroBytesImages(bytes);
  ShiftTable t{};
  for (size_t k = 0; k < 4; ++k) {
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = Apply(images, b << (8 * k));
  }
  return t;
}
inline uint32_t Shift(const ShiftTable& t, uint32_t crc) {
  return t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^ t[2][(crc >> 16) & 0xFF] ^ t[3][crc >> 24];
}

// What a register becomes through `Bytes` zero bytes, built at compile time.
template <size_t Bytes>
constexpr ShiftTable kShift = MakeShift(Bytes);

// Three independent streams of `Stride` bytes each, then joined: the CRC32
// instruction's latency is 3 cycles and its throughput one a cycle, so three
// chains run in about the time of one (crc32c_bench: a 512-byte spool
// payload 2.1x, 256 KiB 2.8x faster than one chain).
template <size_t Stride>
__attribute__((target("sse4.2"))) inline uint64_t ThreeWay(uint64_t c0, const unsigned char* p) {
  static_assert(std::has_single_bit(Stride), "MakeShift squares its way to a power of two");
  uint64_t c1 = 0;
  uint64_t c2 = 0;
  for (size_t i = 0; i < Stride; i += 8) {
    c0 = _mm_crc32_u64(c0, LoadLittleEndian64(p + i));
    c1 = _mm_crc32_u64(c1, LoadLittleEndian64(p + Stride + i));
    c2 = _mm_crc32_u64(c2, LoadLittleEndian64(p + 2 * Stride + i));
  }
  return Shift(kShift<2 * Stride>, static_cast<uint32_t>(c0)) ^
         Shift(kShift<Stride>, static_cast<uint32_t>(c1)) ^ c2;
}

constexpr size_t kLongStride = 2048;  // state-store blobs and large records
constexpr size_t kShortStride = 128;  // a 512-byte spool record: one round

__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const unsigned char* p,
                                                       size_t n) {
  uint64_t c = ~crc;
  for (; n >= 3 * kLongStride; n -= 3 * kLongStride, p += 3 * kLongStride) {
    c = ThreeWay<kLongStride>(c, p);
  }
  for (; n >= 3 * kShortStride; n -= 3 * kShortStride, p += 3 * kShortStride) {
    c = ThreeWay<kShortStride>(c, p);
  }
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
