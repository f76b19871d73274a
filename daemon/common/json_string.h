// Reading a JSON string's body (RFC 8259): every escape, \uXXXX surrogate
// pairs joined and written as UTF-8; raw control characters, unknown
// escapes, unpaired surrogates and an unterminated string refused. Shared
// by the state database's JSON columns (daemon/state/json_columns.h) and
// perlctl import's k6 reader (client/perlctl/k6_json.h).
//
// Pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace perld::json {

// Reads from in[*pos] (just after the opening quote) through the closing
// quote, appending the decoded text to `out`; *pos ends after the quote.
// On a malformed string returns false with *pos at the offending byte and
// `why` saying what is wrong ("an unpaired surrogate", ...).
bool ReadStringBody(std::string_view in, size_t* pos, std::string* out, const char** why);

// Appends code point `cp` (<= 0x10FFFF) as UTF-8.
void AppendUtf8(uint32_t cp, std::string* out);

}  // namespace perld::json
