// Contract types on a real PostgreSQL server: the server's own names for
// the contract's types (aliases, type modifiers), a table's columns as the
// server reports them (quoted mixed-case names, dropped columns, missing
// tables and schemas, things that are not tables), the messages of a
// mismatch, and that normalizing a contract leaves nothing behind.

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/model/catalog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_contract.h"
#include "tests/testing/postgres_suite.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill::postgres {

void PrintTo(const PgColumn& column, std::ostream* os) {
  *os << "{\"" << column.name << "\" " << column.type << "}";
}

namespace storage_postgres_contract_test {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;

class PgContractTest : public backfill::testing::PostgresSuite {
 protected:
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    auto conn = PgConnection::Connect(server_->Dsn());
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = *std::move(conn);
    ASSERT_TRUE(conn_->Exec("DROP SCHEMA IF EXISTS wh CASCADE").ok());
    ASSERT_TRUE(conn_->Exec("CREATE SCHEMA wh").ok());
  }

  // The server's types for `types`, in order.
  std::vector<std::string> Normalized(const std::vector<std::string>& types) {
    std::vector<ColumnSpec> contract;
    for (size_t i = 0; i < types.size(); ++i) {
      contract.push_back({absl::StrCat("c", i), types[i]});
    }
    auto columns = NormalizeContract(conn_.get(), contract);
    EXPECT_TRUE(columns.ok()) << columns.status();
    std::vector<std::string> out;
    if (!columns.ok()) return out;
    for (const PgColumn& c : *columns) out.push_back(c.type);
    return out;
  }

  // TableColumns, expected to succeed.
  std::optional<std::vector<PgColumn>> Columns(const std::string& schema,
                                               const std::string& table) {
    auto columns = TableColumns(conn_.get(), schema, table);
    EXPECT_TRUE(columns.ok()) << columns.status();
    return columns.ok() ? *columns : std::nullopt;
  }

  // Nothing NormalizeContract made is left on its connection: no
  // transaction is open and no relation of its name exists.
  void ExpectNothingLeftBehind() {
    // SAVEPOINT outside a transaction block fails with 25P01.
    auto savepoint = conn_->Exec("SAVEPOINT probe");
    EXPECT_THAT(savepoint.status().message(), HasSubstr("SQLSTATE 25P01"))
        << "a transaction is still open";
    auto left = conn_->Exec(
        "SELECT count(*)::text FROM pg_class "
        "WHERE relname LIKE '%contract_probe%'");
    ASSERT_TRUE(left.ok()) << left.status();
    EXPECT_THAT(left->rows[0][0], Optional(std::string("0")));
    auto temp = conn_->Exec(
        "SELECT count(*)::text FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.oid = pg_my_temp_schema()");
    ASSERT_TRUE(temp.ok()) << temp.status();
    EXPECT_THAT(temp->rows[0][0], Optional(std::string("0")));
    // And the server does not see the connection inside a transaction.
    auto other = PgConnection::Connect(server_->Dsn());
    ASSERT_TRUE(other.ok()) << other.status();
    auto pid = conn_->Exec("SELECT pg_backend_pid()::text");
    ASSERT_TRUE(pid.ok()) << pid.status();
    auto state =
        (*other)->Exec("SELECT state FROM pg_stat_activity WHERE pid = $1::int",
                       {*pid->rows[0][0]});
    ASSERT_TRUE(state.ok()) << state.status();
    EXPECT_THAT(state->rows[0][0], Optional(std::string("idle")));
  }

  std::unique_ptr<PgConnection> conn_;
};

TEST_F(PgContractTest, AliasesBecomeTheServersOwnNames) {
  EXPECT_THAT(
      Normalized({"INT",    "int4",        "INTEGER",   "integer",
                  "BIGINT", "int8",        "SMALLINT",  "DOUBLE PRECISION",
                  "float8", "FLOAT",       "REAL",      "float4",
                  "TEXT",   "TIMESTAMPTZ", "TIMESTAMP", "BOOLEAN",
                  "bool",   "DATE",        "NUMERIC",   "DECIMAL",
                  "SERIAL", "JSONB"}),
      ElementsAreArray(std::vector<std::string>{
          "integer",
          "integer",
          "integer",
          "integer",
          "bigint",
          "bigint",
          "smallint",
          "double precision",
          "double precision",
          "double precision",
          "real",  // declared REAL: 4 bytes, not rewritten
          "real",
          "text",
          "timestamp with time zone",
          "timestamp without time zone",
          "boolean",
          "boolean",
          "date",
          "numeric",
          "numeric",
          "integer",
          "jsonb",
      }));
  ExpectNothingLeftBehind();  // SERIAL's sequence included
}

