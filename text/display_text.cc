#include "text/display_text.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "text/utf8.h"

namespace backfill {
namespace text {
namespace {

// Characters that are valid UTF-8 but change how a line is displayed:
// C1 controls (U+009B is a terminal's CSI), line and paragraph separators,
// and the bidirectional marks, embeddings, overrides and isolates.
bool IsInvisibleControl(uint32_t code_point) {
  return (code_point >= 0x80 && code_point <= 0x9f) || code_point == 0x200e ||
         code_point == 0x200f || code_point == 0x2028 || code_point == 0x2029 ||
         (code_point >= 0x202a && code_point <= 0x202e) ||
         (code_point >= 0x2066 && code_point <= 0x2069);
}

// The piece for the character (or the byte that is not UTF-8) at the start
// of non-empty `text`, and how many bytes of `text` it stands for.
struct Piece {
  std::string text;
  size_t length = 0;
};

Piece NextPiece(std::string_view text, DisplayOptions options) {
  const Utf8Char c = DecodeUtf8(text);
  if (c.length == 0) {
    return {absl::StrFormat("\\x%02x", static_cast<unsigned char>(text[0])), 1};
  }
  if (c.length == 1) {
    switch (c.code_point) {
      case '\n':
        return {"\\n", 1};
      case '\r':
        return {"\\r", 1};
      case '\t':
        return {"\\t", 1};
      case '\\':
        return {options.escape_backslash ? "\\\\" : "\\", 1};
      default:
        if (c.code_point < 0x20 || c.code_point == 0x7f) {
          return {absl::StrFormat("\\x%02x", c.code_point), 1};
        }
    }
  } else if (IsInvisibleControl(c.code_point)) {
    return {absl::StrFormat("\\u%04X", c.code_point), c.length};
  }
  return {std::string(text.substr(0, c.length)), c.length};
}

}  // namespace

std::vector<std::string> DisplayPieces(std::string_view text,
                                       DisplayOptions options) {
  std::vector<std::string> pieces;
  for (size_t i = 0; i < text.size();) {
    Piece piece = NextPiece(text.substr(i), options);
    pieces.push_back(std::move(piece.text));
    i += piece.length;
  }
  return pieces;
}

std::string DisplayText(std::string_view text, DisplayOptions options) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const Piece piece = NextPiece(text.substr(i), options);
    out += piece.text;
    i += piece.length;
  }
  return out;
}

std::string TruncatedDisplayText(std::string_view text, size_t max_bytes,
                                 DisplayOptions options) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  for (size_t i = 0; i < text.size();) {
    const Piece piece = NextPiece(text.substr(i), options);
    if (out.size() + piece.text.size() > max_bytes) {
      absl::StrAppend(&out, "...[truncated, ", text.size(), " bytes]");
      return out;
    }
    out += piece.text;
    i += piece.length;
  }
  return out;
}

}  // namespace text
}  // namespace backfill
