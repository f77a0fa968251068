// Engine conformance of PartitionsMatching (affected_by), on every warehouse
// of ConformanceWarehouses(): the partitions holding a row where a client's
// predicate is true, over generated orders whose day is written as a date or
// a timestamp, plus rows of no day. The generator writes beside each row the
// day it rendered (`part`, NULL for a row of no day), so the expectations
// are plain SQL over `part` and the same predicate, never the engine's own
// idea of a partition. Also a key grain (undeclared keys ignored), an
// unpartitioned dataset, a table not published yet, the partition limit,
// and predicates that are refused (reading another table), do not compile,
// are incomplete, try to escape the expression or run too long: each is
// INVALID_ARGUMENT and the warehouse is left as it was.

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "core/model/partition.h"
#include "core/ports/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_conformance.h"
#include "tests/testing/warehouse_harness.h"

namespace backfill {
namespace storage_engine_conformance_affected_by_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::WarehouseHarness;

// Rows of 2,000 generated orders over kDays days from 2025-01-01.
constexpr int kOrders = 2000;
constexpr int kDays = 60;

class AffectedByConformanceTest : public testing::ConformanceTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::ConformanceTest::SetUp());
    Exec(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, ts TEXT, region TEXT, "
        "amount DOUBLE PRECISION, refund DOUBLE PRECISION, part TEXT);"
        "CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY, region "
        "TEXT);"
        "INSERT INTO dim_customers VALUES (1, 'EU'), (2, 'US');");
    // Refunds only on some days (d % 7 == 3 or d % 11 == 5), on about a
    // quarter of their orders; some refunds unknown (NULL). Every fifth
    // order is written as a timestamp.
    std::mt19937 rng(20250107);
    const std::vector<std::string> regions = {"EU", "US", "APAC"};
    std::vector<std::string> values;
    for (int id = 0; id < kOrders; ++id) {
      const int d = static_cast<int>(rng() % kDays);
      const std::string day =
          absl::FormatCivilTime(absl::CivilDay(2025, 1, 1) + d);
      const std::string ts = id % 10 == 0   ? day + " 10:30:00"
                             : id % 10 == 5 ? day + "T07:30:00"
                                            : day;
      const bool refund_day = d % 7 == 3 || d % 11 == 5;
      std::string refund = "0";
      if (rng() % 13 == 0) {
        refund = "NULL";
      } else if (refund_day && rng() % 4 == 0) {
        refund = absl::StrCat(1 + rng() % 5);
      }
      values.push_back(absl::StrCat("(", id, ", '", ts, "', '",
                                    regions[rng() % 3], "', ", 10 + rng() % 90,
                                    ", ", refund, ", '", day, "')"));
    }
    // Rows of no day, all with a refund of 9: NULL, text that is no date,
    // an impossible date, an hour without minutes, an offset, a suffix.
    for (const std::string& ts :
         {std::string("NULL"), std::string("'not a date'"),
          std::string("'2025-02-30'"), std::string("'2025-01-15 10'"),
          std::string("'2025-01-16+01:00'"), std::string("'2025-01-17x'")}) {
      values.push_back(absl::StrCat("(", 5000 + values.size(), ", ", ts,
                                    ", 'EU', 10, 9, NULL)"));
    }
    Exec("BEGIN");
    for (size_t i = 0; i < values.size(); i += 250) {
      const size_t end = std::min(values.size(), i + 250);
      Exec(absl::StrCat(
          "INSERT INTO orders VALUES ",
          absl::StrJoin(values.begin() + i, values.begin() + end, ", ")));
    }
    Exec("COMMIT");

    orders_.name = "orders";
    orders_.kind = DatasetKind::kSource;
    orders_.table = "orders";
    orders_.partition = PartitionSpec{"ts", Grain::kDay, {}};

    by_region_ = orders_;
    by_region_.name = "orders_by_region";
    by_region_.partition = PartitionSpec{"region", Grain::kKey, {"EU", "US"}};

    customers_.name = "customers";
    customers_.kind = DatasetKind::kSource;
    customers_.table = "dim_customers";
  }

  // The days of the rows where `predicate` holds, from plain SQL over the
  // day the generator rendered.
  std::vector<std::string> ExpectedDays(const std::string& predicate) {
    return Strings(absl::StrCat(
        "SELECT DISTINCT part FROM orders WHERE part IS NOT NULL AND (",
        predicate, ") ORDER BY 1"));
  }

  // Every row of the fixture, each value exactly (ExactText), in order.
  std::vector<std::string> Dump() {
    const WarehouseHarness& h = warehouse();
    std::vector<std::string> out = Rows(
        absl::StrCat("SELECT ", h.ExactText("id"), ", ", h.ExactText("ts"),
                     ", ", h.ExactText("region"), ", ", h.ExactText("amount"),
                     ", ", h.ExactText("refund"), ", ", h.ExactText("part"),
                     " FROM orders ORDER BY id"));
    for (const std::string& r : Rows(absl::StrCat(
             "SELECT ", h.ExactText("customer_id"), ", ", h.ExactText("region"),
             " FROM dim_customers ORDER BY customer_id"))) {
      out.push_back(r);
    }
    return out;
  }

  // `status` is INVALID_ARGUMENT and names `predicate` as the engines quote
  // it.
  static void ExpectInvalidNaming(const absl::Status& status,
                                  const std::string& predicate) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr("affected_by"));
    EXPECT_THAT(status.message(),
                HasSubstr(absl::StrCat("\"", predicate, "\"")));
  }

  DatasetSpec orders_, by_region_, customers_;
};

