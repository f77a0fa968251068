// Named parameters to positional ones (storage/sql/named_parameters.h): each
// lexing rule with hand-written cases, a property test over generated
// statements whose parameters are known by construction, and the same
// statements prepared and run by a real PostgreSQL server, whose own lexer
// has the last word.

#include <libpq-fe.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sql/named_parameters.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill::sql {
namespace storage_sql_named_parameters_test {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// A statement, what ToPositional must make of it and the names in order.
struct Case {
  std::string sql;
  std::string text;
  std::vector<std::string> names;
};

void ExpectCases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.sql);
    absl::StatusOr<PositionalSql> got = ToPositional(c.sql);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->text, c.text);
    EXPECT_THAT(got->names, ElementsAreArray(c.names));
  }
}

// Text that has no parameter comes back as it is.
void ExpectUnchanged(const std::vector<std::string>& sqls) {
  std::vector<Case> cases;
  for (const std::string& s : sqls) cases.push_back({s, s, {}});
  ExpectCases(cases);
}

// The error ToPositional gives for `sql`, which must be INVALID_ARGUMENT.
std::string ErrorOf(std::string_view sql) {
  absl::StatusOr<PositionalSql> got = ToPositional(sql);
  if (got.ok()) {
    ADD_FAILURE() << "no error for: " << sql << " (gave " << got->text << ")";
    return "";
  }
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
      << got.status();
  return std::string(got.status().message());
}

// ------------------------------------------------------------ parameters --

TEST(NamedParametersTest, TextWithoutParametersIsUnchanged) {
  ExpectUnchanged(
      {"", "SELECT 1", "SELECT a, b FROM t WHERE c = 'x'", "  \t\n", ";"});
}

TEST(NamedParametersTest, EachParameterBecomesItsNumber) {
  ExpectCases({
      {"SELECT :a", "SELECT $1", {":a"}},
      {":a", "$1", {":a"}},
      {":partition", "$1", {":partition"}},
      {"WHERE day >= :partition_start AND day < :partition_end",
       "WHERE day >= $1 AND day < $2",
       {":partition_start", ":partition_end"}},
      {"SELECT * FROM t WHERE k IN (SELECT unnest(:keys)) AND "
       "w >= :window_start AND p = :partition_key",
       "SELECT * FROM t WHERE k IN (SELECT unnest($1)) AND "
       "w >= $2 AND p = $3",
       {":keys", ":window_start", ":partition_key"}},
      // At the very end, and before punctuation.
      {"x = :partition", "x = $1", {":partition"}},
      {"f(:a,:b);", "f($1,$2);", {":a", ":b"}},
      {"(:a)", "($1)", {":a"}},
      {"x=:a\n", "x=$1\n", {":a"}},
      // After a digit, a quoted identifier or a literal, $n is its own
      // token to PostgreSQL too.
      {"1:b", "1$1", {":b"}},
      {"\"a\":b", "\"a\"$1", {":b"}},
      {"'a':b", "'a'$1", {":b"}},
      {"$$a$$:b", "$$a$$$1", {":b"}},
  });
}

TEST(NamedParametersTest, TheSameNameIsTheSameNumberInOrderOfFirstUse) {
  ExpectCases({
      {":b :a :b :a :c", "$1 $2 $1 $2 $3", {":b", ":a", ":c"}},
      {"WHERE d >= :partition_start AND d < :partition_end AND "
       ":partition_start < :partition_end",
       "WHERE d >= $1 AND d < $2 AND $1 < $2",
       {":partition_start", ":partition_end"}},
      // Byte for byte, as in SQLite: these are two parameters.
      {":a :A", "$1 $2", {":a", ":A"}},
  });
}

TEST(NamedParametersTest, NumbersPastNineAreWhole) {
  std::string sql, text;
  std::vector<std::string> names;
  for (int i = 1; i <= 12; ++i) {
    absl::StrAppend(&sql, ":p", i, ",");
    absl::StrAppend(&text, "$", i, ",");
    names.push_back(absl::StrCat(":p", i));
  }
  absl::StrAppend(&sql, ":p1 :p12");
  absl::StrAppend(&text, "$1 $12");
  ExpectCases({{sql, text, names}});
}

