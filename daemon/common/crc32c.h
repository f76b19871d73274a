// CRC32C (Castagnoli): the checksum of the state store's distribution blobs
// (daemon/state) and of the client library's durable spool records
// (client/lib/spool), hence in daemon/common.
//
// The standard parameters (iSCSI, ext4, LevelDB/RocksDB crc32c): reflected
// polynomial 0x82F63B78, initial value ~0, final XOR ~0, so that
// Crc32c("123456789") == 0xE3069283. Crc32cExtend continues a checksum:
// Crc32cExtend(Crc32c(a), b) == Crc32c(a + b).
//
// Implementation: the SSE4.2 CRC32 instruction (8 bytes per instruction,
// three streams side by side, joined by table lookups) when the CPU has it,
// checked once at run time; otherwise slicing-by-8 tables (8 KiB, built at
// compile time). Both give identical results. Pure functions: any thread,
// no allocation, no locks.
#pragma once

#include <cstdint>
#include <string_view>

namespace perld::common {

// The CRC32C of `data`.
uint32_t Crc32c(std::string_view data);

// The CRC32C of A + `data`, given crc == Crc32c(A).
uint32_t Crc32cExtend(uint32_t crc, std::string_view data);

namespace internal {

// The two implementations, for tests and benchmarks. Same contract as
// Crc32cExtend. REQUIRES (hardware): Crc32cHardwareAvailable().
uint32_t Crc32cExtendSoftware(uint32_t crc, std::string_view data);
uint32_t Crc32cExtendHardware(uint32_t crc, std::string_view data);
// True when this CPU has SSE4.2 (always false off x86-64).
bool Crc32cHardwareAvailable();

}  // namespace internal
}  // namespace perld::common
