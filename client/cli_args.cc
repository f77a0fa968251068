#include "client/cli_args.h"

#include <cstddef>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace backfill {
namespace cli {
namespace {

// `text` in double quotes, with C escapes for what is not printable; UTF-8
// letters are left readable.
std::string Quoted(absl::string_view text) {
  return absl::StrCat("\"", absl::Utf8SafeCHexEscape(text), "\"");
}

// Length of the well-formed UTF-8 character at the start of `text` (1..4),
// 0 when it starts with a byte that begins none.
size_t Utf8CharLength(absl::string_view text) {
  const auto byte = [&text](size_t i) {
    return static_cast<unsigned char>(text[i]);
  };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;   // overlong
    if (lead == 0xed) high = 0x9f;  // surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;   // overlong
    if (lead == 0xf4) high = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  if (byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  }
  return length;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> SplitListFlag(
    absl::string_view flag, const std::vector<std::string>& raw) {
  std::vector<std::string> items;
  for (const std::string& value : raw) {
    for (absl::string_view item : absl::StrSplit(value, ',')) {
      const size_t position = items.size() + 1;
      if (item.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, ": item ", position, " is empty (", Quoted(value), ")"));
      }
      if (absl::ascii_isspace(static_cast<unsigned char>(item.front())) ||
          absl::ascii_isspace(static_cast<unsigned char>(item.back()))) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, ": item ", position, " ", Quoted(item),
                         " has leading or trailing whitespace"));
      }
      items.emplace_back(item);
    }
  }
  return items;
}

absl::Status CheckUtf8(absl::string_view what, absl::string_view value) {
  size_t i = 0;
  while (i < value.size()) {
    const size_t length = Utf8CharLength(value.substr(i));
    if (length == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s is not valid UTF-8 (byte 0x%02x at offset %d); text arguments "
          "must be UTF-8",
          what, static_cast<unsigned char>(value[i]), i));
    }
    i += length;
  }
  return absl::OkStatus();
}

}  // namespace cli
}  // namespace backfill