TEST(NamedParametersTest, WhatANameIs) {
  ExpectCases({
      {":_", "$1", {":_"}},
      {":_1 :a1b2", "$1 $2", {":_1", ":a1b2"}},
      {":Partition_Start", "$1", {":Partition_Start"}},
      // '$' continues a name, as in SQLite and in PostgreSQL identifiers.
      {":a$1 :x$$y", "$1 $2", {":a$1", ":x$$y"}},
      // Bytes >= 0x80 are name bytes (SQLite's rule): the whole UTF-8
      // word is the name, wherever the non-ASCII letter stands.
      {"SELECT :größe", "SELECT $1", {":größe"}},
      {":partitionü = 1", "$1 = 1", {":partitionü"}},
      {":ünd", "$1", {":ünd"}},
      {":日付::date", "$1::date", {":日付"}},
      // Even bytes that are not UTF-8, and a non-breaking space (C2 A0).
      {":a\xff\xfe b", "$1 b", {":a\xff\xfe"}},
      {":a\xc2\xa0", "$1", {":a\xc2\xa0"}},
      // A NUL byte ends a name like any other non-name byte.
      {std::string(":a\0:b", 5), std::string("$1\0$2", 5), {":a", ":b"}},
  });
}

TEST(NamedParametersTest, AdjacentParametersAreTwo) {
  ExpectCases({
      {":a:b", "$1$2", {":a", ":b"}},
      {":a:a", "$1$1", {":a"}},
      {":a:b:c", "$1$2$3", {":a", ":b", ":c"}},
  });
}

TEST(NamedParametersTest, TheCastOperatorIsNeverAParameter) {
  ExpectUnchanged({"SELECT x::date", "SELECT '2025-01-31'::date::text",
                   "SELECT x::", "::", "x ::date", "SELECT x::\"my type\"",
                   "SELECT a::int[]"});
  ExpectCases({
      {":partition::date", "$1::date", {":partition"}},
      {"WHERE d = :partition::date + 1",
       "WHERE d = $1::date + 1",
       {":partition"}},
      {":a::int::text", "$1::int::text", {":a"}},
      {":a::b", "$1::b", {":a"}},
      {"(:a)::date", "($1)::date", {":a"}},
      {":a ::date", "$1 ::date", {":a"}},
      // Left to right: "::" first, then ":x".
      {"x:::y", "x::$1", {":y"}},
      {":a:::b", "$1::$2", {":a", ":b"}},
      {":a::", "$1::", {":a"}},
  });
}

TEST(NamedParametersTest, AColonNotBeforeANameIsLeftAlone) {
  ExpectUnchanged({
      "SELECT f(a := 1)",      // named argument
      "SELECT f(a:=1)",        //
      "SELECT a[1:2]",         // array slice
      "SELECT a[1: n]",        //
      "SELECT a[1 : n]",       //
      "SELECT a[:]",           // both bounds omitted
      "SELECT a[:2], a[2:]",   //
      "SELECT :",              // the end of the text
      ": x",                   //
      ":1 :2x",                // unlike SQLite, a digit starts no name
      ":$x",                   // nor does '$' (here a lone '$')
      ":) :] :, :; :+ :-1 :*"  //
  });
  ExpectCases({
      {"SELECT f(a := :b)", "SELECT f(a := $1)", {":b"}},
      {"f(a:=:b)", "f(a:=$1)", {":b"}},
      {"SELECT a[lo: hi]", "SELECT a[lo: hi]", {}},
      // A bare column right after a slice's colon reads as a parameter.
      {"SELECT a[1:n]", "SELECT a[1$1]", {":n"}},
  });
}

// ------------------------------------------------------- quoted strings --

TEST(NamedParametersTest, NothingInAStandardStringIsAParameter) {
  ExpectUnchanged({"SELECT ':x'", "SELECT 'it''s :x'", "SELECT ''",
                   "SELECT ''''", "SELECT ''':x'''", "'-- :x' '/* :x'",
                   "SELECT '$1 $$ $a$ :x::date'", "SELECT '\"'",
                   "SELECT 'a\nb :x'"});
  ExpectCases({
      {"SELECT 'a' :b 'c'", "SELECT 'a' $1 'c'", {":b"}},
      {"'it''s' || :x", "'it''s' || $1", {":x"}},
      // A backslash is a byte like any other in a standard string.
      {"SELECT '\\' || :x", "SELECT '\\' || $1", {":x"}},
      {"SELECT 'a\\' :x", "SELECT 'a\\' $1", {":x"}},
      // B'', X'', N'' and U&'' lex like standard strings.
      {"SELECT B'01' :x, X'1F' :y, N':z' :w",
       "SELECT B'01' $1, X'1F' $2, N':z' $3",
       {":x", ":y", ":w"}},
      {"SELECT U&'\\0041 :z', U&'\\' :x",
       "SELECT U&'\\0041 :z', U&'\\' $1",
       {":x"}},
      {":x'lit'", "$1'lit'", {":x"}},
  });
}