INSTANTIATE_TEST_SUITE_P(Warehouses, AffectedByConformanceTest,
                         ::testing::ValuesIn(testing::ConformanceWarehouses()),
                         testing::WarehouseParamName);

TEST_P(AffectedByConformanceTest, DaysWithRefundsAreExactlyThoseOfPlainSql) {
  const std::vector<std::string> expected = ExpectedDays("refund > 0");
  // The fixture is what it claims: refunds on some days but not all, and
  // timestamps among the refunded rows.
  ASSERT_GT(expected.size(), 10u);
  ASSERT_LT(expected.size(), static_cast<size_t>(kDays));
  ASSERT_GT(Int("SELECT COUNT(*) FROM orders WHERE refund > 0 AND part IS NOT "
                "NULL AND ts <> part"),
            0);

  auto got = engine()->PartitionsMatching(orders_, "refund > 0", 1000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, expected);
}

TEST_P(AffectedByConformanceTest, ComplexPredicatesMatchPlainSql) {
  for (const std::string predicate : {
           "refund > 0 AND amount >= 60",
           "region IN ('EU', 'APAC') AND refund BETWEEN 2 AND 3",
           "id % 97 = 0",
           "lower(region) = 'us' AND amount < 15",
           "abs(amount - 50) < 1 OR id IN (7, 8, 9)",
           "CASE WHEN region = 'EU' THEN refund ELSE 0 END > 4",
           "\"amount\" > 98",
           "ts LIKE '%T07%' AND refund > 0",
           "refund IS NULL AND amount > 95",
           "COALESCE(refund, 0) + amount > 100",
           "NOT (refund = 0 OR refund IS NULL) -- a comment\n AND id > 1000",
           // Subqueries over the dataset's own table are reads like any
           // other.
           "amount = (SELECT MAX(amount) FROM orders)",
           "EXISTS (SELECT 1 FROM orders o2 WHERE o2.id = orders.id + 1 AND "
           "o2.refund > 4)",
       }) {
    SCOPED_TRACE(predicate);
    auto got = engine()->PartitionsMatching(orders_, predicate, 1000);
    ASSERT_TRUE(got.ok()) << got.status();
    const std::vector<std::string> expected = ExpectedDays(predicate);
    EXPECT_FALSE(expected.empty());
    EXPECT_EQ(*got, expected);
  }
}

TEST_P(AffectedByConformanceTest, RowsOfNoPartitionAreIgnored) {
  // Only the rows of no day have refund = 9: they match, and belong to no
  // partition.
  ASSERT_EQ(Int("SELECT COUNT(*) FROM orders WHERE refund = 9"), 6);
  auto got = engine()->PartitionsMatching(orders_, "refund = 9", 1000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, IsEmpty());
  auto none = engine()->PartitionsMatching(orders_, "amount < 0", 1000);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(*none, IsEmpty());
}

