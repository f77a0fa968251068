#include "storage/postgres/pg_allow_list.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace backfill::postgres {
namespace {

bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool IsNameChar(char c) {
  return IsNameStart(c) || (c >= '0' && c <= '9') || c == '$';
}

absl::Status Unfollowable(std::string_view what, size_t offset) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(what), " at byte ",
                                                 offset, " cannot be checked"));
}

// Skips blanks and comments from `i`; the offset of the next token, or an
// error for an unterminated block comment.
absl::StatusOr<size_t> SkipBlanks(std::string_view sql, size_t i) {
  while (i < sql.size()) {
    const char c = sql[i];
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      while (i < sql.size() && sql[i] != '\n' && sql[i] != '\r') ++i;
    } else if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
      const size_t start = i;
      int depth = 0;
      while (true) {
        if (i + 1 >= sql.size()) {
          return Unfollowable("an unterminated comment", start);
        }
        if (sql[i] == '/' && sql[i + 1] == '*') {
          ++depth;
          i += 2;
        } else if (sql[i] == '*' && sql[i + 1] == '/') {
          i += 2;
          if (--depth == 0) break;
        } else {
          ++i;
        }
      }
    } else {
      break;
    }
  }
  return i;
}

// The offset just past the quoted text starting at `i` (sql[i] is the
// quote); a doubled quote stands for one.
absl::StatusOr<size_t> SkipQuoted(std::string_view sql, size_t i,
                                  std::string* text) {
  const char quote = sql[i];
  const size_t start = i++;
  while (true) {
    if (i >= sql.size()) {
      return Unfollowable(quote == '\'' ? "an unterminated string"
                                        : "an unterminated quoted name",
                          start);
    }
    if (sql[i] == quote) {
      if (i + 1 < sql.size() && sql[i + 1] == quote) {
        if (text != nullptr) text->push_back(quote);
        i += 2;
        continue;
      }
      return i + 1;
    }
    if (text != nullptr) text->push_back(sql[i]);
    ++i;
  }
}

}  // namespace

bool IsAllowedPgFunction(std::string_view name) {
  static const auto* const kAllowed = new absl::flat_hash_set<std::string>{
      // Numbers.
      "abs", "cbrt", "ceil", "ceiling", "degrees", "div", "exp", "floor", "ln",
      "log", "log10", "mod", "pi", "power", "radians", "round", "sign", "sqrt",
      "trunc", "width_bucket", "scale", "isnan",
      // Comparison and conditionals (also their function forms).
      "coalesce", "nullif", "greatest", "least", "num_nulls", "num_nonnulls",
      // Text that does not grow beyond its arguments.
      "lower", "upper", "initcap", "length", "char_length", "character_length",
      "octet_length", "bit_length", "substr", "substring", "position", "strpos",
      "btrim", "ltrim", "rtrim", "trim", "left", "right", "split_part",
      "starts_with", "reverse", "translate", "concat", "concat_ws", "md5",
      "ascii", "chr", "textlen", "texticlike", "textlike", "like", "ilike",
      "regexp_like", "regexp_match", "regexp_count", "regexp_instr",
      "regexp_substr", "textregexeq", "to_char", "to_number", "quote_literal",
      "quote_nullable",
      // Dates and times.
      "date_trunc", "date_part", "extract", "date_bin", "age", "make_date",
      "make_time", "make_timestamp", "make_timestamptz", "make_interval",
      "isfinite", "justify_days", "justify_hours", "justify_interval",
      "to_date", "to_timestamp", "now", "clock_timestamp",
      "statement_timestamp", "transaction_timestamp", "timeofday", "timezone",
      "overlaps", "current_date", "current_time", "current_timestamp",
      "localtime", "localtimestamp",
      // JSON accessors.
      "json_extract_path", "json_extract_path_text", "jsonb_extract_path",
      "jsonb_extract_path_text", "json_typeof", "jsonb_typeof",
      "json_array_length", "jsonb_array_length", "jsonb_exists",
      "jsonb_exists_any", "jsonb_exists_all", "jsonb_contains",
      "jsonb_contained", "json_object_field", "json_object_field_text",
      "jsonb_object_field", "jsonb_object_field_text", "json_array_element",
      "json_array_element_text", "jsonb_array_element",
      "jsonb_array_element_text", "json_array_elements",
      "json_array_elements_text", "jsonb_array_elements",
      "jsonb_array_elements_text",
      // Arrays.
      "array_length", "cardinality", "array_position", "array_lower",
      "array_upper", "unnest",
      // Aggregates.
      "count", "sum", "avg", "min", "max", "bool_and", "bool_or", "every",
      "stddev", "stddev_pop", "stddev_samp", "variance", "var_pop", "var_samp",
      // Window functions.
      "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile",
      "lag", "lead", "first_value", "last_value", "nth_value",
      // The function forms of casts.
      "int2", "int4", "int8", "float4", "float8", "numeric", "text", "bool",
      "date", "time", "timestamp", "timestamptz", "interval", "varchar",
      "bpchar", "to_json", "to_jsonb"};
  return kAllowed->contains(std::string(name));
}

