// display_text: free text (a job's reason or message, a dataset name,
// anything a client or the server sent) made safe to show on one line, in
// the daemon log (server/log_text.h) or on a terminal (client/value_format.h).
// Control characters (a newline would start a line of its own), ANSI escape
// sequences, bytes that are not UTF-8 and the invisible Unicode characters
// that reorder or break lines are escaped; every other character, ASCII or
// not, is kept as it is, so text in any language stays readable:
//   newline, CR, tab          -> "\n", "\r", "\t"
//   other bytes < 0x20, 0x7f  -> "\xNN" (ESC, so ANSI sequences, -> "\x1b")
//   bytes that are not UTF-8  -> "\xNN" (text/utf8.h's rule), one by one
//   U+0080..U+009F (C1 controls, U+009B is a terminal's CSI), U+2028,
//   U+2029 (line and paragraph separators), U+200E, U+200F,
//   U+202A..U+202E, U+2066..U+2069 (bidirectional marks and overrides)
//                             -> "\uNNNN" (upper-case hex)
//   "\"                       -> "\\" with DisplayOptions::escape_backslash,
//                                else kept as it is
//
// Pure functions over values: they own nothing (the string_views they take
// are only read during the call), keep no state and are thread-safe.

#ifndef BACKFILL_TEXT_DISPLAY_TEXT_H_
#define BACKFILL_TEXT_DISPLAY_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace backfill {
namespace text {

struct DisplayOptions {
  // True: "\" -> "\\", so that every escape reads back unambiguously (a
  // typed backslash-n differs from a newline), as the daemon log wants.
  // False: backslashes are kept as typed, for text that is only read.
  bool escape_backslash = false;
};

// The display form of `text`, one piece per character (one per byte that is
// not UTF-8): each a copy of the character or its escape. Joined they are
// DisplayText(text, options); a cut between two pieces never splits a
// character or an escape.
std::vector<std::string> DisplayPieces(std::string_view text,
                                       DisplayOptions options = {});

// The pieces of `text` joined.
std::string DisplayText(std::string_view text, DisplayOptions options = {});

// DisplayText(text, options) when it is at most `max_bytes` long. Else its
// longest prefix of whole pieces of at most `max_bytes` bytes, followed by
// "...[truncated, N bytes]" (N: the size of `text`).
std::string TruncatedDisplayText(std::string_view text, size_t max_bytes,
                                 DisplayOptions options = {});

}  // namespace text
}  // namespace backfill

#endif  // BACKFILL_TEXT_DISPLAY_TEXT_H_