TEST_F(PgContractTest, TypeModifiersAreKept) {
  EXPECT_THAT(
      Normalized({"VARCHAR(32)", "varchar (32)", "CHARACTER VARYING(8)",
                  "VARCHAR", "CHAR(3)", "CHAR", "NUMERIC(10, 2)",
                  "decimal(10,2)", "NUMERIC(5)", "TIMESTAMP(3)",
                  "TIMESTAMPTZ(0)", "TIME(2)", "BIT(4)"}),
      ElementsAreArray(std::vector<std::string>{
          "character varying(32)", "character varying(32)",
          "character varying(8)", "character varying", "character(3)",
          "character(1)", "numeric(10,2)", "numeric(10,2)", "numeric(5,0)",
          "timestamp(3) without time zone", "timestamp(0) with time zone",
          "time(2) without time zone", "bit(4)"}));
  ExpectNothingLeftBehind();
}

TEST_F(PgContractTest, TableColumnsAreTheServersInTheirOrder) {
  ASSERT_TRUE(conn_
                  ->Exec("CREATE TABLE wh.t (ds TEXT, gone INT, "
                         "\"Revenue\" REAL, n VARCHAR(12))")
                  .ok());
  ASSERT_TRUE(conn_->Exec("ALTER TABLE wh.t DROP COLUMN gone").ok());
  ASSERT_TRUE(conn_->Exec("ALTER TABLE wh.t ADD COLUMN \"z z\" BIGINT").ok());
  auto columns = TableColumns(conn_.get(), "wh", "t");
  ASSERT_TRUE(columns.ok()) << columns.status();
  EXPECT_THAT(*columns,
              Optional(ElementsAre(PgColumn{"ds", "text", {}},
                                   PgColumn{"Revenue", "real", {}},
                                   PgColumn{"n", "character varying(12)", {}},
                                   PgColumn{"z z", "bigint", {}})));

  // Views and tables without columns are tables too.
  ASSERT_TRUE(
      conn_->Exec("CREATE VIEW wh.v AS SELECT ds, n::text AS n FROM wh.t")
          .ok());
  EXPECT_THAT(Columns("wh", "v"),
              Optional(ElementsAre(PgColumn{"ds", "text", {}},
                                   PgColumn{"n", "text", {}})));
  ASSERT_TRUE(conn_->Exec("CREATE TABLE wh.empty ()").ok());
  EXPECT_THAT(Columns("wh", "empty"), Optional(ElementsAre()));
  // Without a schema: by the search_path.
  ASSERT_TRUE(conn_->Exec("CREATE TABLE public.pub (x INT)").ok());
  EXPECT_THAT(Columns("", "pub"),
              Optional(ElementsAre(PgColumn{"x", "integer", {}})));
  ASSERT_TRUE(conn_->Exec("DROP TABLE public.pub").ok());

  // An index is not a table.
  ASSERT_TRUE(conn_->Exec("CREATE INDEX t_ds ON wh.t (ds)").ok());
  auto index = TableColumns(conn_.get(), "wh", "t_ds");
  EXPECT_EQ(index.status().code(), absl::StatusCode::kFailedPrecondition)
      << index.status();
  EXPECT_THAT(index.status().message(), HasSubstr("\"wh\".\"t_ds\""));
}

