// Exact decimal-to-integer scaling for `perlctl import`: a number as its
// source wrote it (a JSON number such as k6's 459.865729 or 1e-06, or fio's
// integer nanoseconds) times 10^shift, as the integer perld records.
//
// The text is read digit by digit, never through a double, so the result is
// the exact decimal value scaled. When digits are left over (k6 writes
// milliseconds with up to nanosecond digits; importing at --unit us keeps
// three fewer) the value is rounded to the nearest integer, a half rounded
// up (away from zero: imported values are never negative), and the caller is
// told it was rounded, so the import counts and reports such values.
//
// Pure functions; any thread.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace perld::perlctl {

// The largest value ScaleDecimal returns: perld's latency bounds are < 2^62.
inline constexpr int64_t kMaxScaledValue = (int64_t{1} << 62) - 1;

struct ScaledValue {
  int64_t value = 0;
  bool rounded = false;  // non-zero digits were dropped (rounded half up)
};

// `number` (JSON number grammar: -?digits[.digits][e[+-]digits]) times
// 10^shift. InvalidArgument for text that is not such a number, a negative
// non-zero value, or a result over kMaxScaledValue; the message says which.
absl::StatusOr<ScaledValue> ScaleDecimal(absl::string_view number, int shift);

}  // namespace perld::perlctl
