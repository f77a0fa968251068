// SqliteEngine::PartitionsMatching and the ReadSandbox under it: the
// partitions holding a row where a client's predicate is true, checked
// against plain SQL over generated data (partition values in both accepted
// time formats, rows of no partition), and predicates that try to do more
// than read, each refused with INVALID_ARGUMENT while the warehouse stays
// byte-identical (a full ordered dump before and after).

#include <atomic>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/plan/affected_by.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_engine.h"
#include "storage/sqlite/sqlite_sandbox.h"
#include "tests/testing/warehouse_test.h"

namespace backfill {
namespace storage_partitions_matching_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class PartitionsMatchingTest : public testing::WarehouseTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::WarehouseTest::SetUp());
    // `junk` marks, by construction, the rows whose order_date belongs to
    // no day: the expectations below never ask the engine's definition.
    Exec(R"sql(
      CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date,
                               region TEXT, amount REAL, refund REAL,
                               junk INTEGER NOT NULL);
      CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY,
                                  region TEXT);
      INSERT INTO dim_customers VALUES (1, 'EU'), (2, 'US');
    )sql");
    // 2,000 orders over 90 days from 2025-01-01; day d has a refund on
    // some of its orders when d % 7 == 3 or d % 11 == 5. Every fifth order
    // is written as a timestamp ("YYYY-MM-DD HH:MM:SS" or
    // "YYYY-MM-DDTHHZ"), the others as a date.
    Exec(R"sql(
      INSERT INTO raw_orders (order_id, order_date, region, amount, refund,
                              junk)
      WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n
                              WHERE i < 1999)
      SELECT i,
             CASE i % 10
               WHEN 0 THEN date('2025-01-01', '+' || (i % 90) || ' days')
                           || ' 1' || (i % 10) || ':30:00'
               WHEN 5 THEN date('2025-01-01', '+' || (i % 90) || ' days')
                           || 'T0' || (i % 10) || 'Z'
               ELSE date('2025-01-01', '+' || (i % 90) || ' days')
             END,
             CASE i % 3 WHEN 0 THEN 'EU' WHEN 1 THEN 'US' ELSE 'APAC' END,
             10 + (i * 37) % 90,
             CASE WHEN ((i % 90) % 7 = 3 OR (i % 90) % 11 = 5) AND i % 4 = 1
                  THEN 1 + i % 5 ELSE 0 END,
             0
      FROM n;
    )sql");
    // Rows of no partition, all with a refund: NULL, text that is no
    // date, an impossible date, an hour without minutes after a space,
    // an INTEGER and a REAL.
    Exec(R"sql(
      INSERT INTO raw_orders VALUES
        (5001, NULL, 'EU', 10, 9, 1),
        (5002, 'not a date', 'EU', 10, 9, 1),
        (5003, '2025-02-30', 'EU', 10, 9, 1),
        (5004, '2025-06-15 10', 'EU', 10, 9, 1),
        (5005, 20250616, 'EU', 10, 9, 1),
        (5006, 2025.5, 'EU', 10, 9, 1);
    )sql");
    auto engine = SqliteEngine::Open(path_, 2);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);

    orders_.name = "orders";
    orders_.kind = DatasetKind::kSource;
    orders_.table = "raw_orders";
    orders_.partition = PartitionSpec{"order_date", Grain::kDay, {}};

    by_region_ = orders_;
    by_region_.name = "orders_by_region";
    by_region_.partition = PartitionSpec{"region", Grain::kKey, {"EU", "US"}};

    customers_.name = "customers";
    customers_.kind = DatasetKind::kSource;
    customers_.table = "dim_customers";
  }

  void TearDown() override {
    engine_.reset();
    testing::WarehouseTest::TearDown();
  }

  // One column of a query's rows.
  std::vector<std::string> Column(const std::string& sql) {
    std::vector<std::string> out;
    auto q = db_->Prepare(sql);
    EXPECT_TRUE(q.ok()) << q.status();
    if (!q.ok()) return out;
    while (true) {
      auto row = q->Step();
      EXPECT_TRUE(row.ok()) << row.status();
      if (!row.ok() || !*row) break;
      out.push_back(q->ColumnIsNull(0) ? "NULL" : q->ColumnText(0));
    }
    return out;
  }

  // The days of the orders (not junk) where `condition` holds, computed
  // with plain SQL from the generated values.
  std::vector<std::string> ExpectedDays(const std::string& condition) {
    return Column(absl::StrCat(
        "SELECT DISTINCT substr(order_date, 1, 10) FROM raw_orders WHERE "
        "junk = 0 AND (",
        condition, ") ORDER BY 1"));
  }

  // Every object of the warehouse with its SQL and every row of every
  // table, in order, with SQL-quoted values (types included).
  std::string Dump() {
    std::string out;
    std::vector<std::string> tables;
    auto q = db_->Prepare(
        "SELECT type, name, COALESCE(sql, '') FROM sqlite_schema ORDER BY "
        "type, name");
    EXPECT_TRUE(q.ok()) << q.status();
    while (q.ok()) {
      auto row = q->Step();
      EXPECT_TRUE(row.ok()) << row.status();
      if (!row.ok() || !*row) break;
      absl::StrAppend(&out, q->ColumnText(0), " ", q->ColumnText(1), ": ",
                      q->ColumnText(2), "\n");
      if (q->ColumnText(0) == "table") tables.push_back(q->ColumnText(1));
    }
    for (const std::string& table : tables) {
      std::vector<std::string> cols =
          Column(absl::StrCat("SELECT name FROM pragma_table_info(",
                              "'" + table + "'", ") ORDER BY cid"));
      std::vector<std::string> quoted;
      for (const std::string& c : cols) {
        quoted.push_back(
            absl::StrCat("quote(", sqlite::QuoteIdentifier(c), ")"));
      }
      std::vector<std::string> order;
      for (const std::string& c : cols) {
        order.push_back(sqlite::QuoteIdentifier(c));
      }
      const std::string sql =
          absl::StrCat("SELECT ", absl::StrJoin(quoted, " || '|' || "),
                       " FROM ", sqlite::QuoteIdentifier(table), " ORDER BY ",
                       absl::StrJoin(order, ", "));
      absl::StrAppend(&out, "rows of ", table, ":\n",
                      absl::StrJoin(Column(sql), "\n"), "\n");
    }
    return out;
  }

  std::unique_ptr<SqliteEngine> engine_;
  DatasetSpec orders_;
  DatasetSpec by_region_;
  DatasetSpec customers_;
};

