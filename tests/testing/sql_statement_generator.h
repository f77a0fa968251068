// StatementGenerator: statements for the tests of named parameters
// (storage_sql_named_parameters_*_test.cc), built from pieces, each either
// text or one parameter, so that what ToPositional must find is known by
// construction: parameters, casts, colons that are no parameter, strings,
// quoted identifiers, dollar quotes and comments holding fake ones.
//
// Deterministic for a seed; not thread-safe (one generator per thread).

#ifndef BACKFILL_TESTS_TESTING_SQL_STATEMENT_GENERATOR_H_
#define BACKFILL_TESTS_TESTING_SQL_STATEMENT_GENERATOR_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "storage/sql/named_parameters.h"

namespace backfill::sql::statement_testing {

// A statement is built from pieces, each either text or one parameter, so
// what ToPositional must find is known by construction.
struct Piece {
  std::string text;
  bool parameter = false;
};

// What PostgreSQL returns for one column of a generated SELECT.
struct Column {
  std::string value;
  std::string alias;  // the name its quoted alias gives it; "" if none
};

struct Statement {
  std::vector<Piece> pieces;
  std::vector<Column> columns;  // when generated for PostgreSQL

  std::string Sql() const {
    std::string sql;
    for (const Piece& p : pieces) sql += p.text;
    return sql;
  }
  // In order of first appearance.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const Piece& p : pieces) {
      if (p.parameter &&
          std::find(names.begin(), names.end(), p.text) == names.end()) {
        names.push_back(p.text);
      }
    }
    return names;
  }
  std::string Positional() const {
    const std::vector<std::string> names = Names();
    std::string text;
    for (const Piece& p : pieces) {
      if (!p.parameter) {
        text += p.text;
        continue;
      }
      const size_t n =
          std::find(names.begin(), names.end(), p.text) - names.begin() + 1;
      absl::StrAppend(&text, "$", n);
    }
    return text;
  }
};

// The value a generated statement binds to `name`.
inline std::string ValueOf(std::string_view name) {
  return absl::StrCat("v", absl::string_view(name.data(), name.size()));
}

inline bool IsNameByte(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '$' ||
         static_cast<unsigned char>(c) >= 0x80;
}

// Text that looks like SQL that matters, for the insides of literals and
// comments: fake parameters, quotes, comment marks, positional parameters.
inline constexpr const char* kNoise[] = {
    ":x",    ":partition", ":partition::date",
    "$1",    "$$",         "$a$",
    "$tag$", "'",          "\"",
    "''",    "--",         "/*",
    "*/",    "\\",         "\\'",
    "::",    ":=",         "E'",
    "e'",    "?",          "@",
    ";",     "\n",         "\r\n",
    "ü",     "a",          " ",
    "-",     "*",          "/",
    "$",     ":",          "$ä$"};

inline constexpr const char* kNames[] = {":partition_start",
                                         ":partition_end",
                                         ":partition",
                                         ":window_start",
                                         ":keys",
                                         ":partition_key",
                                         ":a",
                                         ":A",
                                         ":_x9",
                                         ":größe",
                                         ":a$1",
                                         ":é"};

inline constexpr const char* kTags[] = {"", "a", "tag", "_x1", "ä", "A"};

// Random statements. For PostgreSQL they are valid SELECTs whose columns'
// values are known; otherwise they also hold what PostgreSQL would refuse
// but the lexer must still read right (":a:b", ":a:::b", "x::").
class StatementGenerator {
 public:
  StatementGenerator(uint32_t seed, bool for_postgres)
      : rng_(seed), for_postgres_(for_postgres) {}

  Statement Next() {
    st_ = Statement();
    Raw("SELECT ");
    const int items = 1 + Pick(8);
    for (int i = 0; i < items; ++i) {
      if (i > 0) Separator();
      Column column;
      column.value = Item();
      if (for_postgres_ && Chance(20)) column.alias = Alias();
      st_.columns.push_back(std::move(column));
    }
    if (Chance(30)) Add(Comment());
    return std::move(st_);
  }

 private:
  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool Chance(int percent) { return Pick(100) < percent; }
  template <typename T, size_t N>
  const T& OneOf(const T (&items)[N]) {
    return items[Pick(static_cast<int>(N))];
  }

  // Noise of up to `max` tokens, with only the tokens `ok` accepts.
  template <typename Ok>
  std::string Noise(int max, Ok ok) {
    std::string s;
    const int n = Pick(max + 1);
    for (int i = 0; i < n;) {
      const std::string_view t = OneOf(kNoise);
      if (!ok(t)) continue;
      s += t;
      ++i;
    }
    return s;
  }
  std::string Noise(int max = 6) {
    return Noise(max, [](std::string_view) { return true; });
  }

  // Appends a piece as it is: the caller knows it lexes as meant there.
  void Raw(std::string text, bool parameter = false) {
    st_.pieces.push_back({std::move(text), parameter});
  }