TEST_P(AffectedByConformanceTest, KeyGrainCountsDeclaredKeysOnly) {
  // APAC rows match too, but APAC is not a declared key.
  auto got = engine()->PartitionsMatching(by_region_, "refund > 3", 1000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, Strings("SELECT DISTINCT region FROM orders WHERE refund > "
                          "3 AND region IN ('EU', 'US') ORDER BY 1"));
  EXPECT_THAT(*got, ElementsAre("EU", "US"));
  auto us = engine()->PartitionsMatching(by_region_, "region = 'US'", 1000);
  ASSERT_TRUE(us.ok()) << us.status();
  EXPECT_THAT(*us, ElementsAre("US"));
  ASSERT_GT(Int("SELECT COUNT(*) FROM orders WHERE region = 'APAC'"), 0);
  auto apac = engine()->PartitionsMatching(by_region_, "region = 'APAC'", 1000);
  ASSERT_TRUE(apac.ok()) << apac.status();
  EXPECT_THAT(*apac, IsEmpty());
  // The key of the rows of no day counts: a key grain does not read ts.
  auto junk = engine()->PartitionsMatching(by_region_, "refund = 9", 1000);
  ASSERT_TRUE(junk.ok()) << junk.status();
  EXPECT_THAT(*junk, ElementsAre("EU"));
}

TEST_P(AffectedByConformanceTest, UnpartitionedDatasetIsOneEmptyPartition) {
  auto eu = engine()->PartitionsMatching(customers_, "region = 'EU'", 1000);
  ASSERT_TRUE(eu.ok()) << eu.status();
  EXPECT_THAT(*eu, ElementsAre(""));
  auto none = engine()->PartitionsMatching(customers_, "region = 'XX'", 1000);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(*none, IsEmpty());
}

TEST_P(AffectedByConformanceTest, TableNotPublishedYetHasNoRows) {
  DatasetSpec later = orders_;
  later.name = "later";
  later.table = "not_there_yet";
  ASSERT_FALSE(Exists(Quote("not_there_yet")));
  auto got = engine()->PartitionsMatching(later, "refund > 0", 1000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, IsEmpty());
  DatasetSpec later_keys = by_region_;
  later_keys.table = "not_there_yet";
  auto keys = engine()->PartitionsMatching(later_keys, "refund > 0", 1000);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_THAT(*keys, IsEmpty());
  EXPECT_FALSE(Exists(Quote("not_there_yet")));
}

TEST_P(AffectedByConformanceTest, MorePartitionsThanTheLimitIsInvalid) {
  const size_t days = ExpectedDays("refund > 0").size();
  auto exact = engine()->PartitionsMatching(orders_, "refund > 0", days);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->size(), days);
  auto over = engine()->PartitionsMatching(orders_, "refund > 0", days - 1);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument)
      << over.status();
  EXPECT_THAT(over.status().message(),
              HasSubstr(absl::StrCat("more than ", days - 1)));
  auto keys = engine()->PartitionsMatching(by_region_, "refund > 3", 1);
  EXPECT_EQ(keys.status().code(), absl::StatusCode::kInvalidArgument)
      << keys.status();
}

TEST_P(AffectedByConformanceTest, ReadingAnotherTableIsRefused) {
  const std::vector<std::string> before = Dump();
  for (const std::string predicate : {
           "region IN (SELECT region FROM dim_customers)",
           "EXISTS (SELECT 1 FROM dim_customers c WHERE c.region = "
           "orders.region)",
           "(SELECT COUNT(*) FROM dim_customers) > 0",
           "refund > 0 AND id NOT IN (SELECT customer_id FROM dim_customers)",
       }) {
    SCOPED_TRACE(predicate);
    auto got = engine()->PartitionsMatching(orders_, predicate, 1000);
    ExpectInvalidNaming(got.status(), predicate);
    EXPECT_THAT(got.status().message(), HasSubstr("refused"));
    EXPECT_THAT(got.status().message(), HasSubstr("dim_customers"));
  }
  EXPECT_EQ(Dump(), before);
}

