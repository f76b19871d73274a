#include "client/perlctl/decimal_scale.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace perld::perlctl {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

absl::Status NotANumber(absl::string_view number) {
  return absl::InvalidArgumentError(absl::StrCat("'", number, "' is not a number"));
}

}  // namespace

absl::StatusOr<ScaledValue> ScaleDecimal(absl::string_view number, int shift) {
  size_t i = 0;
  const bool negative = i < number.size() && number[i] == '-';
  if (negative) ++i;
  // The significant digits (integer and fraction part) and their power of ten.
  std::string digits;
  const size_t int_begin = i;
  while (i < number.size() && IsDigit(number[i])) digits.push_back(number[i++]);
  if (i == int_begin) return NotANumber(number);
  // JSON: no leading zeros ("012"); a single 0 is fine.
  if (i - int_begin > 1 && number[int_begin] == '0') return NotANumber(number);
  int64_t exponent = 0;
  if (i < number.size() && number[i] == '.') {
    ++i;
    const size_t frac_begin = i;
    while (i < number.size() && IsDigit(number[i])) digits.push_back(number[i++]);
    if (i == frac_begin) return NotANumber(number);
    exponent -= static_cast<int64_t>(i - frac_begin);
  }
  if (i < number.size() && (number[i] == 'e' || number[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < number.size() && (number[i] == '+' || number[i] == '-')) {
      exp_negative = number[i] == '-';
      ++i;
    }
    const size_t exp_begin = i;
    int64_t e = 0;
    while (i < number.size() && IsDigit(number[i])) {
      // Past a million the value is 0 or out of range either way.
      if (e < 1'000'000) e = e * 10 + (number[i] - '0');
      ++i;
    }
    if (i == exp_begin) return NotANumber(number);
    exponent += exp_negative ? -e : e;
  }
  if (i != number.size()) return NotANumber(number);
  exponent += shift;

  // Leading zeros carry nothing.
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return ScaledValue{};  // 0 (also -0)
  digits.erase(0, first);
  if (negative) {
    return absl::InvalidArgumentError(absl::StrCat("'", number, "' is negative"));
  }
  const auto too_large = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("'", number, "' is too large (over 2^62 - 1 in the unit)"));
  };
  // digits * 10^exponent: the integer part is the first `keep` digits.
  const int64_t keep = static_cast<int64_t>(digits.size()) + exponent;
  if (keep > 19) return too_large();
  ScaledValue out;
  char first_dropped = '0';
  if (keep <= 0) {
    // Every digit is dropped; the first dropped one is digits[0] only when
    // keep == 0, else a zero in front of them.
    first_dropped = keep == 0 ? digits[0] : '0';
    out.rounded = true;
  } else {
    for (int64_t k = 0; k < keep; ++k) {
      const int d =
          k < static_cast<int64_t>(digits.size()) ? digits[static_cast<size_t>(k)] - '0' : 0;
      if (out.value > (kMaxScaledValue - d) / 10) return too_large();
      out.value = out.value * 10 + d;
    }
    if (keep < static_cast<int64_t>(digits.size())) {
      first_dropped = digits[static_cast<size_t>(keep)];
      out.rounded = digits.find_first_not_of('0', static_cast<size_t>(keep)) != std::string::npos;
    }
  }
  if (first_dropped >= '5') {
    if (out.value == kMaxScaledValue) return too_large();
    ++out.value;
  }
  return out;
}

}  // namespace perld::perlctl
