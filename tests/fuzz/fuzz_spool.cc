// libFuzzer target: the spool reader. The input is a segment file's bytes;
// Open recovers it (a bad tail truncated, never an error or a crash), the
// records read back have strictly increasing keys, a cursor reads the same,
// and the spool appends after what it recovered.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "client/lib/spool.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // tmpfs when there is one: the spool syncs, and a disk would make that
  // the fuzzer's whole time.
  static const std::string dir =
      ((std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                  : std::filesystem::temp_directory_path()) /
       ("fuzz_spool." + std::to_string(getpid())))
          .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir + "/seg-00000000000000000001.log", std::ios::binary)
        .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  perld::client::Spool::Options o;
  o.dir = dir;
  o.mode = perld::client::SpoolMode::kSynced;
  o.max_record_bytes = 1 << 20;
  absl::StatusOr<std::unique_ptr<perld::client::Spool>> spool = perld::client::Spool::Open(o);
  if (!spool.ok()) std::abort();  // recovery never fails on content
  uint64_t last = 0;
  uint64_t records = 0;
  if (!(*spool)
           ->ForEach([&](uint64_t key, std::string_view) {
             if (key <= last) std::abort();
             last = key;
             ++records;
             return true;
           })
           .ok()) {
    std::abort();
  }
  if (records != (*spool)->records_recovered() || last != (*spool)->last_key()) std::abort();
  perld::client::Spool::Cursor cursor(**spool);
  uint64_t key = 0;
  std::string payload;
  uint64_t seen = 0;
  for (;;) {
    absl::StatusOr<bool> next = cursor.Next(&key, &payload);
    if (!next.ok()) std::abort();
    if (!*next) break;
    ++seen;
  }
  if (seen != records) std::abort();
  if (!(*spool)->Append(last + 1, "after").ok()) std::abort();
  return 0;
}
