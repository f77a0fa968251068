#include "text/utf8.h"

#include "absl/strings/str_format.h"

namespace backfill {
namespace text {

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

size_t InvalidUtf8Offset(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    // ASCII, most of what is checked, is one byte that is never wrong.
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t length = DecodeUtf8(text.substr(i)).length;
    if (length == 0) return i;
    i += length;
  }
  return std::string_view::npos;
}

std::string ValidUtf8(std::string_view text) {
  size_t i = InvalidUtf8Offset(text);
  if (i == std::string_view::npos) return std::string(text);
  std::string out(text.substr(0, i));
  while (i < text.size()) {
    const size_t length = DecodeUtf8(text.substr(i)).length;
    if (length == 0) {
      absl::StrAppendFormat(&out, "\\x%02x",
                            static_cast<unsigned char>(text[i]));
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

}  // namespace text
}  // namespace backfill
