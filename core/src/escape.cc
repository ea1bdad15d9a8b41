#include "core/src/escape.h"

namespace batchcast {
namespace {

// The length of the valid UTF-8 sequence at the start of `s` (1..4), or 0 when
// it is not one (overlong forms, surrogates and values beyond U+10FFFF are
// invalid). Sets *code_point.
size_t Utf8Sequence(std::string_view s, uint32_t* code_point) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t c = b(0);
  if (c < 0x80) {
    *code_point = c;
    return 1;
  }
  size_t n = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    *code_point = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    *code_point = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    *code_point = c & 0x07;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    const uint8_t x = b(i);
    if (i == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) return 0;
    *code_point = (*code_point << 6) | (x & 0x3F);
  }
  return n;
}

bool IsControl(uint32_t cp) { return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F); }

void AppendHex(std::string& out, uint8_t byte) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[byte >> 4];
  out += kHex[byte & 0xF];
}

}  // namespace

std::string EscapeText(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 8);
  size_t i = 0;
  while (i < text.size()) {
    const size_t mark = out.size();
    uint32_t cp = 0;
    const size_t n = Utf8Sequence(text.substr(i), &cp);
    if (n == 0) {
      AppendHex(out, static_cast<uint8_t>(text[i]));
      i += 1;
    } else if (IsControl(cp)) {
      if (cp == '\n') {
        out += "\\n";
      } else if (cp == '\r') {
        out += "\\r";
      } else if (cp == '\t') {
        out += "\\t";
      } else {
        for (size_t k = 0; k < n; ++k) AppendHex(out, static_cast<uint8_t>(text[i + k]));
      }
      i += n;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
    if (out.size() > max_bytes) {
      out.resize(mark);
      out += "...";
      break;
    }
  }
  return out;
}

bool IsPrintableText(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp = 0;
    const size_t n = Utf8Sequence(text.substr(i), &cp);
    if (n == 0 || IsControl(cp)) return false;
    i += n;
  }
  return true;
}

}  // namespace batchcast