TEST(NamedParametersTest, EscapeStringsHonourBackslashes) {
  ExpectUnchanged({
      "SELECT E'it\\'s :x'",       // E'it\'s :x'
      "SELECT e'it\\'s :x'",       // lower case e
      "SELECT E'it''s :x'",        // '' is a quote in E'' too
      "SELECT E'\\\\\\' :x'",      // E'\\\' :x': \\ then \' then more
      "SELECT E'\\n:x\\t'",        //
      "SELECT E'\\x41 :x \\101'",  //
  });
  ExpectCases({
      // E'\\' ends after the escaped backslash.
      {"SELECT E'\\\\' :x", "SELECT E'\\\\' $1", {":x"}},
      {"SELECT E'\\\\' :x, ':y'", "SELECT E'\\\\' $1, ':y'", {":x"}},
      // Only a lone E or e before the quote makes an escape string: these
      // are a word followed by a standard string.
      {"SELECT ne'\\' :y", "SELECT ne'\\' $1", {":y"}},
      {"SELECT Ee'\\' :y", "SELECT Ee'\\' $1", {":y"}},
      // A parameter's name is not a word: after :e comes a standard string,
      // as PostgreSQL sees $1'...' after the translation.
      {":e'\\' :y", "$1'\\' $2", {":e", ":y"}},
      {"SELECT E '\\' :y", "SELECT E '\\' $1", {":y"}},
  });
}

TEST(NamedParametersTest, AStringContinuesAfterANewline) {
  ExpectUnchanged({
      // The continuation of an escape string keeps its backslash escapes.
      "SELECT E'a'\n'\\' :x'",
      "SELECT E'a'\r\n'\\' :x'",
      "SELECT E'a' \n\t '\\' :x'",
      "SELECT E'a' -- :c\n'\\' :x'",
      "SELECT E'a'\n-- :c\n  '\\' :x'",
      "SELECT E'a'\n'b'\n'\\' :x'",
      "SELECT 'a'\n':x'",
  });
  ExpectCases({
      // Without a newline the second quote is a new standard string.
      {"SELECT E'a' '\\' :x", "SELECT E'a' '\\' $1", {":x"}},
      // A block comment is not continuation whitespace.
      {"SELECT E'a'\n/* */'\\' :x", "SELECT E'a'\n/* */'\\' $1", {":x"}},
      // Nor is anything else between them.
      {"SELECT E'a',\n'\\' :x", "SELECT E'a',\n'\\' $1", {":x"}},
      {"SELECT 'a'\n:x", "SELECT 'a'\n$1", {":x"}},
  });
}

TEST(NamedParametersTest, NothingInAQuotedIdentifierIsAParameter) {
  ExpectUnchanged({"SELECT \"a\"\":b\"", "SELECT \":x\"", "SELECT U&\":x\"",
                   "SELECT 1 AS \"$1\"", "SELECT \"--\" , \"/*\""});
  ExpectCases({
      {"SELECT \"a\" :b", "SELECT \"a\" $1", {":b"}},
      {"SELECT \"it's\" :x", "SELECT \"it's\" $1", {":x"}},
      {"SELECT 'say \"hi\"' :x", "SELECT 'say \"hi\"' $1", {":x"}},
      {"SELECT \"a\"\"\" :x", "SELECT \"a\"\"\" $1", {":x"}},
  });
}

