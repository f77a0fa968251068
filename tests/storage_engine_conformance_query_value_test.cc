// Engine conformance of Engine::QueryValue (a consumer's `expect` query),
// on every warehouse of ConformanceWarehouses(): the partition's values
// are bound by name (day, month, time x key), the first value of the first
// row comes back with its type (integer, real, text, NULL, no row), and a
// statement that does not compile, writes, or names a partition of the
// wrong form is refused without changing anything. Expectations come from
// plain SQL through the harness.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/model/catalog.h"
#include "core/ports/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_conformance.h"

namespace backfill {
namespace storage_engine_conformance_query_value_test {
namespace {

using ::testing::HasSubstr;

class QueryValueConformanceTest : public testing::ConformanceTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::ConformanceTest::SetUp());
    Exec(
        "CREATE TABLE segment_daily (day TEXT, region TEXT, amount DOUBLE "
        "PRECISION, n BIGINT); "
        "INSERT INTO segment_daily VALUES ('2025-03-01', 'eu', 10.25, 1), "
        "('2025-03-01', 'us', 2.5, 2), ('2025-03-02', 'eu', 7, 3), "
        "('2025-03-31', 'us', 1, 4), ('2025-04-01', 'eu', 1000, 5)");
    daily_.name = "segment_daily";
    daily_.kind = DatasetKind::kDerived;
    daily_.table = "segment_daily";
    daily_.partition = PartitionSpec{"day", Grain::kDay, {}};
    daily_.columns = {{"day", "TEXT"},
                      {"region", "TEXT"},
                      {"amount", "DOUBLE PRECISION"},
                      {"n", "BIGINT"}};
    monthly_ = daily_;
    monthly_.name = "segment_monthly";
    monthly_.partition = PartitionSpec{"day", Grain::kMonth, {}};
    keyed_ = daily_;
    keyed_.name = "segment_keyed";
    keyed_.partition =
        PartitionSpec{"day", Grain::kDay, {"eu", "us"}, "region"};
  }

  // A warehouse's value of `sql` in cents (Cents), as plain SQL computes
  // it.
  int64_t CentsOf(const std::string& sql) {
    return Int(absl::StrCat("SELECT ", Cents(absl::StrCat("(", sql, ")"))));
  }

  DatasetSpec daily_, monthly_, keyed_;
};

INSTANTIATE_TEST_SUITE_P(Warehouses, QueryValueConformanceTest,
                         ::testing::ValuesIn(testing::ConformanceWarehouses()),
                         testing::WarehouseParamName);

TEST_P(QueryValueConformanceTest, BindsThePartitionAndReturnsTypedValues) {
  auto v = engine()->QueryValue(
      daily_, "2025-03-01",
      "SELECT SUM(amount) FROM segment_daily WHERE day = :partition");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->type, SqlValue::Type::kReal);
  EXPECT_EQ(static_cast<int64_t>(v->real * 100),
            CentsOf("SELECT SUM(amount) FROM segment_daily WHERE day = "
                    "'2025-03-01'"));

  // A month: :partition_start and :partition_end are its first days.
  v = engine()->QueryValue(monthly_, "2025-03",
                           "SELECT SUM(n) FROM segment_daily WHERE day >= "
                           ":partition_start AND day < :partition_end");
  ASSERT_TRUE(v.ok()) << v.status();
  const int64_t march = Int(
      "SELECT SUM(n) FROM segment_daily WHERE day >= '2025-03-01' AND day < "
      "'2025-04-01'");
  if (v->type == SqlValue::Type::kInteger) {
    EXPECT_EQ(v->integer, march);
  } else {
    // PostgreSQL's SUM of a BIGINT is a NUMERIC.
    EXPECT_EQ(v->type, SqlValue::Type::kReal);
    EXPECT_EQ(v->real, static_cast<double>(march));
  }

  // Time x key: :partition_key is the key.
  v = engine()->QueryValue(keyed_, "2025-03-01|us",
                           "SELECT n FROM segment_daily WHERE day = "
                           ":partition_start AND region = :partition_key");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->type, SqlValue::Type::kInteger);
  EXPECT_EQ(v->integer, Int("SELECT n FROM segment_daily WHERE day = "
                            "'2025-03-01' AND region = 'us'"));

  v = engine()->QueryValue(
      daily_, "2025-03-02",
      "SELECT COUNT(*) FROM segment_daily WHERE day = :partition");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->type, SqlValue::Type::kInteger);
  EXPECT_EQ(v->integer, Int("SELECT COUNT(*) FROM segment_daily WHERE day = "
                            "'2025-03-02'"));
  v = engine()->QueryValue(
      daily_, "2025-03-02",
      "SELECT region FROM segment_daily WHERE day = :partition");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->type, SqlValue::Type::kText);
  EXPECT_EQ(v->text, Strings("SELECT region FROM segment_daily WHERE day = "
                             "'2025-03-02'")
                         .at(0));
  v = engine()->QueryValue(
      daily_, "2025-05-01",
      "SELECT SUM(amount) FROM segment_daily WHERE day = :partition");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->type, SqlValue::Type::kNull);
  v = engine()->QueryValue(
      daily_, "2025-05-01",
      "SELECT amount FROM segment_daily WHERE day = :partition");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->type, SqlValue::Type::kNoRow);
}

TEST_P(QueryValueConformanceTest, RefusesWhatItCannotRunAndChangesNothing) {
  const std::string dump =
      "SELECT day, region, n FROM segment_daily ORDER BY 1, 2";
  const std::vector<std::string> before = Rows(dump);
  for (const char* sql :
       {"DELETE FROM segment_daily WHERE day = :partition",
        "UPDATE segment_daily SET n = 0 WHERE day = :partition",
        "INSERT INTO segment_daily VALUES (:partition, 'x', 1, 1)"}) {
    auto v = engine()->QueryValue(daily_, "2025-03-01", sql);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kFailedPrecondition) << sql;
    EXPECT_THAT(v.status().message(), HasSubstr("not a read-only SELECT"))
        << sql;
  }
  EXPECT_EQ(Rows(dump), before);
  auto bad = engine()->QueryValue(daily_, "2025-03-01", "SELECT nope FROM x");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(), HasSubstr("does not compile"));
  auto form = engine()->QueryValue(daily_, "March", "SELECT 1");
  EXPECT_EQ(form.status().code(), absl::StatusCode::kInvalidArgument);
  // Only the partition's own parameters are bound.
  auto unbound = engine()->QueryValue(
      daily_, "2025-03-01",
      "SELECT n FROM segment_daily WHERE day = :partition AND region = :other");
  EXPECT_EQ(unbound.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(unbound.status().message(), HasSubstr(":other"));
}

}  // namespace
}  // namespace storage_engine_conformance_query_value_test
}  // namespace backfill
