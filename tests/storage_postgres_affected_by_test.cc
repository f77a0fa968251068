// PostgresEngine::PartitionsMatching on a real PostgreSQL server: what only
// PostgreSQL has to refuse in a client's predicate (the portable cases are
// in storage_engine_conformance_affected_by_test.cc). Functions are decided
// by an allow-list: built-ins that run queries of their own, sleep, read
// files, take locks, write (nextval) or make values of a size the call
// chooses, functions and operators that are not built in (whatever they
// read, and whatever their name), and reads of the catalog, of the
// service's own schema or of another table through a view are refused
// before the predicate runs; what planning would fold (repeat() on
// constants) is refused before anything is sent. Each is INVALID_ARGUMENT,
// and plain SQL on a connection of the test's own shows that nothing
// changed.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/model/catalog.h"
#include "core/model/partition.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_engine.h"
#include "tests/testing/postgres_suite.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill::postgres {
namespace storage_postgres_affected_by_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class PgAffectedByTest : public backfill::testing::PostgresSuite {
 protected:
  // Each test gets a database of its own, with a small orders table and a
  // table the predicates may not read.
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    static int next = 0;
    database_ = absl::StrCat(server_->database(), "_affected_by_", ++next);
    auto admin = PgConnection::Connect(server_->Dsn());
    ASSERT_TRUE(admin.ok()) << admin.status();
    ASSERT_TRUE((*admin)
                    ->Exec(absl::StrCat("DROP DATABASE IF EXISTS ", database_))
                    .ok());
    ASSERT_TRUE((*admin)
                    ->Exec(absl::StrCat("CREATE DATABASE ", database_,
                                        " TEMPLATE template0 ENCODING 'UTF8' "
                                        "LC_COLLATE 'C' LC_CTYPE 'C'"))
                    .ok());
    auto conn = PgConnection::Connect(server_->Dsn(database_));
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = *std::move(conn);
    ASSERT_TRUE(conn_
                    ->ExecScript(
                        "CREATE TABLE orders (id INTEGER PRIMARY KEY, ts TEXT, "
                        "region TEXT, amount DOUBLE PRECISION);"
                        "INSERT INTO orders SELECT i, '2025-01-0' || (1 + i % "
                        "5), CASE WHEN i % 2 = 0 THEN 'EU' ELSE 'US' END, i "
                        "FROM generate_series(1, 50) AS i;"
                        "CREATE TABLE dim_customers (customer_id INTEGER "
                        "PRIMARY KEY, region TEXT);"
                        "INSERT INTO dim_customers VALUES (1, 'EU');"
                        "CREATE SEQUENCE order_ids;")
                    .ok());
    auto engine = PostgresEngine::Open(server_->Dsn(database_), 2);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);

    orders_.name = "orders";
    orders_.kind = DatasetKind::kSource;
    orders_.table = "orders";
    orders_.partition = PartitionSpec{"ts", Grain::kDay, {}};
  }

  void TearDown() override {
    engine_.reset();
    conn_.reset();
  }

  // The first column of each row of `sql`, read on the test's connection.
  std::vector<std::string> Strings(const std::string& sql) {
    auto r = conn_->Exec(sql);
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<std::string> out;
    if (!r.ok()) return out;
    for (const auto& row : r->rows) out.push_back(row[0].value_or("NULL"));
    return out;
  }

  // Every row of the fixture's tables and the sequence's state.
  std::vector<std::string> Dump() {
    std::vector<std::string> out = Strings(
        "SELECT id || '|' || ts || '|' || region || '|' || amount FROM orders "
        "ORDER BY id");
    for (const std::string& s :
         Strings("SELECT customer_id || '|' || region FROM dim_customers "
                 "ORDER BY 1")) {
      out.push_back(s);
    }
    for (const std::string& s :
         Strings("SELECT last_value || '|' || is_called FROM order_ids")) {
      out.push_back(s);
    }
    return out;
  }

  // `predicate` is refused, in words that contain `why`.
  void ExpectRefused(const std::string& predicate, const std::string& why) {
    SCOPED_TRACE(predicate);
    auto got = engine_->PartitionsMatching(orders_, predicate, 100);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
        << got.status();
    EXPECT_THAT(got.status().message(),
                HasSubstr(absl::StrCat("\"", predicate, "\" is refused: it")));
    EXPECT_THAT(got.status().message(), HasSubstr(why));
  }

  std::string database_;
  std::unique_ptr<PgConnection> conn_;
  std::unique_ptr<PostgresEngine> engine_;
  DatasetSpec orders_;
};

