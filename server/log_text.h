// LogText: free text (a job's reason or message, anything a client sent)
// made safe to put inside one line of the daemon log. Control characters
// (a newline would start a line of its own that looks like the daemon's),
// ANSI escape sequences, bytes that are not UTF-8 and the invisible Unicode
// characters that reorder or break lines are escaped; every other character,
// ASCII or not, is kept as it is, so a reason in any language stays
// readable. Very long values are truncated with a marker. The escapes are
// those of text/display_text.h, with backslashes escaped.
//
// A pure function over values: it owns nothing, keeps no state and is
// thread-safe.

#ifndef BACKFILL_SERVER_LOG_TEXT_H_
#define BACKFILL_SERVER_LOG_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace backfill {

// What LogText() keeps of a value by default, in bytes of its output.
inline constexpr size_t kLogTextMaxBytes = 1024;

// `text` as one printable line:
//   "\"                       -> "\\" (so that every escape is unambiguous)
//   newline, CR, tab          -> "\n", "\r", "\t"
//   other bytes < 0x20, 0x7f  -> "\xNN" (ESC, so ANSI sequences, -> "\x1b")
//   bytes that are not UTF-8  -> "\xNN"
//   U+0080..U+009F (C1 controls), U+2028, U+2029 (line and paragraph
//   separators), U+200E, U+200F, U+202A..U+202E, U+2066..U+2069
//   (bidirectional marks and overrides) -> "\uNNNN"
// Everything else is copied. When the result would be longer than
// `max_bytes`, it is cut at a character boundary and
// "...[truncated, N bytes]" (N: the size of `text`) is appended.
std::string LogText(std::string_view text, size_t max_bytes = kLogTextMaxBytes);

}  // namespace backfill

#endif  // BACKFILL_SERVER_LOG_TEXT_H_