TEST_F(PartitionsMatchingTest, DaysWithRefundsAreExactlyThoseOfPlainSql) {
  const std::vector<std::string> expected = ExpectedDays("refund > 0");
  // The fixture is what it claims: refunds on some days but not all, and
  // timestamps among the refunded rows.
  ASSERT_GT(expected.size(), 10u);
  ASSERT_LT(expected.size(), 90u);
  ASSERT_FALSE(Column("SELECT 1 FROM raw_orders WHERE refund > 0 AND junk = "
                      "0 AND length(order_date) > 10 LIMIT 1")
                   .empty());

  auto got = engine_->PartitionsMatching(orders_, "refund > 0", 1000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, expected);
}

TEST_F(PartitionsMatchingTest, ComplexPredicatesMatchPlainSql) {
  for (const std::string predicate :
       {"refund > 0 AND amount >= 60",
        "region IN ('EU', 'APAC') AND refund "
        "BETWEEN 2 AND 3",
        "order_id % 97 = 0", "lower(region) = 'us' -- a comment\n AND 1",
        "abs(amount - 50) < 3 OR order_id IN (7, 8, 9)",
        "CASE WHEN region = 'EU' THEN refund ELSE 0 END > 2", "\"amount\" > 95",
        "order_date LIKE '%T0%'"}) {
    SCOPED_TRACE(predicate);
    auto got = engine_->PartitionsMatching(orders_, predicate, 1000);
    ASSERT_TRUE(got.ok()) << got.status();
    const std::vector<std::string> expected = ExpectedDays(predicate);
    EXPECT_FALSE(expected.empty());
    EXPECT_EQ(*got, expected);
  }
}

