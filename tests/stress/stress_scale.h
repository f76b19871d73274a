// Scaling of stress-test sizes. Counts are written for Release builds;
// sanitizer and Debug builds run `sanitizer_factor` of them so each test stays
// well under a minute on two cores. PERLD_STRESS_SCALE (a positive number)
// multiplies every count, e.g. 10 for a longer soak.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace perld::stress {

inline int64_t ScaledCount(int64_t release_count, double sanitizer_factor, int64_t minimum) {
#if defined(PERLD_TSAN) || !defined(NDEBUG)
  double scale = sanitizer_factor;
#else
  double scale = 1.0;
  (void)sanitizer_factor;
#endif
  if (const char* env = std::getenv("PERLD_STRESS_SCALE")) {
    const double s = std::atof(env);
    if (s > 0) scale *= s;
  }
  return std::max(minimum, static_cast<int64_t>(static_cast<double>(release_count) * scale));
}

}  // namespace perld::stress