TEST(NamedParametersTest, NothingInADollarQuotedStringIsAParameter) {
  ExpectUnchanged({
      "SELECT $$ :x $$",
      "SELECT $a$ :x $a$",
      "SELECT $a$ $b$ :x $b$ $a$",  // another tag inside
      "SELECT $a$ $$ :x $$ $a$",
      "SELECT $a$ :x $A$ :y $a$",  // tags are case-sensitive
      "SELECT $tag$ it's \":x\" -- /* $tag$",
      "SELECT $_1$ :x $_1$",
      "SELECT $ä$ :x $ä$",  // bytes >= 0x80 in a tag
      "SELECT $$$$",        // empty
      "SELECT $$ $1 $$",
      "SELECT $a$ :x $$a$",  // "$$a$": the delimiter starts at the 2nd '$'
      "SELECT $ab$ $a $b$ $ab $ab$",
  });
  ExpectCases({
      {"SELECT $$$$ :x", "SELECT $$$$ $1", {":x"}},
      {"SELECT $a$x$a$ :y", "SELECT $a$x$a$ $1", {":y"}},
      {"SELECT $a$ :x $a$ || :y || $b$ :z $b$",
       "SELECT $a$ :x $a$ || $1 || $b$ :z $b$",
       {":y"}},
      // '$' inside a word starts no quote and no positional parameter.
      {"SELECT x$$y, :a", "SELECT x$$y, $1", {":a"}},
      {"SELECT a$1, :b", "SELECT a$1, $1", {":b"}},
      {"SELECT x$a$ :b", "SELECT x$a$ $1", {":b"}},
      // A '$' that starts neither is left alone.
      {"SELECT $ :a", "SELECT $ $1", {":a"}},
      {"SELECT $ab :a", "SELECT $ab $1", {":a"}},
      {"SELECT :a $", "SELECT $1 $", {":a"}},
  });
}

// ------------------------------------------------------------- comments --

TEST(NamedParametersTest, NothingInALineCommentIsAParameter) {
  ExpectUnchanged({"SELECT 1 -- :x", "--:x", "-- ' :x", "-- /* :x",
                   "SELECT 1 --", "-- $1"});
  ExpectCases({
      {"--:x\n:y", "--:x\n$1", {":y"}},
      {"--:x\r:y", "--:x\r$1", {":y"}},
      {"-- 'unclosed\n:y", "-- 'unclosed\n$1", {":y"}},
      {"-- /* unclosed\n:y", "-- /* unclosed\n$1", {":y"}},
      {"SELECT 1---:x\n:y", "SELECT 1---:x\n$1", {":y"}},
      {"SELECT :a-- :b\n", "SELECT $1-- :b\n", {":a"}},
      {"SELECT 1 - -:a", "SELECT 1 - -$1", {":a"}},
  });
}

TEST(NamedParametersTest, BlockCommentsNest) {
  ExpectUnchanged({"/* :x */", "/* /* :x */ :y */", "/**/", "/* $1 */",
                   "/* ' :x */", "/* \" :x */", "/* $$ :x */",
                   "/* -- :x\n :y */", "/* /* /* :x */ */ :y */"});
  ExpectCases({
      {"/* /* :x */ :y */ :z", "/* /* :x */ :y */ $1", {":z"}},
      {"/* :x */:y", "/* :x */$1", {":y"}},
      {"/**/:y", "/**/$1", {":y"}},
      // The '*' of "/*" does not also close it.
      {"/*/ :x */ :y", "/*/ :x */ $1", {":y"}},
      {"/* **/ :y", "/* **/ $1", {":y"}},
      {"/* */*/ :y", "/* */*/ $1", {":y"}},
      {":a/* :b */:c", "$1/* :b */$2", {":a", ":c"}},
      {"SELECT 2*/* :x */:y", "SELECT 2*/* :x */$1", {":y"}},
      {"*/ :y", "*/ $1", {":y"}},
  });
}

// ---------------------------------------------------- every other byte --

TEST(NamedParametersTest, EveryOtherByteIsKept) {
  const std::string before = "  SELECT\t'a''b' /* c\r\n */, E'\\x00',\r\n ";
  std::string after =
      " -- d\nFROM \"T\"\"1\" WHERE x = $q$ :q $q$ \x01\x7f\xff";
  after += '\0';
  after += ";\n\n";
  ExpectCases({{before + ":p" + after, before + "$1" + after, {":p"}}});
}

// --------------------------------------------------------------- errors --

