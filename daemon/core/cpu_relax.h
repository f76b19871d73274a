// CpuRelax(): the spin-loop hint (x86 PAUSE, ARM YIELD); a no-op elsewhere.
#pragma once

namespace perld {
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}
}  // namespace perld
