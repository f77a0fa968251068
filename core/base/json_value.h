// JsonValue: the little JSON the core reads and writes itself — a consumer's
// probe answer (one object whose top-level field holds the served value)
// and the body of an invalidation (strings and lists of strings). A strict
// parser of RFC 8259 text (objects, arrays, strings with escapes, numbers,
// true, false, null) with a nesting limit, and JsonQuote for writing a
// string. Values are plain data; functions are pure and thread-safe.

#ifndef BACKFILL_CORE_BASE_JSON_VALUE_H_
#define BACKFILL_CORE_BASE_JSON_VALUE_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace backfill {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;              // kString: the decoded string (UTF-8)
  std::string number_text;       // kNumber: as written, for messages
  std::vector<JsonValue> items;  // kArray
  std::map<std::string, JsonValue> fields;  // kObject (a repeated name: last)
};

// Parses one JSON document (whitespace around it allowed). INVALID_ARGUMENT
// saying where and why when `text` is not JSON, nests deeper than 64 levels
// or holds a number out of double's range.
absl::StatusOr<JsonValue> ParseJson(std::string_view text);

// `s` as a JSON string literal, quotes included (control characters, quote
// and backslash escaped; other bytes as they are).
std::string JsonQuote(std::string_view s);

}  // namespace backfill

#endif  // BACKFILL_CORE_BASE_JSON_VALUE_H_