TEST(NamedParametersTest, AnUnterminatedLiteralOrCommentIsAnError) {
  constexpr char kString[] = "quoted string (')";
  constexpr char kEscape[] = "escape string (E'...')";
  constexpr char kIdentifier[] = "quoted identifier (\")";
  constexpr char kDollar[] = "dollar-quoted string";
  constexpr char kComment[] = "block comment (/*)";
  struct Bad {
    std::string sql;
    const char* what;
    int offset;  // of the opening
  };
  for (const Bad& b : std::vector<Bad>{
           {"SELECT 'abc", kString, 7},
           {"SELECT 'it''s", kString, 7},
           {"SELECT 'a' || 'b", kString, 14},
           {"SELECT :a, 'b", kString, 11},
           {"SELECT 'a'\n'b", kString, 7},  // the continued string's opening
           {"SELECT '", kString, 7},
           {"SELECT U&'abc", kString, 9},
           {"SELECT E'abc\\'", kEscape, 7},
           {"SELECT E'\\", kEscape, 7},
           {"SELECT e'a'\n'\\'", kEscape, 7},
           {"SELECT \"abc", kIdentifier, 7},
           {"SELECT \"a\"\"", kIdentifier, 7},
           {"SELECT $$ abc", kDollar, 7},
           {"SELECT $$ abc $", kDollar, 7},
           {"SELECT $a$ abc $b$", kDollar, 7},
           {"SELECT $a$ abc $A$", kDollar, 7},
           {"SELECT $a$ abc $a", kDollar, 7},
           {"SELECT /* abc", kComment, 7},
           {"SELECT /* /* */ abc", kComment, 7},
           {"SELECT /*/", kComment, 7},
           // A quote in a comment is a byte: the comment ends at "*/".
           {"SELECT /* '*/' */", kString, 13},
           {":e'\\' :y'", kString, 8},
       }) {
    SCOPED_TRACE(b.sql);
    EXPECT_EQ(ErrorOf(b.sql),
              absl::StrCat("unterminated ", b.what, " starting at byte offset ",
                           b.offset));
  }
}

TEST(NamedParametersTest, APositionalParameterIsAnError) {
  EXPECT_EQ(ErrorOf("SELECT $1"),
            "the statement has the positional parameter $1 at byte offset 7; "
            "use only named parameters (:name): they are numbered $1..$n "
            "when the statement is translated, so a positional one would "
            "silently stand for another value");
  EXPECT_THAT(ErrorOf("SELECT :a, $12"),
              HasSubstr("positional parameter $12 at byte offset 11"));
  EXPECT_THAT(ErrorOf("$0"), HasSubstr("positional parameter $0 at byte "
                                       "offset 0"));
  EXPECT_THAT(ErrorOf("SELECT 1$1"), HasSubstr("$1 at byte offset 8"));
  // A digit cannot start a tag: $1$ is $1 and then a '$'.
  EXPECT_THAT(ErrorOf("SELECT $1$ x $1$"), HasSubstr("$1 at byte offset 7"));
  EXPECT_THAT(ErrorOf(":$1"), HasSubstr("$1 at byte offset 1"));
  // Inside literals, comments and words it is text.
  ExpectUnchanged({"SELECT '$1'", "SELECT \"$1\"", "-- $1", "/* $1 */",
                   "SELECT $$ $1 $$", "SELECT a$1", "SELECT E'\\'$1'"});
}

TEST(NamedParametersTest, AParameterDirectlyAfterAWordIsAnError) {
  // PostgreSQL would read "lo$1" as one identifier.
  EXPECT_EQ(ErrorOf("SELECT a[lo:hi]"),
            "the parameter :hi at byte offset 11 directly follows a word, "
            "which PostgreSQL would read together with its $n as one "
            "identifier; put a space before the ':' (in an array slice "
            "a[lo:hi], write a[lo: hi])");
  EXPECT_THAT(ErrorOf("SELECT a:b"), HasSubstr(":b at byte offset 8"));
  EXPECT_THAT(ErrorOf("SELECT x$:b"), HasSubstr(":b at byte offset 9"));
  EXPECT_THAT(ErrorOf("SELECT größe:b"), HasSubstr(":b at byte offset 14"));
  EXPECT_THAT(ErrorOf("WHERE d = E:partition"),
              HasSubstr(":partition at byte offset 11"));
  // Not after a cast's type: "::" is no word, but the type name before
  // the next ':' is.
  EXPECT_THAT(ErrorOf("SELECT x::int:b"), HasSubstr(":b at byte offset 13"));
  ExpectCases(
      {{"SELECT a :b, a::b, a::text", "SELECT a $1, a::b, a::text", {":b"}}});
}