TEST_F(PartitionsMatchingTest, RowsOfNoPartitionAreIgnored) {
  // Only junk rows have refund = 9: they match, and belong to no day.
  ASSERT_EQ(Column("SELECT COUNT(*) FROM raw_orders WHERE refund = 9"),
            std::vector<std::string>{"6"});
  auto got = engine_->PartitionsMatching(orders_, "refund = 9", 1000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, IsEmpty());
}

TEST_F(PartitionsMatchingTest, NoMatchIsEmpty) {
  auto got = engine_->PartitionsMatching(orders_, "amount < 0", 1000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, IsEmpty());
}

TEST_F(PartitionsMatchingTest, KeyGrainCountsDeclaredKeysOnly) {
  // APAC rows match too, but APAC is not a declared key.
  auto got = engine_->PartitionsMatching(by_region_, "refund > 3", 1000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, Column("SELECT DISTINCT region FROM raw_orders WHERE "
                         "refund > 3 AND region IN ('EU', 'US') ORDER BY 1"));
  EXPECT_THAT(*got, ElementsAre("EU", "US"));
  auto us = engine_->PartitionsMatching(by_region_, "region = 'US'", 1000);
  ASSERT_TRUE(us.ok()) << us.status();
  EXPECT_THAT(*us, ElementsAre("US"));
  auto apac = engine_->PartitionsMatching(by_region_, "region = 'APAC'", 1000);
  ASSERT_TRUE(apac.ok()) << apac.status();
  EXPECT_THAT(*apac, IsEmpty());
}

TEST_F(PartitionsMatchingTest, UnpartitionedDatasetIsOneEmptyPartition) {
  auto eu = engine_->PartitionsMatching(customers_, "region = 'EU'", 1000);
  ASSERT_TRUE(eu.ok()) << eu.status();
  EXPECT_THAT(*eu, ElementsAre(""));
  auto none = engine_->PartitionsMatching(customers_, "region = 'XX'", 1000);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(*none, IsEmpty());
}

TEST_F(PartitionsMatchingTest, TableNotPublishedYetHasNoRows) {
  DatasetSpec missing = orders_;
  missing.name = "later";
  missing.table = "not_there_yet";
  auto got = engine_->PartitionsMatching(missing, "refund > 0", 1000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, IsEmpty());
}

TEST_F(PartitionsMatchingTest, MorePartitionsThanTheLimitIsInvalid) {
  const size_t days = ExpectedDays("refund > 0").size();
  auto exact = engine_->PartitionsMatching(orders_, "refund > 0", days);
  ASSERT_TRUE(exact.ok()) << exact.status();
  auto over = engine_->PartitionsMatching(orders_, "refund > 0", days - 1);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(over.status().message(), HasSubstr("narrow the predicate"));
}