// A column's collation is read with it: the partition membership of a TEXT
// column compares bytes, and only a byte-ordered collation lets an index
// serve that.
TEST_F(PgContractTest, TableColumnsReadTheirCollation) {
  ASSERT_TRUE(conn_
                  ->Exec("CREATE TABLE wh.c (d TEXT, c TEXT COLLATE \"C\", "
                         "p VARCHAR(10) COLLATE \"POSIX\", n INTEGER)")
                  .ok());
  auto columns = TableColumns(conn_.get(), "wh", "c");
  ASSERT_TRUE(columns.ok()) << columns.status();
  ASSERT_TRUE(columns->has_value());
  std::vector<std::string> collations;
  for (const PgColumn& c : **columns) collations.push_back(c.collation);
  EXPECT_THAT(collations, ElementsAre("default", "C", "POSIX", ""));

  // The contract's definitions put the named column in byte order.
  auto definitions = ContractColumnDefinitions(
      conn_.get(), {{"ds", "TEXT"}, {"n", "BIGINT"}}, "ds");
  ASSERT_TRUE(definitions.ok()) << definitions.status();
  EXPECT_EQ(*definitions, "\"ds\" TEXT COLLATE \"C\", \"n\" BIGINT");
}

TEST_F(PgContractTest, ATableThatDoesNotExistIsNullopt) {
  ASSERT_TRUE(conn_->Exec("CREATE TABLE wh.t (x INT)").ok());
  for (const auto& [schema, table] :
       std::vector<std::pair<std::string, std::string>>{
           {"wh", "missing"},
           {"no_such_schema", "t"},
           {"wh", "T"},  // quoted: not t
           {"wh", "t\"; DROP TABLE wh.t; --"},
           {"wh", "x'); DROP TABLE wh.t; --"},
       }) {
    SCOPED_TRACE(table);
    auto columns = TableColumns(conn_.get(), schema, table);
    ASSERT_TRUE(columns.ok()) << columns.status();
    EXPECT_EQ(*columns, std::nullopt);
  }
  EXPECT_THAT(Columns("wh", "t"),
              Optional(ElementsAre(PgColumn{"x", "integer", {}})));  // survived
  absl::Status check =
      CheckTableContract(conn_.get(), "wh", "missing", {{"x", "INT"}});
  EXPECT_EQ(check.code(), absl::StatusCode::kNotFound) << check;
  EXPECT_THAT(check.message(), HasSubstr("\"wh\".\"missing\""));
}

TEST_F(PgContractTest, ATableMadeFromItsContractMatchesIt) {
  const std::vector<ColumnSpec> contract = {{"ds", "TEXT"},
                                            {"Region", "varchar(32)"},
                                            {"revenue", "DOUBLE PRECISION"},
                                            {"orders", "INT"},
                                            {"select", "int8"},
                                            {"at", "TIMESTAMPTZ"},
                                            {"amount", "NUMERIC(12, 2)"}};
  auto definitions = ContractColumnDefinitions(conn_.get(), contract);
  ASSERT_TRUE(definitions.ok()) << definitions.status();
  // Every name quoted, every type as declared.
  EXPECT_EQ(*definitions,
            "\"ds\" TEXT, \"Region\" varchar(32), \"revenue\" DOUBLE "
            "PRECISION, \"orders\" INT, \"select\" int8, \"at\" TIMESTAMPTZ, "
            "\"amount\" NUMERIC(12, 2)");
  ASSERT_TRUE(
      conn_->Exec(absl::StrCat("CREATE TABLE wh.daily (", *definitions, ")"))
          .ok());
  EXPECT_TRUE(CheckTableContract(conn_.get(), "wh", "daily", contract).ok());

  // Column order does not matter; spelling does not either.
  ASSERT_TRUE(conn_
                  ->Exec("CREATE TABLE wh.reordered (amount numeric(12,2), "
                         "at timestamp with time zone, \"select\" bigint, "
                         "orders integer, revenue float8, "
                         "\"Region\" character varying(32), ds text)")
                  .ok());
  absl::Status reordered =
      CheckTableContract(conn_.get(), "wh", "reordered", contract);
  EXPECT_TRUE(reordered.ok()) << reordered;

  // A contract that declares REAL gets real, and matches a real column.
  ASSERT_TRUE(conn_->Exec("CREATE TABLE wh.floats (v real)").ok());
  EXPECT_TRUE(
      CheckTableContract(conn_.get(), "wh", "floats", {{"v", "REAL"}}).ok());
  // Which is why the header tells people to declare DOUBLE PRECISION.
  ASSERT_TRUE(conn_->Exec("INSERT INTO wh.floats VALUES (16777217)").ok());
  auto read = conn_->Exec("SELECT v::bigint::text FROM wh.floats");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(read->rows[0][0], Optional(std::string("16777216")));
}