TEST(NamedParametersTest, PsqlQuotedVariablesAreAnError) {
  EXPECT_EQ(ErrorOf("SELECT :'partition'"),
            "a ':' directly before a quote at byte offset 7 (psql's :'name' "
            "or :\"name\") names no parameter; write :name (values are "
            "always bound), or put a space after a slice's ':'");
  EXPECT_THAT(ErrorOf("SELECT :\"partition\""), HasSubstr("byte offset 7"));
  EXPECT_THAT(ErrorOf("SELECT a[1:'2']"), HasSubstr("byte offset 10"));
  ExpectUnchanged({"SELECT a[1: '2']", "SELECT x::'a'", "f(a :='x')"});
}

TEST(NamedParametersTest, AtMostKMaxParametersDistinctNames) {
  std::string sql;
  for (size_t i = 0; i < kMaxParameters; ++i)
    absl::StrAppend(&sql, ":p", i, " ");
  absl::StrAppend(&sql, ":p0 :p65534");
  absl::StatusOr<PositionalSql> most = ToPositional(sql);
  ASSERT_TRUE(most.ok()) << most.status();
  EXPECT_EQ(most->names.size(), kMaxParameters);
  EXPECT_EQ(most->names.back(), ":p65534");
  EXPECT_THAT(most->text, HasSubstr(" $65535 $1 $65535"));

  const size_t offset = sql.size() + 1;
  absl::StrAppend(&sql, " :one_more");
  EXPECT_EQ(ErrorOf(sql),
            absl::StrCat("the statement has more than 65535 distinct "
                         "parameters (the most PostgreSQL binds), the next at "
                         "byte offset ",
                         offset));
}

// ------------------------------------------------- generated statements --

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
std::string ValueOf(std::string_view name) {
  return absl::StrCat("v", absl::string_view(name.data(), name.size()));
}

bool IsNameByte(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '$' ||
         static_cast<unsigned char>(c) >= 0x80;
}