TEST_F(PartitionsMatchingTest, SyntaxErrorNamesThePredicateAndQuotesSqlite) {
  auto got = engine_->PartitionsMatching(orders_, "refund >", 1000);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("\"refund >\""));
  EXPECT_THAT(got.status().message(), HasSubstr("syntax error"));
  EXPECT_THAT(got.status().message(), HasSubstr("affected_by"));
  EXPECT_THAT(got.status().message(),
              HasSubstr("the expression is incomplete at its end"));

  auto inside = engine_->PartitionsMatching(orders_, "refund > > 0", 1000);
  ASSERT_EQ(inside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(inside.status().message(), HasSubstr("near \">\": syntax error"));
  EXPECT_THAT(inside.status().message(), Not(HasSubstr("incomplete")));

  auto column = engine_->PartitionsMatching(orders_, "refnud > 0", 1000);
  ASSERT_EQ(column.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(column.status().message(), HasSubstr("\"refnud > 0\""));
  EXPECT_THAT(column.status().message(), HasSubstr("no such column: refnud"));

  auto aggregate =
      engine_->PartitionsMatching(orders_, "SUM(refund) > 0", 1000);
  ASSERT_EQ(aggregate.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(aggregate.status().message(), HasSubstr("\"SUM(refund) > 0\""));
}

TEST_F(PartitionsMatchingTest, EscapesAreRefusedAndChangeNothing) {
  const std::string before = Dump();
  ASSERT_THAT(before, HasSubstr("rows of raw_orders"));
  const std::vector<std::string> attempts = {
      // Out of the parentheses the engine puts around the predicate.
      "1) OR (1",
      "refund > 0) UNION SELECT name FROM sqlite_schema --",
      ") OR 1 OR (",
      // More statements.
      "1; DROP TABLE raw_orders",
      "1); DROP TABLE raw_orders; --",
      "1); DELETE FROM raw_orders; SELECT (1",
      "1); ATTACH DATABASE 'x.db' AS x; SELECT (1",
      "1); PRAGMA query_only = OFF; SELECT (1",
      // Literals and comments that would swallow the engine's text.
      "refund > 0 /* ",
      "region = 'EU",
      "\"refund > 0",
      "[refund > 0",
      // Reading what is not the dataset's table.
      "(SELECT COUNT(*) FROM sqlite_schema) > 0",
      "region IN (SELECT region FROM dim_customers)",
      "EXISTS (SELECT 1 FROM _bf_meta)",
      "(SELECT COUNT(*) FROM pragma_table_info('raw_orders')) > 0",
      "order_id IN (WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 "
      "FROM c WHERE n < 5) SELECT n FROM c)",
      "load_extension('/tmp/x') IS NULL",
      // Parameters: nothing is bound.
      "refund > :min",
      "refund > ?",
      // Control characters.
      std::string("refund > 0\0 OR 1", 16),
      "refund > 0\r",
      // Too long.
      absl::StrCat("refund > 0", std::string(kMaxPredicateBytes, ' '), "+1"),
      // Empty.
      "   ",
  };
  for (const std::string& attempt : attempts) {
    SCOPED_TRACE(attempt);
    auto got = engine_->PartitionsMatching(orders_, attempt, 1000);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
        << got.status();
    EXPECT_THAT(got.status().message(), HasSubstr("affected_by"));
  }
  // Those of one expression pass the form check: the sandbox refuses them.
  for (const std::string& attempt : std::vector<std::string>{
           "(SELECT COUNT(*) FROM sqlite_schema) > 0",
           "region IN (SELECT region FROM dim_customers)",
           "EXISTS (SELECT 1 FROM _bf_meta)",
           "(SELECT COUNT(*) FROM pragma_table_info('raw_orders')) > 0",
           "order_id IN (WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT "
           "n + 1 FROM c WHERE n < 5) SELECT n FROM c)",
           "load_extension('/tmp/x') IS NULL"}) {
    SCOPED_TRACE(attempt);
    ASSERT_TRUE(CheckPredicate(attempt).ok());
    auto got = engine_->PartitionsMatching(orders_, attempt, 1000);
    EXPECT_THAT(got.status().message(), HasSubstr("is refused: it "));
  }
  for (const char* attempt : {"refund > :min", "refund > ?"}) {
    auto got = engine_->PartitionsMatching(orders_, attempt, 1000);
    EXPECT_THAT(got.status().message(), HasSubstr("has a parameter"));
  }
  EXPECT_EQ(Dump(), before);
  // And the engine still answers.
  auto fine = engine_->PartitionsMatching(orders_, "refund > 0", 1000);
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(*fine, ExpectedDays("refund > 0"));
}

TEST_F(PartitionsMatchingTest, RefusalSaysWhatWasRefused) {
  auto other = engine_->PartitionsMatching(
      orders_, "region IN (SELECT region FROM dim_customers)", 1000);
  ASSERT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.status().message(), HasSubstr("reads table dim_customers"));
  EXPECT_THAT(other.status().message(),
              HasSubstr("may only read the columns of table raw_orders"));

  // A subquery over the dataset's own table is a read like any other.
  auto own = engine_->PartitionsMatching(
      orders_, "amount = (SELECT MAX(amount) FROM raw_orders)", 1000);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(*own,
            ExpectedDays("amount = (SELECT MAX(amount) FROM raw_orders)"));
}

TEST_F(PartitionsMatchingTest, RunawayPredicateIsStoppedByTheTimeout) {
  engine_->SetPredicateTimeout(absl::Milliseconds(200));
  const std::string before = Dump();
  // 2,006^4 rows to count: far more than any timeout allows.
  auto got = engine_->PartitionsMatching(
      orders_,
      "(SELECT COUNT(*) FROM raw_orders a, raw_orders b, raw_orders c, "
      "raw_orders d) > 0",
      1000);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("was stopped"));
  EXPECT_EQ(Dump(), before);
  // The sandbox is gone: the next predicate runs normally.
  engine_->SetPredicateTimeout(absl::Seconds(30));
  auto fine = engine_->PartitionsMatching(orders_, "refund > 0", 1000);
  ASSERT_TRUE(fine.ok()) << fine.status();
}