TEST_F(PgAffectedByTest, BuiltInsThatReadMoreThanTheirArgumentsAreRefused) {
  const std::vector<std::string> before = Dump();
  const absl::Time start = absl::Now();
  ExpectRefused("query_to_xml('select 1', true, true, '')::text <> ''",
                "calls function query_to_xml");
  ExpectRefused(
      "length(query_to_xml('select count(*) from dim_customers', true, "
      "true, '')::text) > 0",
      "calls function query_to_xml");
  ExpectRefused("pg_sleep(30) IS NULL", "calls function pg_sleep");
  ExpectRefused("\"pg_sleep\"(30) IS NULL", "calls function pg_sleep");
  // pg_sleep_for is an SQL function over pg_sleep: the plan calls that.
  ExpectRefused("pg_catalog.PG_SLEEP_FOR('30 seconds') IS NULL",
                "calls function pg_sleep");
  ExpectRefused("pg_read_file('PG_VERSION') <> ''",
                "calls function pg_read_file");
  ExpectRefused("pg_try_advisory_lock(id)", "calls function pg_try_advisory");
  ExpectRefused(
      "set_config('default_transaction_read_only', 'off', false) "
      "= 'off'",
      "calls function set_config");
  // Nothing slept: the predicates were refused from their plan alone.
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  // This database's: the server may be shared with other tests.
  EXPECT_THAT(Strings("SELECT count(*) FROM pg_locks WHERE locktype = "
                      "'advisory' AND database = (SELECT oid FROM "
                      "pg_database WHERE datname = current_database())"),
              ElementsAre("0"));
  EXPECT_EQ(Dump(), before);
}

TEST_F(PgAffectedByTest, FunctionsThatAreNotBuiltInAreRefused) {
  ASSERT_TRUE(
      conn_
          ->ExecScript("CREATE FUNCTION customer_count() RETURNS bigint "
                       "LANGUAGE sql STABLE AS 'SELECT count(*) FROM "
                       "dim_customers';"
                       "CREATE FUNCTION twice(double precision) RETURNS double "
                       "precision LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN "
                       "$1 * 2; END';"
                       "CREATE FUNCTION \"Mixed Case\"(integer) RETURNS "
                       "boolean LANGUAGE sql STABLE AS 'SELECT EXISTS (SELECT "
                       "1 FROM dim_customers WHERE customer_id = $1)';")
          .ok());
  const std::vector<std::string> before = Dump();
  // Reading another table inside a function, whatever its name's case.
  ExpectRefused("customer_count() > 0",
                "calls function customer_count, which is not on the "
                "allow-list");
  ExpectRefused("\"Mixed Case\"(id)",
                "calls function Mixed Case, which is not on the allow-list");
  // Reading nothing but its argument: still not a built-in.
  ExpectRefused("twice(amount) > 50", "calls function twice");
  EXPECT_EQ(Dump(), before);
  // The same predicates without them work.
  auto fine = engine_->PartitionsMatching(orders_, "amount * 2 > 98", 100);
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(*fine, Strings("SELECT DISTINCT ts FROM orders WHERE amount * 2 > "
                           "98 ORDER BY 1"));
}

TEST_F(PgAffectedByTest,
       FunctionsOffTheAllowListAreRefusedBeforeAnythingIsSent) {
  const std::vector<std::string> before = Dump();
  const absl::Time start = absl::Now();
  // Planning would fold these on their constants, even for EXPLAIN.
  ExpectRefused("region = repeat('x', 500000000)", "calls function repeat");
  ExpectRefused("length(lpad('x', 500000000)) > 0", "calls function lpad");
  ExpectRefused("format('%500000000s', 'x') <> ''", "calls function format");
  ExpectRefused("region = replace(replace('a', 'a', 'aaaa'), 'a', 'aaaa')",
                "calls function replace");
  // What the server would tell about itself.
  ExpectRefused("current_setting('data_directory') <> ''",
                "calls function current_setting");
  ExpectRefused("version() <> ''", "calls function version");
  ExpectRefused("pg_catalog.inet_server_addr() IS NULL",
                "calls function inet_server_addr");
  ExpectRefused("id IN (SELECT generate_series(1, 100000000))",
                "calls function generate_series");
  ExpectRefused("\"lower\"(region) = 'eu' AND \"PG_SLEEP\"(30) IS NULL",
                "calls function PG_SLEEP");
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(Dump(), before);
  // Functions of the list, and keywords before a parenthesis, work.
  auto fine = engine_->PartitionsMatching(
      orders_,
      "lower(region) IN ('eu', 'us') AND (amount > 40) AND "
      "coalesce(abs(amount), 0) > 40 AND date_trunc('day', now()) IS NOT "
      "NULL AND CAST(amount AS numeric(10, 2)) > 40",
      100);
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(*fine, Strings("SELECT DISTINCT ts FROM orders WHERE "
                           "lower(region) IN ('eu', 'us') AND amount > 40 "
                           "ORDER BY 1"));
}