TEST_P(AffectedByConformanceTest, PredicatesThatDoNotCompileAreNamed) {
  // A column that does not exist, an operator out of place, an aggregate.
  for (const std::string predicate :
       {"refnud > 0", "refund > > 0", "SUM(refund) > 0", "nosuchfn(refund)"}) {
    SCOPED_TRACE(predicate);
    auto got = engine()->PartitionsMatching(orders_, predicate, 1000);
    ExpectInvalidNaming(got.status(), predicate);
  }
  auto column = engine()->PartitionsMatching(orders_, "refnud > 0", 1000);
  EXPECT_THAT(column.status().message(), HasSubstr("refnud"));
  auto function =
      engine()->PartitionsMatching(orders_, "nosuchfn(refund)", 1000);
  EXPECT_THAT(function.status().message(), HasSubstr("nosuchfn"));
}

TEST_P(AffectedByConformanceTest, IncompletePredicatesSaySo) {
  for (const std::string predicate :
       {"amount >", "refund > 0 AND", "region IN ('EU',", "amount BETWEEN 1"}) {
    SCOPED_TRACE(predicate);
    auto got = engine()->PartitionsMatching(orders_, predicate, 1000);
    ExpectInvalidNaming(got.status(), predicate);
  }
  auto end = engine()->PartitionsMatching(orders_, "amount >", 1000);
  EXPECT_THAT(end.status().message(), HasSubstr("incomplete"));
}

TEST_P(AffectedByConformanceTest, EscapesAreRefusedAndChangeNothing) {
  const std::vector<std::string> before = Dump();
  for (const std::string attempt : {
           // Out of the parentheses around the predicate.
           "1) OR (1",
           "refund > 0) UNION SELECT region FROM dim_customers --",
           // More statements.
           "1; DROP TABLE orders",
           "1); DELETE FROM orders; SELECT (1",
           // Literals and comments that would swallow what follows.
           "refund > 0 /* ",
           "region = 'EU",
           "\"refund > 0",
           // Parameters: nothing is bound.
           "refund > :min",
           "refund > $1",
           // Empty.
           "   ",
       }) {
    SCOPED_TRACE(attempt);
    auto got = engine()->PartitionsMatching(orders_, attempt, 1000);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
        << got.status();
    EXPECT_THAT(got.status().message(), HasSubstr("affected_by"));
  }
  // Each engine names the parameter it found.
  auto named = engine()->PartitionsMatching(orders_, "refund > :min", 1000);
  EXPECT_THAT(named.status().message(), HasSubstr("has a parameter (:min)"));
  auto positional = engine()->PartitionsMatching(orders_, "refund > $1", 1000);
  EXPECT_THAT(positional.status().message(), HasSubstr("parameter"));
  EXPECT_THAT(positional.status().message(), HasSubstr("$1"));
  EXPECT_EQ(Dump(), before);
  auto fine = engine()->PartitionsMatching(orders_, "refund > 0", 1000);
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(*fine, ExpectedDays("refund > 0"));
}

TEST_P(AffectedByConformanceTest, RunawayPredicateIsStoppedByTheTimeout) {
  warehouse().SetPredicateTimeout(absl::Milliseconds(200));
  const std::vector<std::string> before = Dump();
  // 2,006^4 rows to count, reading only the dataset's own table: far more
  // than any timeout allows.
  const std::string slow =
      "(SELECT COUNT(*) FROM orders a, orders b, orders c, orders d) > 0";
  const absl::Time start = absl::Now();
  auto got = engine()->PartitionsMatching(orders_, slow, 1000);
  ExpectInvalidNaming(got.status(), slow);
  EXPECT_THAT(got.status().message(), HasSubstr("ran longer than"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(Dump(), before);
  // The engine still answers, with a timeout long enough.
  warehouse().SetPredicateTimeout(absl::Seconds(30));
  auto fine = engine()->PartitionsMatching(orders_, "refund > 0", 1000);
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(*fine, ExpectedDays("refund > 0"));
}

}  // namespace
}  // namespace storage_engine_conformance_affected_by_test
}  // namespace backfill