TEST_F(PartitionsMatchingTest, InterruptStopsARunningPredicate) {
  engine_->SetPredicateTimeout(absl::Hours(1));
  std::atomic<bool> done{false};
  absl::Status status;
  std::thread runner([&] {
    status = engine_
                 ->PartitionsMatching(
                     orders_,
                     "(SELECT COUNT(*) FROM raw_orders a, raw_orders b, "
                     "raw_orders c, raw_orders d) > 0",
                     1000)
                 .status();
    done = true;
  });
  // An interrupt reaches only a statement that runs: repeat until it ends.
  while (!done) {
    engine_->Interrupt();
    absl::SleepFor(absl::Milliseconds(20));
  }
  runner.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("interrupted"));
}

TEST_F(PartitionsMatchingTest, SandboxDeniesWritesPragmaAndAttach) {
  // The sandbox alone, on a read-write connection: statements that do
  // more than read the one table do not compile.
  const std::string before = Dump();
  struct Case {
    std::string sql;
    std::string refused;
  };
  const std::vector<Case> cases = {
      {"DELETE FROM raw_orders", "writes to table raw_orders"},
      {"UPDATE raw_orders SET refund = 0", "writes to table raw_orders"},
      {"INSERT INTO raw_orders (order_id, junk) VALUES (9999, 0)",
       "writes to table raw_orders"},
      {"PRAGMA query_only = OFF", "uses PRAGMA"},
      {"ATTACH DATABASE ':memory:' AS x", "attaches or detaches a database"},
      {"DROP TABLE raw_orders", ""},
      {"CREATE TABLE x (a)", ""},  // any refusal (SQLite checks in turn)
      {"BEGIN", "controls a transaction"},
      {"SELECT * FROM dim_customers", "reads table dim_customers"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.sql);
    sqlite::ReadSandbox sandbox(db_.get(), "raw_orders", absl::Seconds(30));
    auto q = db_->Prepare(c.sql);
    EXPECT_FALSE(q.ok());
    EXPECT_FALSE(sandbox.refused().empty());
    if (!c.refused.empty()) {
      EXPECT_EQ(sandbox.refused(), c.refused);
    }
  }
  {
    sqlite::ReadSandbox sandbox(db_.get(), "raw_orders", absl::Seconds(30));
    auto q = db_->Prepare("SELECT COUNT(*), upper(region) FROM raw_orders");
    ASSERT_TRUE(q.ok()) << q.status();
    EXPECT_TRUE(sandbox.refused().empty());
  }
  EXPECT_EQ(Dump(), before);
  // Removed with the sandbox: the connection writes again.
  Exec("CREATE TABLE after_sandbox (a)");
}