TEST_F(PgContractTest, MismatchesNameTheTableTheColumnAndBothTypes) {
  ASSERT_TRUE(conn_
                  ->Exec("CREATE TABLE wh.daily (ds text, "
                         "region varchar(16), revenue real, orders integer, "
                         "note text)")
                  .ok());
  const std::vector<ColumnSpec> contract = {{"ds", "TEXT"},
                                            {"region", "VARCHAR(32)"},
                                            {"revenue", "DOUBLE PRECISION"},
                                            {"orders", "INT"},
                                            {"day", "DATE"}};
  absl::Status s = CheckTableContract(conn_.get(), "wh", "daily", contract);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(
      s.message(),
      AllOf(HasSubstr("table \"wh\".\"daily\" does not match its contract"),
            HasSubstr("column \"region\" is character varying(16) in the "
                      "table, but the contract declares \"VARCHAR(32)\" "
                      "(PostgreSQL: character varying(32))"),
            HasSubstr("column \"revenue\" is real in the table, but the "
                      "contract declares \"DOUBLE PRECISION\""),
            HasSubstr("column \"day\" is missing (the contract declares "
                      "\"DATE\")"),
            HasSubstr("column \"note\" (text) is in the table but not in "
                      "the contract"),
            HasSubstr("declare DOUBLE PRECISION"),
            Not(HasSubstr("\"orders\"")),  // INT is integer: no complaint
            Not(HasSubstr("\"ds\""))));

  // The other way round: a contract that declares REAL against an 8-byte
  // column is a mismatch as well (nothing is rewritten), with the advice.
  ASSERT_TRUE(conn_->Exec("CREATE TABLE wh.m (v double precision)").ok());
  absl::Status real =
      CheckTableContract(conn_.get(), "wh", "m", {{"v", "REAL"}});
  EXPECT_EQ(real.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(real.message(),
              AllOf(HasSubstr("column \"v\" is double precision in the "
                              "table, but the contract declares \"REAL\""),
                    HasSubstr("REAL is PostgreSQL's 4-byte float")));
  // No REAL involved, no advice.
  absl::Status other =
      CheckTableContract(conn_.get(), "wh", "m", {{"v", "BIGINT"}});
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.message(), Not(HasSubstr("4-byte")));
  ExpectNothingLeftBehind();
}

