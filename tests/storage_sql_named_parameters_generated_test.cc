// Named parameters to positional ones (storage/sql/named_parameters.h) over
// generated statements whose parameters are known by construction
// (tests/testing/sql_statement_generator.h): a property test, and the same
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
#include "tests/testing/sql_statement_generator.h"

namespace backfill::sql {
namespace storage_sql_named_parameters_generated_test {
namespace {

using namespace ::backfill::sql::statement_testing;  // NOLINT: generator
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace storage_sql_named_parameters_generated_test
}  // namespace backfill::sql