bool IsPgKeyword(std::string_view name) {
  static const auto* const kKeywords = new absl::flat_hash_set<std::string>{
      "all",       "and",        "any",       "array",     "as",
      "asc",       "asymmetric", "at",        "between",   "by",
      "case",      "cast",       "char",      "character", "collate",
      "current",   "decimal",    "desc",      "distinct",  "double",
      "else",      "end",        "escape",    "except",    "exists",
      "extract",   "false",      "filter",    "first",     "float",
      "following", "from",       "group",     "having",    "ilike",
      "in",        "intersect",  "is",        "isnull",    "join",
      "last",      "lateral",    "like",      "limit",     "not",
      "notnull",   "null",       "nulls",     "offset",    "on",
      "only",      "or",         "order",     "over",      "overlay",
      "partition", "position",   "precision", "preceding", "range",
      "row",       "rows",       "select",    "similar",   "some",
      "substring", "symmetric",  "then",      "to",        "trim",
      "true",      "unbounded",  "union",     "using",     "values",
      "varying",   "when",       "where",     "window",    "with",
      "within",    "zone"};
  return kKeywords->contains(std::string(name));
}

absl::StatusOr<std::vector<CalledName>> CalledNames(std::string_view sql) {
  std::vector<CalledName> out;
  auto add = [&](CalledName call) {
    if (std::find(out.begin(), out.end(), call) == out.end()) {
      out.push_back(std::move(call));
    }
  };
  size_t i = 0;
  while (true) {
    absl::StatusOr<size_t> next = SkipBlanks(sql, i);
    if (!next.ok()) return next.status();
    i = *next;
    if (i >= sql.size()) break;
    const char c = sql[i];
    CalledName name;
    if (c == '\'') {
      absl::StatusOr<size_t> end = SkipQuoted(sql, i, nullptr);
      if (!end.ok()) return end.status();
      i = *end;
      continue;
    }
    if (c == '$' && i + 1 < sql.size() &&
        (sql[i + 1] == '$' || IsNameStart(sql[i + 1]))) {
      return Unfollowable("a dollar-quoted string", i);
    }
    if (c == '"') {
      absl::StatusOr<size_t> end = SkipQuoted(sql, i, &name.name);
      if (!end.ok()) return end.status();
      name.quoted = true;
      i = *end;
    } else if (IsNameStart(c)) {
      const size_t start = i;
      while (i < sql.size() && IsNameChar(sql[i])) ++i;
      name.name =
          absl::AsciiStrToLower(std::string(sql.substr(start, i - start)));
      if (i < sql.size() && sql[i] == '\'') {
        // A prefixed string: E'..' escapes with backslashes, which this
        // scan does not follow; B'..', X'..', N'..' lex as standard ones.
        if (name.name == "e") return Unfollowable("an escape string", start);
        continue;
      }
    } else {
      ++i;
      continue;
    }
    absl::StatusOr<size_t> after = SkipBlanks(sql, i);
    if (!after.ok()) return after.status();
    if (*after < sql.size() && sql[*after] == '(') add(std::move(name));
  }
  return out;
}

absl::StatusOr<std::string> FirstRefusedCall(std::string_view sql) {
  absl::StatusOr<std::vector<CalledName>> calls = CalledNames(sql);
  if (!calls.ok()) return calls.status();
  for (const CalledName& call : *calls) {
    if (!call.quoted && IsPgKeyword(call.name)) continue;
    if (IsAllowedPgFunction(call.name)) continue;
    return absl::StrCat("calls function ", call.name,
                        ", which is not on the allow-list of functions");
  }
  return std::string();
}

}  // namespace backfill::postgres