  // Appends a piece with a space before it where the two would otherwise
  // run together into something else (a longer name or word, a '' or ""
  // escape, a comment mark, a cast).
  void Add(std::string text, bool parameter = false) {
    if (!st_.pieces.empty() && !text.empty() &&
        !st_.pieces.back().text.empty()) {
      const Piece& last = st_.pieces.back();
      const char p = last.text.back();
      const char q = text.front();
      const bool space =
          last.parameter
              ? IsNameByte(q)
              : (IsNameByte(p) && (IsNameByte(q) || q == '\'' || parameter)) ||
                    p == ':' || p == '$' || (p == '\'' && q == '\'') ||
                    (p == '"' && q == '"') || (p == '-' && q == '-') ||
                    (p == '/' && q == '*') || (p == '*' && q == '/');
      if (space) Raw(" ");
    }
    Raw(std::move(text), parameter);
  }
  void Parameter(std::string name) { Add(std::move(name), true); }

  void Separator() {
    Add(",");
    if (Chance(25)) Add(Comment());
    const char* const kSpaces[] = {"", " ", "\n", "\t"};
    const std::string space = OneOf(kSpaces);
    if (!space.empty()) Add(space);
  }

  std::string Comment() {
    if (Chance(50)) {
      return "--" +
             Noise(6,
                   [](std::string_view t) {
                     return t.find_first_of("\r\n") == std::string_view::npos;
                   }) +
             "\n";
    }
    // No '*' or '/' in the noise, so only the marks below open or close.
    auto plain = [](std::string_view t) {
      return t.find_first_of("*/") == std::string_view::npos;
    };
    std::string c = "/*" + Noise(4, plain);
    if (Chance(40)) c += " /* " + Noise(3, plain) + " */ ";
    return c + Noise(3, plain) + "*/";
  }

  std::string Name() { return OneOf(kNames); }

  // A string literal of any kind (as text of one piece) and its value.
  std::pair<std::string, std::string> StringLiteral() {
    std::string value, text;
    switch (Pick(4)) {
      case 0:  // standard
        value = Noise();
        text = "'" + absl::StrReplaceAll(value, {{"'", "''"}}) + "'";
        break;
      case 1: {  // escape
        value = Noise();
        text = Chance(50) ? "E'" : "e'";
        for (char c : value) {
          if (c == '\\') {
            text += "\\\\";
          } else if (c == '\'') {
            text += Chance(50) ? "\\'" : "''";
          } else {
            text += c;
          }
        }
        text += "'";
        break;
      }
      case 2: {  // Unicode escapes
        text = "U&'";
        for (int i = Pick(5); i > 0; --i) {
          if (Chance(20)) {
            text += "\\0041";
            value += "A";
            continue;
          }
          const std::string t = OneOf(kNoise);
          value += t;
          text += absl::StrReplaceAll(t, {{"\\", "\\\\"}, {"'", "''"}});
        }
        text += "'";
        break;
      }
      default: {  // dollar-quoted
        const std::string delimiter = absl::StrCat("$", OneOf(kTags), "$");
        for (int tries = 0;; ++tries) {
          value = tries < 20 ? Noise() : "x";
          if ((value + delimiter).find(delimiter) == value.size()) break;
        }
        text = delimiter + value + delimiter;
      }
    }
    return {text, value};
  }

  // A string continued on the next line: E'..' keeps its escapes there.
  std::pair<std::string, std::string> ContinuedString() {
    const bool escape = Chance(70);
    const char* const kBetween[] = {"\n", " \n ", "\r\n", " -- :x '\n",
                                    "\n-- $1\n\t"};
    std::string text = escape ? "E'" : "'", value;
    const int segments = 2 + Pick(2);
    for (int segment = 0; segment < segments; ++segment) {
      if (segment > 0) text += std::string(OneOf(kBetween)) + "'";
      const std::string part = Noise(4);
      value += part;
      for (char c : part) {
        if (c == '\'') {
          text += escape && Chance(50) ? "\\'" : "''";
        } else if (c == '\\' && escape) {
          text += "\\\\";
        } else {
          text += c;
        }
      }
      text += "'";
    }
    return {text, value};
  }

