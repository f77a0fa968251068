// The transform SQL scanner (ScanSql), the canonical form of a transform
// (CanonicalTransform) and its version (TransformVersion).

#include <string>

#include "absl/status/status.h"
#include "core/model/transform_parameters.h"
#include "core/model/transform_sql.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_transform_sql_test {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TEST(ScanSqlTest, NormalizesWhitespaceAndDropsComments) {
  const SqlScan scan =
      ScanSql("  SELECT a,\n\t b -- note\n FROM /* x */ t  \n");
  EXPECT_TRUE(scan.error.empty());
  EXPECT_EQ(scan.normalized, "SELECT a, b FROM t");
  EXPECT_EQ(scan.skeleton, "SELECT a, b FROM t");
  EXPECT_FALSE(scan.first_semicolon.has_value());
  EXPECT_FALSE(scan.text_after_semicolon);
}

TEST(ScanSqlTest, KeepsLiteralsVerbatimAndOutOfTheSkeleton) {
  const SqlScan scan =
      ScanSql("SELECT 'a  -- b', \"c;d\", `e`, [f g] FROM t WHERE s = 'it''s'");
  EXPECT_TRUE(scan.error.empty());
  EXPECT_EQ(scan.normalized,
            "SELECT 'a  -- b', \"c;d\", `e`, [f g] FROM t WHERE s = 'it''s'");
  EXPECT_EQ(scan.skeleton, "SELECT '', \"\", ``, [] FROM t WHERE s = ''");
  EXPECT_FALSE(scan.first_semicolon.has_value());
}

TEST(ScanSqlTest, FindsTheStatementEndAndTextAfterASemicolon) {
  const std::string sql = "SELECT 1 /* c */ ; -- done\n";
  SqlScan scan = ScanSql(sql);
  ASSERT_TRUE(scan.first_semicolon.has_value());
  EXPECT_EQ(*scan.first_semicolon, sql.find(';'));
  EXPECT_EQ(scan.statement_end, std::string("SELECT 1").size());
  EXPECT_EQ(scan.significant_end, sql.find(';') + 1);
  EXPECT_FALSE(scan.text_after_semicolon);

  scan = ScanSql("SELECT 1;; SELECT 2");
  EXPECT_TRUE(scan.text_after_semicolon);
  EXPECT_EQ(scan.statement_end, std::string("SELECT 1").size());
}

TEST(ScanSqlTest, ReportsWhatIsUnterminated) {
  EXPECT_EQ(ScanSql("SELECT 'open").error, "unterminated string literal");
  EXPECT_EQ(ScanSql("SELECT \"open").error, "unterminated quoted identifier");
  EXPECT_EQ(ScanSql("SELECT [open").error, "unterminated quoted identifier");
  EXPECT_EQ(ScanSql("SELECT 1 /* open").error, "unterminated /* comment");
  // A line comment ends with the text.
  EXPECT_TRUE(ScanSql("SELECT 1 -- open").error.empty());
}

TEST(CanonicalTransformTest, AcceptsAndTrims) {
  EXPECT_EQ(*CanonicalTransform("  SELECT 1  \n"), "SELECT 1");
  EXPECT_EQ(*CanonicalTransform("select 1;\n"), "select 1");
  EXPECT_EQ(*CanonicalTransform("SELECT 1; -- done\n"), "SELECT 1");
  EXPECT_EQ(*CanonicalTransform("SELECT 1 -- trailing note"), "SELECT 1");
  EXPECT_EQ(
      *CanonicalTransform("-- lead\nWITH t AS (SELECT 1) SELECT * FROM t"),
      "-- lead\nWITH t AS (SELECT 1) SELECT * FROM t");
  // Semicolons, comment markers and parameters inside literals are text.
  EXPECT_TRUE(CanonicalTransform("SELECT 'a; DROP TABLE x' AS s").ok());
  EXPECT_TRUE(CanonicalTransform("SELECT '--' || ':nope' AS s").ok());
  EXPECT_TRUE(CanonicalTransform("SELECT \"a;b\" FROM t").ok());
  EXPECT_TRUE(CanonicalTransform("SELECT 'it''s' AS s").ok());
  EXPECT_TRUE(
      CanonicalTransform("SELECT x::int FROM t WHERE d >= :partition_start "
                         "AND d < :partition_end AND p = :partition")
          .ok());
}

// Comments between the statement and its ';' go as those after it do, so
// that the result is its own canonical form (found by fuzzing: the text
// before the ';' kept them, and canonicalising again dropped them).
TEST(CanonicalTransformTest, DropsCommentsBeforeTheSemicolon) {
  EXPECT_EQ(*CanonicalTransform("SELECT 1 -- note\n;\n-- after"), "SELECT 1");
  EXPECT_EQ(*CanonicalTransform("SELECT 1 /* a */ ; /* b */"), "SELECT 1");
  EXPECT_EQ(*CanonicalTransform("/* lead */ SELECT 'x;' AS \"a;b\" -- c\n;"),
            "/* lead */ SELECT 'x;' AS \"a;b\"");
  for (const char* sql : {"SELECT 1 -- note\n;", "SELECT 1 /* a */ ;",
                          "-- lead\nSELECT 2 -- n\n; -- m"}) {
    absl::StatusOr<std::string> once = CanonicalTransform(sql);
    ASSERT_TRUE(once.ok()) << sql;
    absl::StatusOr<std::string> twice = CanonicalTransform(*once);
    ASSERT_TRUE(twice.ok()) << sql;
    EXPECT_EQ(*twice, *once) << sql;
  }
}