// Functions are decided by an allow-list: those off it are refused before
// anything runs, whatever they would do (plant or leak a pointer, make a
// blob of any size, read the library's state).
TEST_F(PartitionsMatchingTest, FunctionsOffTheAllowListAreRefused) {
  const std::string before = Dump();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"fts3_tokenizer('simple', x'4141414141414141') IS NOT NULL",
       "fts3_tokenizer"},
      {"substr(hex(fts3_tokenizer('simple')),1,1)='6'", "fts3_tokenizer"},
      {"length(hex(zeroblob(450000000))) > 0", "zeroblob"},
      {"length(randomblob(10)) > 0", "randomblob"},
      {"load_extension('x') IS NULL", "load_extension"},
      {"sqlite_version() > '3'", "sqlite_version"},
      {"sqlite_compileoption_used('ENABLE_FTS3_TOKENIZER')",
       "sqlite_compileoption_used"},
      {"changes() >= 0", "changes"},
      {"random() > 0", "random"},
      {"rtreecheck('raw_orders') IS NOT NULL", "rtreecheck"},
      {"LOWER(Fts3_Tokenizer('simple')) IS NOT NULL", "fts3_tokenizer"},
  };
  for (const auto& [predicate, function] : cases) {
    SCOPED_TRACE(predicate);
    auto got = engine_->PartitionsMatching(orders_, predicate, 1000);
    ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
        << got.status();
    EXPECT_THAT(got.status().message(),
                HasSubstr(absl::StrCat("is refused: it calls ", function,
                                       ", which is not on the allow-list")));
  }
  EXPECT_EQ(Dump(), before);
}

TEST_F(PartitionsMatchingTest, AllowedFunctionsAndOperatorsStillWork) {
  // Each predicate against the same condition written in plain SQL.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"lower(region) = 'eu' AND refund > 0", "region = 'EU' AND refund > 0"},
      {"region LIKE 'ap%' AND abs(-refund) > 0",
       "region = 'APAC' AND refund > 0"},
      {"region GLOB 'U*' AND coalesce(refund, 0) > 0",
       "region = 'US' AND refund > 0"},
      {"json_extract(json_object('r', refund), '$.r') > 0", "refund > 0"},
      {"json_object('r', refund) ->> '$.r' > 0", "refund > 0"},
      {"strftime('%d', substr(order_date, 1, 10)) = '05' AND refund > 0",
       "substr(order_date, 9, 2) = '05' AND refund > 0"},
      {"EXISTS (SELECT 1 FROM json_each(json_array(refund)) WHERE value > 0)",
       "refund > 0"},
      {"length(printf('%08d', order_id)) = 8 AND refund > 0", "refund > 0"},
  };
  for (const auto& [predicate, plain] : cases) {
    SCOPED_TRACE(predicate);
    auto got = engine_->PartitionsMatching(orders_, predicate, 1000);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, ExpectedDays(plain));
  }
}

TEST_F(PartitionsMatchingTest, AValueLargerThanTheBoundStopsThePredicate) {
  const std::string before = Dump();
  // replace() is on the allow-list; what it makes is bounded (4 MiB).
  auto got = engine_->PartitionsMatching(
      orders_, "length(replace(printf('%.*c', 3000000, 'x'), 'x', 'xx')) > 0",
      1000);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
      << got.status();
  EXPECT_THAT(got.status().message(),
              HasSubstr("made a value larger than 4194304 bytes"));
  // printf() makes NULL rather than a string over the bound.
  auto null = engine_->PartitionsMatching(
      orders_, "printf('%.*c', 100000000, 'x') IS NULL AND refund > 0", 1000);
  ASSERT_TRUE(null.ok()) << null.status();
  EXPECT_EQ(*null, ExpectedDays("refund > 0"));
  // Under the bound it runs.
  auto fine = engine_->PartitionsMatching(
      orders_,
      "length(replace(printf('%.*c', 1000, 'x'), 'x', 'xx')) = 2000 AND "
      "refund > 0",
      1000);
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(*fine, ExpectedDays("refund > 0"));
  EXPECT_EQ(Dump(), before);
}

