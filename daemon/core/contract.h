// Contract checks for API misuse that is a programming error, not bad input.
//
// PERLD_CONTRACT(cond, "violation") aborts with the violation's name when
// PERLD_CONTRACT_CHECKS is 1 (Debug and sanitizer builds) and compiles to
// nothing otherwise, so hot paths pay nothing in production. The switch comes
// from the build (a PUBLIC compile definition of perld's libraries), never
// from the includer's NDEBUG: every translation unit of a program sees the
// same inline behaviour and the same layouts, whatever its own NDEBUG (a
// header that includes this without the definition gets 0, the release
// behaviour). Input validation never uses this macro: bad input gets a Status
// or a counted result instead.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace perld::internal {
[[noreturn]] inline void ContractViolation(const char* what, const char* file, int line) {
  std::fprintf(stderr, "perld contract violation: %s (%s:%d)\n", what, file, line);
  std::fflush(stderr);
  std::abort();
}
}  // namespace perld::internal

#ifndef PERLD_CONTRACT_CHECKS
#define PERLD_CONTRACT_CHECKS 0
#endif

#if !PERLD_CONTRACT_CHECKS
#define PERLD_CONTRACT(cond, what) \
  do {                             \
  } while (false)
#else
#define PERLD_CONTRACT(cond, what)                                               \
  do {                                                                           \
    if (!(cond)) ::perld::internal::ContractViolation(what, __FILE__, __LINE__); \
  } while (false)
#endif