TEST_F(PgContractTest, QuotedNamesAreCaseSensitiveAndSaidSo) {
  // Created without quotes: PostgreSQL folds the names to lower case.
  ASSERT_TRUE(
      conn_->Exec("CREATE TABLE wh.folded (Revenue float8, orderCount int)")
          .ok());
  const std::vector<ColumnSpec> contract = {{"Revenue", "DOUBLE PRECISION"},
                                            {"orderCount", "INTEGER"}};
  absl::Status s = CheckTableContract(conn_.get(), "wh", "folded", contract);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      s.message(),
      AllOf(HasSubstr("column \"Revenue\" (\"DOUBLE PRECISION\") is "
                      "missing, but the table has \"revenue\" "
                      "(double precision)"),
            HasSubstr("column \"orderCount\""),
            HasSubstr("\"ordercount\" (integer)"), HasSubstr("case-sensitive"),
            // Each explained once, not again as an extra column.
            Not(HasSubstr("not in the contract"))));

  // Created from the contract: quoted, exact.
  auto definitions = ContractColumnDefinitions(conn_.get(), contract);
  ASSERT_TRUE(definitions.ok()) << definitions.status();
  ASSERT_TRUE(
      conn_
          ->Exec(absl::StrCat("CREATE TABLE wh.\"Mixed\" (", *definitions, ")"))
          .ok());
  EXPECT_THAT(Columns("wh", "Mixed"),
              Optional(ElementsAre(PgColumn{"Revenue", "double precision", {}},
                                   PgColumn{"orderCount", "integer", {}})));
  EXPECT_TRUE(CheckTableContract(conn_.get(), "wh", "Mixed", contract).ok());
  EXPECT_EQ(CheckTableContract(conn_.get(), "wh", "mixed", contract).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(PgContractTest, TypesTheServerRefusesNameTheColumn) {
  auto blob = NormalizeContract(conn_.get(), {{"a", "TEXT"}, {"b", "BLOB"}});
  EXPECT_EQ(blob.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      blob.status().message(),
      AllOf(HasSubstr("PostgreSQL refuses contract column \"b\" (BLOB)"),
            HasSubstr("type \"blob\" does not exist")));
  ExpectNothingLeftBehind();

  auto zero =
      NormalizeContract(conn_.get(), {{"a", "INT"}, {"v", "VARCHAR(0)"}});
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zero.status().message(),
              HasSubstr("contract column \"v\" (VARCHAR(0))"));
  ExpectNothingLeftBehind();

  // A name SQLite allows but PostgreSQL keeps for a system column.
  auto system = NormalizeContract(conn_.get(), {{"xmin", "INT"}});
  EXPECT_EQ(system.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(system.status().message(),
              AllOf(HasSubstr("contract column \"xmin\" (INT)"),
                    HasSubstr("system column")));
  ExpectNothingLeftBehind();

  // Two columns of one name: no column alone is at fault.
  auto twice = NormalizeContract(conn_.get(), {{"a", "INT"}, {"a", "TEXT"}});
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.status().message(),
              AllOf(HasSubstr("the contract's columns do not make a table"),
                    HasSubstr("specified more than once")));
  ExpectNothingLeftBehind();
}

TEST_F(PgContractTest, TypesAreCheckedBeforeTheyReachTheServer) {
  ASSERT_TRUE(conn_->Exec("CREATE TABLE wh.t (x INT)").ok());
  for (const std::string type :
       {"INT NOT NULL", "INT PRIMARY KEY", "INT); DROP TABLE wh.t; --",
        "INT DEFAULT 1", "", "INT[]", "a b c"}) {
    SCOPED_TRACE(type);
    auto columns = NormalizeContract(conn_.get(), {{"x", type}});
    EXPECT_EQ(columns.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(columns.status().message(),
                HasSubstr("contract column \"x\" has type"));
    EXPECT_EQ(
        ContractColumnDefinitions(conn_.get(), {{"x", type}}).status().code(),
        absl::StatusCode::kInvalidArgument);
  }
  EXPECT_THAT(Columns("wh", "t"),
              Optional(ElementsAre(PgColumn{"x", "integer", {}})));  // survived
  ExpectNothingLeftBehind();
}

TEST_F(PgContractTest, NormalizingLeavesNothingBehind) {
  auto columns = NormalizeContract(
      conn_.get(), {{"id", "SERIAL"}, {"Name", "TEXT"}, {"v", "REAL"}});
  ASSERT_TRUE(columns.ok()) << columns.status();
  EXPECT_THAT(*columns, ElementsAre(PgColumn{"id", "integer", {}},
                                    PgColumn{"Name", "text", {}},
                                    PgColumn{"v", "real", {}}));
  ExpectNothingLeftBehind();
  // Again on the same connection: nothing of the first one is in the way.
  auto again = NormalizeContract(conn_.get(), {{"id", "BIGINT"}});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(*again, ElementsAre(PgColumn{"id", "bigint", {}}));
  // An empty contract makes a table without columns.
  auto none = NormalizeContract(conn_.get(), {});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  ExpectNothingLeftBehind();
}

TEST_F(PgContractTest, CompareNeedsTheNormalizedContractOfTheSameColumns) {
  EXPECT_EQ(CompareWithContract("t", {{"a", "INT"}}, {}, {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CompareWithContract("t", {{"a", "INT"}}, {{"a", "integer", {}}},
                                  {{"a", "integer", {}}})
                  .ok());
}

}  // namespace
}  // namespace storage_postgres_contract_test
}  // namespace backfill::postgres
