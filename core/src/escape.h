// EscapeText: text that came from outside (a consumer's name, a file name, a
// peer's error message) made safe to print on one line and to put in JSON.
//
// Kept as is: valid UTF-8 that prints (letters, digits, punctuation, spaces,
// any printable non-ASCII character). Escaped: control characters (\n, \r,
// \t as such; the other C0 controls, DEL and the C1 controls U+0080..U+009F
// as \xNN), so that a newline in a name cannot forge a log line and an escape
// sequence cannot drive a terminal; bytes that are not valid UTF-8 (as
// \xNN), so that the result is always valid UTF-8.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace batchcast {

// `text` escaped as above; a result longer than `max_bytes` is cut (at a
// character boundary) and ends with "...".
std::string EscapeText(std::string_view text, size_t max_bytes = SIZE_MAX);

// True when `text` is valid UTF-8 and holds no character EscapeText escapes.
bool IsPrintableText(std::string_view text);

}  // namespace batchcast
