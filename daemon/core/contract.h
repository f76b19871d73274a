// Contract checks for API misuse that is a programming error, not bad input.
//
// PERLD_CONTRACT(cond, "violation") aborts with the violation's name in debug
// builds (NDEBUG undefined) and compiles to nothing in release builds, so hot
// paths pay nothing in production. Input validation never uses this macro:
// bad input gets a Status or a counted result instead.
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

#ifdef NDEBUG
#define PERLD_CONTRACT(cond, what) \
  do {                             \
  } while (false)
#else
#define PERLD_CONTRACT(cond, what)                                               \
  do {                                                                           \
    if (!(cond)) ::perld::internal::ContractViolation(what, __FILE__, __LINE__); \
  } while (false)
#endif
