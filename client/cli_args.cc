#include "client/cli_args.h"

#include <cstddef>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "text/utf8.h"

namespace backfill {
namespace cli {
namespace {

// `text` in double quotes, with C escapes for what is not printable; UTF-8
// letters are left readable.
std::string Quoted(absl::string_view text) {
  return absl::StrCat("\"", absl::Utf8SafeCHexEscape(text), "\"");
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
  const size_t offset =
      text::InvalidUtf8Offset(std::string_view(value.data(), value.size()));
  if (offset == std::string_view::npos) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s is not valid UTF-8 (byte 0x%02x at offset %d); text arguments must "
      "be UTF-8",
      what, static_cast<unsigned char>(value[offset]), offset));
}

}  // namespace cli
}  // namespace backfill