TEST_F(PartitionsMatchingTest, ACallWhoseWorkHasNoBoundIsRefusedAtOnce) {
  // The time limit is checked between calls, not within one: a call on
  // values of 4,000,000 and 1,000,001 bytes (a minute of SQLite's instr)
  // is refused before it starts, naming the sizes.
  const std::string before = Dump();
  auto got = engine_->PartitionsMatching(
      orders_,
      "instr(printf('%.*c', 4000000, 'a'), printf('%.*c', 1000000, 'a') || "
      "'b') > 0",
      1000);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
      << got.status();
  EXPECT_THAT(got.status().message(),
              HasSubstr("instr() of values of 4000000 and 1000001 bytes is "
                        "refused: one call may compare at most"));
  // printf's %c repeated 2^31 times is NULL, as SQLite makes it, without
  // the seconds SQLite 3.40 spends getting there.
  auto null = engine_->PartitionsMatching(
      orders_, "printf('%.*c', 2147483647, 'x') IS NULL AND refund > 0", 1000);
  ASSERT_TRUE(null.ok()) << null.status();
  EXPECT_EQ(*null, ExpectedDays("refund > 0"));
  EXPECT_EQ(Dump(), before);
}

// Every connection the storage opens keeps fts3_tokenizer from taking or
// giving a pointer, sandbox or not: the pointer planted here would crash
// the next use of an FTS table.
TEST_F(PartitionsMatchingTest, NoConnectionPlantsATokenizerPointer) {
  Exec("CREATE VIRTUAL TABLE docs_fts USING fts4(body)");
  Exec("INSERT INTO docs_fts (body) VALUES ('late refund'), ('on time')");
  auto planted =
      db_->Exec("SELECT fts3_tokenizer('simple', x'4141414141414141')");
  EXPECT_FALSE(planted.ok());
  auto hits = db_->QueryInt(
      "SELECT COUNT(*) FROM docs_fts WHERE docs_fts MATCH 'refund'");
  ASSERT_TRUE(hits.ok()) << hits.status();
  EXPECT_EQ(*hits, 1);
  // And through the engine: the FTS table as a dataset, after the same
  // attempt as a predicate.
  DatasetSpec docs;
  docs.name = "docs";
  docs.kind = DatasetKind::kSource;
  docs.table = "docs_fts";
  auto refused = engine_->PartitionsMatching(
      docs, "fts3_tokenizer('simple', x'4141414141414141') IS NOT NULL", 10);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  auto counted = engine_->CountRowsByPartition(docs);
  ASSERT_TRUE(counted.ok()) << counted.status();
  EXPECT_EQ(counted->at(""), 2);
}

TEST_F(PartitionsMatchingTest, TheSandboxBoundsValuesAndTakesItsBoundAway) {
  {
    sqlite::ReadSandbox sandbox(db_.get(), "raw_orders", absl::Seconds(30));
    auto q = db_->QueryInt(
        "SELECT length(replace(printf('%.*c', 3000000, 'x'), 'x', 'xx'))");
    EXPECT_FALSE(q.ok());
    EXPECT_TRUE(sandbox.LastErrorTooBig());
  }
  auto big = db_->QueryInt("SELECT length(zeroblob(50000000))");
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(*big, 50000000);
}

TEST(PartitionsMatchingMemoryTest, InMemoryWarehouseIsQueryOnlyForTheCall) {
  auto opened = SqliteEngine::Open(":memory:", 1);
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<SqliteEngine> engine = *std::move(opened);
  ASSERT_TRUE(engine->Claim("store-1", false).ok());
  // The engine's own record table stands in for a dataset (the only table
  // an in-memory warehouse has without a publish).
  DatasetSpec meta;
  meta.name = "meta";
  meta.kind = DatasetKind::kSource;
  meta.table = "_bf_meta";
  auto got = engine->PartitionsMatching(meta, "value = 'store-1'", 10);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, ElementsAre(""));
  auto refused = engine->PartitionsMatching(meta, "1) OR (1", 10);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  // query_only was switched off again: the engine still writes.
  absl::Status take_over = engine->Claim("store-2", true);
  EXPECT_TRUE(take_over.ok()) << take_over;
  auto after = engine->PartitionsMatching(meta, "value = 'store-2'", 10);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(*after, ElementsAre(""));
}

}  // namespace
}  // namespace storage_partitions_matching_test
}  // namespace backfill