TEST(CanonicalTransformTest, Rejects) {
  EXPECT_FALSE(CanonicalTransform("").ok());
  EXPECT_FALSE(CanonicalTransform("-- only a comment").ok());
  EXPECT_FALSE(CanonicalTransform("SELECT 1; SELECT 2").ok());
  EXPECT_FALSE(CanonicalTransform("SELECT 1;\n-- x\nDELETE FROM t").ok());
  EXPECT_FALSE(CanonicalTransform("INSERT INTO t SELECT 1").ok());
  EXPECT_FALSE(CanonicalTransform("SELECTED 1").ok());
  EXPECT_FALSE(CanonicalTransform("SELECT 'unterminated").ok());
  EXPECT_FALSE(CanonicalTransform("SELECT 1 /* open").ok());
  EXPECT_FALSE(CanonicalTransform("SELECT :partition_date").ok());
}

TEST(CanonicalTransformTest, RejectsPositionalAndOtherParameterForms) {
  for (const char* sql : {
           "SELECT ds FROM t WHERE ds = ?",
           "SELECT ds FROM t WHERE ds = ?1",
           "SELECT ds FROM t WHERE ds=?12 AND 1",
           "SELECT ds FROM t WHERE ds = @day",
           "SELECT ds FROM t WHERE ds = $day",
           "SELECT ds FROM t WHERE ds = #day",
           "SELECT ds FROM t WHERE ds=$day",
           "SELECT ds FROM t WHERE ds IN ($a)",
           "SELECT \"ds\"$x FROM t",
           "SELECT ds /* c */$x FROM t",
           "SELECT a@b FROM t",
       }) {
    SCOPED_TRACE(sql);
    absl::StatusOr<std::string> out = CanonicalTransform(sql);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(), HasSubstr("uses the parameter "));
    EXPECT_THAT(out.status().message(),
                HasSubstr("only :partition_start, :partition_end and "
                          ":partition are bound"));
  }
  EXPECT_THAT(CanonicalTransform("SELECT * FROM t WHERE a = ?7 OR b = 1")
                  .status()
                  .message(),
              HasSubstr("the parameter ?7;"));
  EXPECT_THAT(CanonicalTransform("SELECT * FROM t WHERE a = $day_1 + 1")
                  .status()
                  .message(),
              HasSubstr("the parameter $day_1;"));
  EXPECT_THAT(
      CanonicalTransform("SELECT * FROM t WHERE a = @x").status().message(),
      HasSubstr("the parameter @x;"));
}

TEST(CanonicalTransformTest, ParameterCharactersThatAreNotParameters) {
  for (const char* sql : {
           // '$' inside an identifier is part of it.
           "SELECT a$b, a$$, x1$ FROM t WHERE ds >= :partition_start",
           // Inside literals, quoted identifiers and comments: text.
           "SELECT '?', '@x', '$x', '#x', ':x' FROM t",
           "SELECT \"a?b\", \"$x\", `@y`, [#z], [?1] FROM t",
           "SELECT `a``?` FROM t",
           "SELECT 1 -- where ds = ?\nFROM t",
           "SELECT 1 /* $x @y ?1 */ FROM t",
           // A cast is not a parameter.
           "SELECT x::int FROM t WHERE d >= :partition_start",
       }) {
    SCOPED_TRACE(sql);
    absl::StatusOr<std::string> out = CanonicalTransform(sql);
    EXPECT_TRUE(out.ok()) << out.status();
  }
  EXPECT_FALSE(CanonicalTransform("SELECT [a FROM t").ok());
  EXPECT_FALSE(CanonicalTransform("SELECT `a FROM t").ok());
}

TEST(TransformVersionTest, StableAcrossReformatting) {
  const std::string v = TransformVersion(
      "SELECT a, SUM(b) AS s FROM t WHERE d >= :partition_start GROUP BY a");
  EXPECT_THAT(v, MatchesRegex("[0-9a-f]{16}"));
  EXPECT_EQ(v, TransformVersion("  SELECT a,  SUM(b) AS s\n"
                                "  FROM t   -- the table\n"
                                "\tWHERE d >= :partition_start\n"
                                "  GROUP BY a\n"));
  EXPECT_EQ(v, TransformVersion("SELECT a, SUM(b) AS s FROM t WHERE d >= "
                                ":partition_start GROUP BY a;\n"));
  EXPECT_EQ(v, TransformVersion("-- header comment\nSELECT a, SUM(b) AS s "
                                "FROM t WHERE d >= :partition_start GROUP BY "
                                "a"));
}

TEST(TransformVersionTest, ChangesWithContent) {
  const std::string v = TransformVersion("SELECT a - b AS x FROM t");
  EXPECT_NE(v, TransformVersion("SELECT a + b AS x FROM t"));
  EXPECT_NE(v, TransformVersion("SELECT a - b AS y FROM t"));
  // Whitespace inside a literal is content.
  EXPECT_NE(TransformVersion("SELECT 'a  b'"),
            TransformVersion("SELECT 'a b'"));
  // A "--" inside a literal is not a comment.
  EXPECT_NE(TransformVersion("SELECT '--x' AS s"),
            TransformVersion("SELECT '--y' AS s"));
}

TEST(CanonicalTransformTest, AcceptsTheParametersTheDatasetAllows) {
  ExtraParameters extra;
  extra.window_start = true;
  EXPECT_TRUE(
      CanonicalTransform("SELECT ds FROM t WHERE ds >= :window_start", extra)
          .ok());
  EXPECT_THAT(CanonicalTransform("SELECT ds FROM t WHERE ds >= :window_start")
                  .status()
                  .message(),
              HasSubstr(":window_start"));
}

}  // namespace
}  // namespace core_transform_sql_test
}  // namespace backfill
