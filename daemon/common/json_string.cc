#include "daemon/common/json_string.h"

namespace perld::json {
namespace {

// Four hex digits at in[*pos].
bool Hex4(std::string_view in, size_t* pos, uint32_t* out) {
  if (*pos + 4 > in.size()) return false;
  uint32_t v = 0;
  for (size_t k = 0; k < 4; ++k) {
    const char c = in[*pos + k];
    v <<= 4;
    if (c >= '0' && c <= '9') {
      v |= static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v |= static_cast<uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      v |= static_cast<uint32_t>(c - 'A' + 10);
    } else {
      *pos += k;
      return false;
    }
  }
  *pos += 4;
  *out = v;
  return true;
}

}  // namespace

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool ReadStringBody(std::string_view in, size_t* pos, std::string* out, const char** why) {
  const auto fail = [&](const char* what) {
    *why = what;
    return false;
  };
  while (*pos < in.size()) {
    const char c = in[*pos];
    if (c == '"') {
      ++*pos;
      return true;
    }
    if (static_cast<unsigned char>(c) < 0x20) return fail("a control character in a string");
    ++*pos;
    if (c != '\\') {
      out->push_back(c);
      continue;
    }
    if (*pos >= in.size()) break;
    const char e = in[(*pos)++];
    switch (e) {
      case '"':
      case '\\':
      case '/':
        out->push_back(e);
        break;
      case 'b':
        out->push_back('\b');
        break;
      case 'f':
        out->push_back('\f');
        break;
      case 'n':
        out->push_back('\n');
        break;
      case 'r':
        out->push_back('\r');
        break;
      case 't':
        out->push_back('\t');
        break;
      case 'u': {
        uint32_t cp = 0;
        if (!Hex4(in, pos, &cp)) return fail("\\u needs four hex digits");
        if (cp >= 0xDC00 && cp <= 0xDFFF) return fail("an unpaired surrogate");
        if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: its low one follows
          uint32_t low = 0;
          if (in.substr(*pos, 2) != "\\u") return fail("an unpaired surrogate");
          *pos += 2;
          if (!Hex4(in, pos, &low)) return fail("\\u needs four hex digits");
          if (low < 0xDC00 || low > 0xDFFF) return fail("an unpaired surrogate");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        AppendUtf8(cp, out);
        break;
      }
      default:
        --*pos;
        return fail("an unknown escape in a string");
    }
  }
  return fail("a string is not closed");
}

}  // namespace perld::json
