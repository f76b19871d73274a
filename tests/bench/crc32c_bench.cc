// CRC32C per byte: the product's hardware path (three CRC32 streams side by
// side, joined by table lookups; daemon/common/crc32c.h) against one CRC32
// chain (the previous implementation, kept here as the baseline) and the
// slicing-by-8 software path, at the sizes perld checksums: a 512-byte
// spool record with its 16-byte header (528 bytes; the spool checksums the
// 512-byte payload), a 4 KiB and a 256 KiB state-store blob.
#include <benchmark/benchmark.h>
#include <nmmintrin.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "daemon/common/crc32c.h"

namespace perld::common {
namespace {

std::string RandomBytes(size_t n) {
  std::mt19937_64 rng(1);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

__attribute__((target("sse4.2"))) uint32_t OneChain(uint32_t crc, std::string_view data) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  uint64_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, sizeof(v));
    c = _mm_crc32_u64(c, v);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

template <uint32_t (*Fn)(uint32_t, std::string_view)>
void BM_Crc(benchmark::State& state) {
  if (!internal::Crc32cHardwareAvailable()) {
    state.SkipWithError("no SSE4.2 on this CPU");
    return;
  }
  const std::string data = RandomBytes(static_cast<size_t>(state.range(0)));
  if (Fn(0, data) != internal::Crc32cExtendSoftware(0, data)) {
    state.SkipWithError("wrong checksum");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(Fn(0, data));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

BENCHMARK(BM_Crc<internal::Crc32cExtendHardware>)
    ->Name("Crc32c/three_streams")
    ->Arg(512)
    ->Arg(4096)
    ->Arg(256 << 10);
BENCHMARK(BM_Crc<OneChain>)->Name("Crc32c/one_chain")->Arg(512)->Arg(4096)->Arg(256 << 10);
BENCHMARK(BM_Crc<internal::Crc32cExtendSoftware>)
    ->Name("Crc32c/software")
    ->Arg(512)
    ->Arg(4096)
    ->Arg(256 << 10);

}  // namespace
}  // namespace perld::common
BENCHMARK_MAIN();
