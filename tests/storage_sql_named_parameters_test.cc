// Named parameters to positional ones (storage/sql/named_parameters.h): each
// lexing rule with hand-written cases.

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
#include "tests/testing/sql_statement_generator.h"

namespace backfill::sql {
namespace storage_sql_named_parameters_test {
namespace {

using namespace ::backfill::sql::statement_testing;  // NOLINT: generator
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
