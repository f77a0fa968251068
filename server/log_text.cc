#include "server/log_text.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace backfill {
namespace {

// The well-formed UTF-8 character at the start of `text`: its length in
// bytes (1..4) and code point; length 0 when `text` starts with a byte that
// begins no well-formed character (or is empty).
struct Utf8Char {
  size_t length = 0;
  uint32_t code_point = 0;
};

Utf8Char DecodeUtf8(std::string_view text) {
  if (text.empty()) return {};
  const auto byte = [&text](size_t i) {
    return static_cast<unsigned char>(text[i]);
  };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {1, lead};
  // RFC 3629, table 3-7 of the Unicode standard: the lead byte fixes the
  // length and the range of the second byte.
  size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xbf;
  uint32_t code_point = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
    code_point = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    code_point = lead & 0x0f;
    if (lead == 0xe0) low = 0xa0;   // no overlong forms
    if (lead == 0xed) high = 0x9f;  // no surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    code_point = lead & 0x07;
    if (lead == 0xf0) low = 0x90;   // no overlong forms
    if (lead == 0xf4) high = 0x8f;  // nothing above U+10FFFF
  } else {
    return {};  // a continuation byte, 0xc0, 0xc1 or 0xf5..0xff
  }
  if (text.size() < length) return {};
  for (size_t i = 1; i < length; ++i) {
    const unsigned char next = byte(i);
    if (next < (i == 1 ? low : 0x80) || next > (i == 1 ? high : 0xbf)) {
      return {};
    }
    code_point = (code_point << 6) | (next & 0x3f);
  }
  return {length, code_point};
}

// Characters that are valid UTF-8 but change how a log line is displayed:
// C1 controls (U+009B is a terminal's CSI), line and paragraph separators,
// and the bidirectional marks, embeddings, overrides and isolates.
bool IsInvisibleControl(uint32_t code_point) {
  return (code_point >= 0x80 && code_point <= 0x9f) || code_point == 0x200e ||
         code_point == 0x200f || code_point == 0x2028 || code_point == 0x2029 ||
         (code_point >= 0x202a && code_point <= 0x202e) ||
         (code_point >= 0x2066 && code_point <= 0x2069);
}

}  // namespace

std::string LogText(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  std::string piece;
  size_t i = 0;
  while (i < text.size()) {
    const Utf8Char c = DecodeUtf8(text.substr(i));
    if (c.length == 0) {
      piece = absl::StrFormat("\\x%02x", static_cast<unsigned char>(text[i]));
    } else if (c.length == 1) {
      switch (c.code_point) {
        case '\\':
          piece = "\\\\";
          break;
        case '\n':
          piece = "\\n";
          break;
        case '\r':
          piece = "\\r";
          break;
        case '\t':
          piece = "\\t";
          break;
        default:
          piece = c.code_point < 0x20 || c.code_point == 0x7f
                      ? absl::StrFormat("\\x%02x", c.code_point)
                      : std::string(1, text[i]);
      }
    } else if (IsInvisibleControl(c.code_point)) {
      piece = absl::StrFormat("\\u%04X", c.code_point);
    } else {
      piece = std::string(text.substr(i, c.length));
    }
    if (out.size() + piece.size() > max_bytes) {
      absl::StrAppend(&out, "...[truncated, ", text.size(), " bytes]");
      return out;
    }
    out += piece;
    i += c.length == 0 ? 1 : c.length;
  }
  return out;
}

size_t InvalidUtf8Offset(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t length = DecodeUtf8(text.substr(i)).length;
    if (length == 0) return i;
    i += length;
  }
  return std::string_view::npos;
}

}  // namespace backfill