// Text that looks like SQL that matters, for the insides of literals and
// comments: fake parameters, quotes, comment marks, positional parameters.
constexpr const char* kNoise[] = {":x",    ":partition", ":partition::date",
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

constexpr const char* kNames[] = {":partition_start",
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

constexpr const char* kTags[] = {"", "a", "tag", "_x1", "ä", "A"};

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
std::string WriteBack(const Statement& st, const PositionalSql& p) {
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

TEST(NamedParametersPropertyTest, GeneratedStatementsKeepTheirParameters) {
  for (uint32_t seed : {1u, 2u, 20250131u}) {
    StatementGenerator gen(seed, /*for_postgres=*/false);
    for (int i = 0; i < 1500; ++i) {
      const Statement st = gen.Next();
      const std::string sql = st.Sql();
      SCOPED_TRACE(absl::StrCat("seed ", seed, " #", i, ": ", sql));
      absl::StatusOr<PositionalSql> got = ToPositional(sql);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_THAT(got->names, ElementsAreArray(st.Names()));
      ASSERT_EQ(got->text, st.Positional());
      ASSERT_EQ(WriteBack(st, *got), sql);
    }
  }
}

TEST(NamedParametersPropertyTest, CuttingAStatementShortNeverCrashes) {
  // Every prefix either translates or says what is unterminated.
  StatementGenerator gen(7, /*for_postgres=*/false);
  for (int i = 0; i < 200; ++i) {
    const std::string sql = gen.Next().Sql();
    for (size_t n = 0; n <= sql.size(); ++n) {
      absl::StatusOr<PositionalSql> got = ToPositional(sql.substr(0, n));
      if (!got.ok()) {
        EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(got.status().message(),
                    ::testing::AnyOf(HasSubstr("unterminated"),
                                     HasSubstr("positional parameter"),
                                     HasSubstr("directly before a quote")))
            << sql.substr(0, n);
      }
    }
  }
}

// -------------------------------------------------- a real PostgreSQL --

using ::backfill::testing::PostgresTestServer;

struct PgResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, PgResultDeleter>;

// The one row a statement returned: its values and column names.
struct Row {
  std::vector<std::string> values;
  std::vector<std::string> columns;
};

// One database for the suite, on the ctest run's shared server (or a
// server of its own: starting one takes about two seconds).
class NamedParametersPostgresTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<PostgresTestServer>> started =
        PostgresTestServer::StartOrShare();
    if (!started.ok()) {
      start_error_ = new std::string(started.status().ToString());
      return;
    }
    server_ = started->release();
    conn_ = PQconnectdb(server_->Dsn().c_str());
    // Notices (an identifier truncated, say) are not this test's business.
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
  }
  static void TearDownTestSuite() {
    if (conn_ != nullptr) PQfinish(conn_);
    delete server_;
    delete start_error_;
    conn_ = nullptr;
    server_ = nullptr;
    start_error_ = nullptr;
  }
  void SetUp() override {
    ASSERT_EQ(start_error_, nullptr) << *start_error_;
    ASSERT_EQ(PQstatus(conn_), CONNECTION_OK)
        << PQerrorMessage(conn_) << server_->LogTail();
  }

  // Prepares p.text, expects PostgreSQL to count exactly p.names.size()
  // parameters, runs it with $i = values[i-1] and returns its one row.
  static std::optional<Row> PrepareAndRun(
      const PositionalSql& p, const std::vector<std::string>& values) {
    PgResult prepared(PQprepare(conn_, "", p.text.c_str(), 0, nullptr));
    if (PQresultStatus(prepared.get()) != PGRES_COMMAND_OK) {
      ADD_FAILURE() << "PostgreSQL cannot prepare " << p.text << ": "
                    << PQresultErrorMessage(prepared.get());
      return std::nullopt;
    }
    PgResult described(PQdescribePrepared(conn_, ""));
    EXPECT_EQ(PQresultStatus(described.get()), PGRES_COMMAND_OK)
        << PQresultErrorMessage(described.get());
    EXPECT_EQ(PQnparams(described.get()), static_cast<int>(p.names.size()))
        << p.text;
    std::vector<const char*> args;
    for (const std::string& v : values) args.push_back(v.c_str());
    PgResult ran(PQexecPrepared(conn_, "", static_cast<int>(args.size()),
                                args.data(), nullptr, nullptr, 0));
    if (PQresultStatus(ran.get()) != PGRES_TUPLES_OK ||
        PQntuples(ran.get()) != 1) {
      ADD_FAILURE() << "PostgreSQL cannot run " << p.text << ": "
                    << PQresultErrorMessage(ran.get());
      return std::nullopt;
    }
    Row row;
    for (int c = 0; c < PQnfields(ran.get()); ++c) {
      row.values.push_back(PQgetvalue(ran.get(), 0, c));
      row.columns.push_back(PQfname(ran.get(), c));
    }
    return row;
  }

  // Translates `sql` and runs it with each name bound to ValueOf(name).
  static std::optional<Row> Run(std::string_view sql) {
    absl::StatusOr<PositionalSql> p = ToPositional(sql);
    if (!p.ok()) {
      ADD_FAILURE() << p.status();
      return std::nullopt;
    }
    std::vector<std::string> values;
    for (const std::string& name : p->names) values.push_back(ValueOf(name));
    return PrepareAndRun(*p, values);
  }

  inline static PostgresTestServer* server_ = nullptr;
  inline static PGconn* conn_ = nullptr;
  inline static std::string* start_error_ = nullptr;
};

TEST_F(NamedParametersPostgresTest, ValuesBindInTheOrderOfTheNames) {
  absl::StatusOr<PositionalSql> p =
      ToPositional("SELECT :b::int - :a::int, :b::int");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->text, "SELECT $1::int - $2::int, $1::int");
  ASSERT_THAT(p->names, ElementsAre(":b", ":a"));
  std::optional<Row> row = PrepareAndRun(*p, {"5", "1"});
  ASSERT_TRUE(row.has_value());
  EXPECT_THAT(row->values, ElementsAre("4", "5"));
}

TEST_F(NamedParametersPostgresTest, APartitionCastToADate) {
  absl::StatusOr<PositionalSql> p = ToPositional(
      "SELECT (:partition::date + 1)::text, :partition_end::date - "
      ":partition::date");
  ASSERT_TRUE(p.ok()) << p.status();
  std::optional<Row> row = PrepareAndRun(*p, {"2025-01-31", "2025-02-03"});
  ASSERT_TRUE(row.has_value());
  EXPECT_THAT(row->values, ElementsAre("2025-02-01", "3"));
}

