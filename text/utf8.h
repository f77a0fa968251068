// utf8: the UTF-8 rule shared by the daemon and backfillctl. Well-formed is
// RFC 3629 (no overlong forms, no surrogates, nothing above U+10FFFF), the
// rule protobuf applies to `string` fields, so text that passes here is text
// the server accepts. DecodeUtf8() reads one character; InvalidUtf8Offset()
// checks a whole value; ValidUtf8() makes any bytes fit for a `string`
// field.
//
// Pure functions over values: they own nothing (the string_views they take
// are only read during the call), keep no state and are thread-safe.

#ifndef BACKFILL_TEXT_UTF8_H_
#define BACKFILL_TEXT_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace backfill {
namespace text {

// One well-formed UTF-8 character: its length in bytes and its code point.
struct Utf8Char {
  size_t length = 0;  // 1..4; 0: no well-formed character
  uint32_t code_point = 0;
};

// The well-formed character at the start of `text`. Length 0 when `text` is
// empty or starts with a byte that begins no well-formed character: a
// continuation byte (0x80..0xbf), 0xc0, 0xc1, 0xf5..0xff, the start of an
// overlong form, of a surrogate (U+D800..U+DFFF) or of a code point above
// U+10FFFF, or a sequence that `text` cuts short.
Utf8Char DecodeUtf8(std::string_view text);

// The offset of the first byte of `text` that is not part of a well-formed
// character, or std::string_view::npos when `text` is all UTF-8.
size_t InvalidUtf8Offset(std::string_view text);

// `text` with each byte that is not part of a well-formed character
// replaced by its escape "\xNN" (lower-case hex, as text/display_text.h
// writes it); every well-formed character, control characters included, is
// kept as it is. The result is always well-formed; well-formed `text` comes
// back unchanged.
std::string ValidUtf8(std::string_view text);

}  // namespace text
}  // namespace backfill

#endif  // BACKFILL_TEXT_UTF8_H_