TEST_F(PgAffectedByTest, OperatorsAndFunctionsOfTheDatabaseAreRefused) {
  ASSERT_TRUE(
      conn_
          ->ExecScript(
              "CREATE FUNCTION peek(double precision, double precision) "
              "RETURNS boolean LANGUAGE plpgsql STABLE AS 'BEGIN RETURN "
              "EXISTS (SELECT 1 FROM dim_customers); END';"
              "CREATE OPERATOR === (LEFTARG = double precision, RIGHTARG = "
              "double precision, FUNCTION = peek);"
              "CREATE FUNCTION lower(integer) RETURNS text LANGUAGE plpgsql "
              "STABLE AS 'BEGIN RETURN (SELECT max(region) FROM "
              "dim_customers); END';")
          .ok());
  const std::vector<std::string> before = Dump();
  ExpectRefused("amount === 1", "uses operator ===, which is not built into");
  // Named like a built-in of the list: the database's own is refused.
  ExpectRefused("lower(id) IS NOT NULL",
                "calls function lower, which is not built into");
  EXPECT_EQ(Dump(), before);
}

TEST_F(PgAffectedByTest, OtherRelationsAreRefusedWhereverTheyHide) {
  ASSERT_TRUE(conn_
                  ->ExecScript("CREATE VIEW eu_customers AS SELECT * FROM "
                               "dim_customers WHERE region = 'EU';"
                               "CREATE VIEW big_orders AS SELECT * FROM "
                               "orders WHERE amount > 40;")
                  .ok());
  const std::vector<std::string> before = Dump();
  ExpectRefused("region IN (SELECT region FROM eu_customers)",
                "reads table public.dim_customers");
  ExpectRefused("(SELECT count(*) FROM pg_catalog.pg_class) > 0",
                "reads table pg_catalog.pg_class");
  ExpectRefused("EXISTS (SELECT 1 FROM information_schema.tables)",
                "is refused");
  ExpectRefused("EXISTS (SELECT 1 FROM _bf.meta)", "reads table _bf.meta");
  ExpectRefused("id IN (SELECT customer_id FROM public.dim_customers)",
                "reads table public.dim_customers");
  EXPECT_EQ(Dump(), before);
  // A view over the dataset's own table reads only that table; a built-in
  // set-returning function reads no table at all.
  auto view = engine_->PartitionsMatching(
      orders_, "id IN (SELECT id FROM big_orders)", 100);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(*view, Strings("SELECT DISTINCT ts FROM orders WHERE amount > 40 "
                           "ORDER BY 1"));
  auto series = engine_->PartitionsMatching(
      orders_, "id IN (SELECT unnest(ARRAY[1, 2, 3]))", 100);
  ASSERT_TRUE(series.ok()) << series.status();
  EXPECT_EQ(*series, Strings("SELECT DISTINCT ts FROM orders WHERE id <= 3 "
                             "ORDER BY 1"));
}

TEST_F(PgAffectedByTest, ABuiltInThatWritesIsOffTheAllowList) {
  const std::vector<std::string> before = Dump();
  ExpectRefused("nextval('order_ids') > id", "calls function nextval");
  EXPECT_EQ(Dump(), before);
  EXPECT_THAT(Strings("SELECT is_called::text FROM order_ids"),
              ElementsAre("false"));
}

// The predicate checks know standard strings and quoted names only: a
// dollar-quoted or escape string, which could end where they do not expect
// (and let the text after it out of the one expression), is refused before
// anything reaches the server; '$' inside a standard string is text.
TEST_F(PgAffectedByTest, DollarQuotesAndEscapeStringsAreRefused) {
  const std::vector<std::string> before = Dump();
  for (const std::string& predicate : {
           std::string("$$'$$ = '' ) UNION SELECT '5' FROM orders WHERE ( "
                       "true -- '"),
           std::string("region = $tag$EU$tag$"),
           std::string("region = E'\\\\' OR true"),
           std::string("region = e'EU'"),
       }) {
    SCOPED_TRACE(predicate);
    auto got = engine_->PartitionsMatching(orders_, predicate, 100);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
        << got.status();
    EXPECT_THAT(got.status().message(), HasSubstr("which a predicate may not"));
  }
  EXPECT_EQ(Dump(), before);
  for (const std::string& predicate :
       {std::string("'$$' <> '' AND amount > 40"),
        std::string("\"amount\" > 40 -- $$ in a comment"),
        std::string("amount > 40 /* $1 */"),
        std::string("region <> 'e' AND amount > 40")}) {
    SCOPED_TRACE(predicate);
    auto got = engine_->PartitionsMatching(orders_, predicate, 100);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, Strings("SELECT DISTINCT ts FROM orders WHERE amount > 40 "
                            "ORDER BY 1"));
  }
}

}  // namespace
}  // namespace storage_postgres_affected_by_test
}  // namespace backfill::postgres