  // One column of the SELECT list; its value.
  std::string Item() {
    const int kinds = for_postgres_ ? 12 : 15;
    switch (Pick(kinds)) {
      case 0: {
        auto [text, value] = StringLiteral();
        Add(text);
        if (Chance(30)) Add("::text");
        return value;
      }
      case 1: {
        auto [text, value] = ContinuedString();
        Add(text);
        return value;
      }
      case 2: {  // :name::text, maybe with a comment before the cast
        const std::string name = Name();
        Parameter(name);
        if (Chance(30)) Raw(Comment());
        Raw("::text");
        return ValueOf(name);
      }
      case 3: {
        const std::string name = Name();
        Add("(");
        Parameter(name);
        Raw(")::text");
        return ValueOf(name);
      }
      case 4: {  // :name::text||'literal'
        const std::string name = Name();
        Parameter(name);
        Raw("::text||");
        auto [text, value] = StringLiteral();
        Raw(text);
        return ValueOf(name) + value;
      }
      case 5: {
        const std::string a = Name(), b = Name();
        Add("concat(");
        Parameter(a);
        Raw("::text,");
        Parameter(b);
        Raw("::text)");
        return ValueOf(a) + ValueOf(b);
      }
      case 6: {
        const std::string name = Name();
        Add("coalesce(");
        Parameter(name);
        Raw("::text, ");
        Raw(StringLiteral().first);
        Raw(")");
        return ValueOf(name);
      }
      case 7: {  // casts without parameters
        const bool date = Chance(50);
        Add(date ? "'2025-01-31'::date::text" : "42::text");
        return date ? "2025-01-31" : "42";
      }
      case 8:  // named arguments
        Add(Chance(50) ? "make_interval(days := 2)::text"
                       : "make_interval(days=>2)::text");
        return "2 days";
      case 9: {  // array slices
        const char* const kSlices[][2] = {{"[2:3]", "{y,z}"},
                                          {"[:2]", "{x,y}"},
                                          {"[2:]", "{y,z}"},
                                          {"[1: 2]", "{x,y}"},
                                          {"[:]", "{x,y,z}"}};
        const auto& slice = OneOf(kSlices);
        Add(absl::StrCat("(ARRAY['x','y','z'])", slice[0], "::text"));
        return slice[1];
      }
      case 10: {  // '$' inside identifiers
        const char* const kIdentifiers[] = {"a$1", "x$$y", "t$a$"};
        const std::string id = OneOf(kIdentifiers);
        Add(absl::StrCat("(SELECT ", id, " FROM (SELECT 'q'::text AS ", id,
                         ") AS s)"));
        return "q";
      }
      case 11: {  // a quoted identifier full of noise
        std::string id;
        while (id.empty()) id = Noise(4);
        const std::string quoted =
            "\"" + absl::StrReplaceAll(id, {{"\"", "\"\""}}) + "\"";
        Add(absl::StrCat("(SELECT ", quoted, " FROM (SELECT 'q'::text AS ",
                         quoted, ") AS s)"));
        return "q";
      }
      // Only for the lexer: PostgreSQL would refuse these.
      case 12: {  // adjacent parameters, and casts between them
        Parameter(Name());
        if (Chance(50)) Raw("::");
        Raw(Name(), true);
        return "";
      }
      case 13:  // a cast at the end of a word; a lone colon
        Add(Chance(50) ? "x::" : "x:");
        Add(" ");
        return "";
      default: {  // a parameter right before a quote or a comment
        Parameter(Name());
        const char* const kAfter[] = {"'\\'", "\"a\"\":b\"", "/* :x */",
                                      "-- :x\n"};
        Raw(OneOf(kAfter));
        return "";
      }
    }
  }

  std::string Alias() {
    for (;;) {
      std::string id = Noise(3);
      // Non-empty, and short enough that PostgreSQL keeps it whole.
      if (id.empty() || id.size() > 63) continue;
      Add(" AS \"" + absl::StrReplaceAll(id, {{"\"", "\"\""}}) + "\"");
      return id;
    }
  }

  std::mt19937 rng_;
  const bool for_postgres_;
  Statement st_;
};

// Writes each $i back as names[i-1], reading the pieces of `st` to know
// where they are (literals may hold "$1" too).
inline std::string WriteBack(const Statement& st, const PositionalSql& p) {
  std::string back;
  size_t at = 0;
  for (const Piece& piece : st.pieces) {
    if (!piece.parameter) {
      if (p.text.compare(at, piece.text.size(), piece.text) != 0) {
        return "(text differs at byte " + std::to_string(at) + ")";
      }
      back += piece.text;
      at += piece.text.size();
      continue;
    }
    if (at >= p.text.size() || p.text[at] != '$') {
      return "(no $ at byte " + std::to_string(at) + ")";
    }
    size_t n = 0, end = at + 1;
    while (end < p.text.size() && p.text[end] >= '0' && p.text[end] <= '9') {
      n = n * 10 + (p.text[end++] - '0');
    }
    if (n < 1 || n > p.names.size()) {
      return "(bad number at byte " + std::to_string(at) + ")";
    }
    back += p.names[n - 1];
    at = end;
  }
  return at == p.text.size() ? back : "(text left over)";
}

// The error ToPositional gives for `sql`, which must be INVALID_ARGUMENT.
inline std::string ErrorOf(std::string_view sql) {
  absl::StatusOr<PositionalSql> got = ToPositional(sql);
  if (got.ok()) {
    ADD_FAILURE() << "no error for: " << sql << " (gave " << got->text << ")";
    return "";
  }
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
      << got.status();
  return std::string(got.status().message());
}

}  // namespace backfill::sql::statement_testing

#endif  // BACKFILL_TESTS_TESTING_SQL_STATEMENT_GENERATOR_H_