TEST_F(NamedParametersPostgresTest, LiteralsAndCommentsKeepTheirFakeOnes) {
  std::optional<Row> row =
      Run("SELECT 'it''s :x', E'it\\'s :x', E'\\\\' || :a::text, "
          "U&'\\0041 :x', $$ :x $1 $$, $t$ $$ :x $$ $t$, E'a'\n'\\' :x', "
          "/* /* :x */ :y */ :b::text AS \"a\"\":b\", --:x\n:c::text, "
          "(ARRAY[1,2,3])[2:3]::text, make_interval(days := 2)::text, "
          "'2025-01-31'::date::text, :größe::text, x$$y "
          "FROM (SELECT 1 AS x$$y) AS s");
  ASSERT_TRUE(row.has_value());
  EXPECT_THAT(row->values,
              ElementsAre("it's :x", "it's :x", "\\v:a", "A :x", " :x $1 ",
                          " $$ :x $$ ", "a' :x", "v:b", "v:c", "{2,3}",
                          "2 days", "2025-01-31", "v:größe", "1"));
  EXPECT_EQ(row->columns[7], "a\":b");
}

TEST_F(NamedParametersPostgresTest, WhatWeCallUnterminatedSoDoesPostgres) {
  for (const char* sql :
       {"SELECT 'abc", "SELECT 'it''s", "SELECT E'abc\\'", "SELECT e'a'\n'\\'",
        "SELECT \"abc", "SELECT $$ abc", "SELECT $a$ abc $A$", "SELECT /* abc",
        "SELECT /* /* */ abc", "SELECT /*/"}) {
    SCOPED_TRACE(sql);
    EXPECT_THAT(ErrorOf(sql), HasSubstr("unterminated"));
    PgResult prepared(PQprepare(conn_, "", sql, 0, nullptr));
    EXPECT_EQ(PQresultStatus(prepared.get()), PGRES_FATAL_ERROR);
    EXPECT_THAT(PQresultErrorMessage(prepared.get()),
                HasSubstr("unterminated"));
  }
}

TEST_F(NamedParametersPostgresTest, GeneratedStatementsMeanTheSameToPostgres) {
  StatementGenerator gen(20250601, /*for_postgres=*/true);
  for (int i = 0; i < 400; ++i) {
    const Statement st = gen.Next();
    const std::string sql = st.Sql();
    SCOPED_TRACE(absl::StrCat("#", i, ": ", sql));
    absl::StatusOr<PositionalSql> p = ToPositional(sql);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_THAT(p->names, ElementsAreArray(st.Names()));
    std::vector<std::string> values;
    for (const std::string& name : p->names) values.push_back(ValueOf(name));
    std::optional<Row> row = PrepareAndRun(*p, values);
    ASSERT_TRUE(row.has_value());
    ASSERT_EQ(row->values.size(), st.columns.size());
    for (size_t c = 0; c < st.columns.size(); ++c) {
      EXPECT_EQ(row->values[c], st.columns[c].value) << "column " << c;
      if (!st.columns[c].alias.empty()) {
        EXPECT_EQ(row->columns[c], st.columns[c].alias) << "column " << c;
      }
    }
  }
}

// The result says which quoting forms beyond standard strings the text
// used, wherever they stand, and not when the same bytes are inside
// another literal or a comment.
TEST(NamedParametersTest, ItSaysWhichQuotingFormsTheTextUses) {
  struct Case {
    std::string sql;
    bool dollar;
    bool escape;
  };
  for (const Case& c : std::vector<Case>{
           {"a = 'x'", false, false},
           {"a = $$x$$", true, false},
           {"a = $tag$x$tag$ AND b = 1", true, false},
           {"a = E'it\\'s'", false, true},
           {"a = e'x' OR b = $q$y$q$", true, true},
           {"a = '$$' AND b = 'E''x'", false, false},
           {"a = 1 -- $$ E'x'\n", false, false},
           {"a = 1 /* /* $$ */ E'x' */", false, false},
           {"a$$ = 1", false, false},  // '$' inside a word starts nothing
           {"type = 'e'", false, false},
       }) {
    SCOPED_TRACE(c.sql);
    absl::StatusOr<sql::PositionalSql> got = sql::ToPositional(c.sql);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->has_dollar_quote, c.dollar);
    EXPECT_EQ(got->has_escape_string, c.escape);
  }
}

}  // namespace
}  // namespace storage_sql_named_parameters_test
}  // namespace backfill::sql
