// Engine conformance of what checks read, on every warehouse of
// ConformanceWarehouses(): the profile of a job's staged rows (rows, sums,
// NULL counts with samples, orphans against the job's pinned snapshot, a
// published table or a table that does not exist), the profile of the
// published rows of the job's partitions, assertions run per partition over
// its staged rows with the partition's parameters bound (and refused,
// changing nothing, when they would write), and the description of queries
// (stand-ins for tables not published yet, columns, parameters, whether the
// statement writes) and of published tables. A small orders / customers
// fixture is built with plain SQL; every expectation is computed with plain
// SQL over it, never with the engine's own output. Samples are compared by
// what they name (a key value), not by how a warehouse prints a number.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/model/partition.h"
#include "core/ports/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_conformance.h"
#include "tests/testing/warehouse_harness.h"

namespace backfill {
namespace storage_engine_conformance_checks_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::TableColumn;
using testing::WarehouseHarness;

const std::vector<std::string> kDays = {"2025-01-01", "2025-01-02",
                                        "2025-01-03", "2025-01-04"};

class EngineChecksConformanceTest : public testing::ConformanceTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::ConformanceTest::SetUp());
    // Customers 4 to 10 are missing from the dimension; customer 6's only
    // order has no amount; 2025-01-04 has more orphans than samples.
    Exec(R"sql(
      CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date TEXT,
                               customer_id INTEGER,
                               amount DOUBLE PRECISION);
      CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY,
                                  region TEXT);
      INSERT INTO dim_customers VALUES (1, 'EU'), (2, 'US'), (3, 'EU');
      INSERT INTO raw_orders VALUES
        (1, '2025-01-01', 1, 10), (2, '2025-01-01', 2, 20),
        (3, '2025-01-01', 4, 30), (4, '2025-01-02', 1, 40),
        (5, '2025-01-02', 5, 50), (6, '2025-01-02', 5, 5),
        (7, '2025-01-03', 3, 70), (8, '2025-01-03', 2, 7),
        (9, '2025-01-03', 6, NULL), (10, '2025-01-04', 7, 1.25),
        (11, '2025-01-04', 8, 2.5), (12, '2025-01-04', 9, 3.75),
        (13, '2025-01-04', 10, 4), (14, '2025-01-04', 1, 5);
    )sql");
    ASSERT_TRUE(engine()->Claim("store-a", false).ok());

    orders_.name = "orders";
    orders_.kind = DatasetKind::kSource;
    orders_.table = "raw_orders";
    orders_.partition = PartitionSpec{"order_date", Grain::kDay, {}};
    customers_.name = "customers";
    customers_.kind = DatasetKind::kSource;
    customers_.table = "dim_customers";
    customers_.columns = {{"customer_id", "INTEGER"}, {"region", "TEXT"}};

    // Per customer and day; a customer missing from the dimension gets a
    // NULL region (LEFT JOIN).
    cust_.name = "cust_rev";
    cust_.kind = DatasetKind::kDerived;
    cust_.table = "cust_rev";
    cust_.partition = PartitionSpec{"ds", Grain::kDay, {}};
    cust_.upstream = {{"orders", Mapping::kIdentity},
                      {"customers", Mapping::kAll}};
    cust_.transform =
        "SELECT o.order_date AS ds, o.customer_id AS customer_id, c.region "
        "AS region, SUM(o.amount) AS revenue FROM raw_orders o LEFT JOIN "
        "dim_customers c ON c.customer_id = o.customer_id WHERE "
        "o.order_date >= :partition_start AND o.order_date < :partition_end "
        "GROUP BY 1, 2, 3";
    cust_.columns = {{"ds", "TEXT"},
                     {"customer_id", "INTEGER"},
                     {"region", "TEXT"},
                     {"revenue", "DOUBLE PRECISION"}};
    cust_.primary_key = {"ds", "customer_id"};
  }

  // Prepares `job` for `days` of `ds` (the customers pinned) and stages
  // them.
  JobLayout Stage(const std::string& job, const DatasetSpec& ds,
                  const std::vector<std::string>& days) {
    JobLayout layout;
    layout.job_id = job;
    layout.items = {{&ds, days}};
    layout.pinned = {&customers_};
    absl::Status prepared = engine()->PrepareJob(layout);
    EXPECT_TRUE(prepared.ok()) << prepared;
    for (const std::string& day : days) {
      auto r = engine()->StagePartition(
          job, ds, day, {{&orders_, day}, {&customers_, std::nullopt}});
      EXPECT_TRUE(r.ok()) << day << ": " << r.status();
    }
    return layout;
  }

  // A query of (text, integer) rows as a map.
  std::map<std::string, int64_t> Counts(const std::string& sql) {
    std::map<std::string, int64_t> out;
    auto rows = warehouse().Query(sql);
    EXPECT_TRUE(rows.ok()) << rows.status() << "\n" << sql;
    if (!rows.ok()) return out;
    for (const WarehouseHarness::Row& row : *rows) {
      int64_t n = 0;
      EXPECT_TRUE(row[0].has_value() && row[1].has_value() &&
                  absl::SimpleAtoi(*row[1], &n))
          << sql;
      out[row[0].value_or("NULL")] = n;
    }
    return out;
  }

  // A query of (text, text) rows as the set of second values by first.
  std::map<std::string, std::set<std::string>> Groups(const std::string& sql) {
    std::map<std::string, std::set<std::string>> out;
    auto rows = warehouse().Query(sql);
    EXPECT_TRUE(rows.ok()) << rows.status() << "\n" << sql;
    if (!rows.ok()) return out;
    for (const WarehouseHarness::Row& row : *rows) {
      out[row[0].value_or("NULL")].insert(row[1].value_or("NULL"));
    }
    return out;
  }

  static int64_t At(const std::map<std::string, int64_t>& m,
                    const std::string& key) {
    auto it = m.find(key);
    return it == m.end() ? 0 : it->second;
  }

  // An engine's sum in whole cents, to compare with Cents() of plain SQL.
  static int64_t InCents(double sum) { return std::llround(sum * 100); }

  // `c` has min(count, limit) samples, each naming `column`=<one of
  // `values`>, no two the same value.
  static void ExpectSamplesName(const CountWithSamples& c, size_t limit,
                                const std::string& column,
                                const std::set<std::string>& values) {
    EXPECT_EQ(c.samples.size(),
              std::min<size_t>(limit, static_cast<size_t>(c.count)));
    std::set<std::string> named;
    for (const std::string& sample : c.samples) {
      bool found = false;
      for (const std::string& v : values) {
        const std::string field = absl::StrCat(column, "=", v);
        // "(customer_id=5, ..." or "..., customer_id=5)".
        if (absl::StrContains(sample, absl::StrCat("(", field, ",")) ||
            absl::StrContains(sample, absl::StrCat(" ", field, ",")) ||
            absl::StrContains(sample, absl::StrCat(" ", field, ")")) ||
            absl::StrContains(sample, absl::StrCat("(", field, ")"))) {
          found = named.insert(v).second;
        }
      }
      EXPECT_TRUE(found) << sample << " names no new " << column << " of "
                         << ::testing::PrintToString(values);
    }
  }

  // Every row of the fixture's source tables and of `relations`, in one
  // order, each value exactly (ExactText).
  std::vector<std::string> Dump(const std::vector<std::string>& relations) {
    const WarehouseHarness& h = warehouse();
    std::vector<std::string> out = Rows(absl::StrCat(
        "SELECT ", h.ExactText("order_id"), ", ", h.ExactText("order_date"),
        ", ", h.ExactText("customer_id"), ", ", h.ExactText("amount"),
        " FROM raw_orders ORDER BY order_id"));
    for (const std::string& r : Rows(absl::StrCat(
             "SELECT ", h.ExactText("customer_id"), ", ", h.ExactText("region"),
             " FROM dim_customers ORDER BY customer_id"))) {
      out.push_back(r);
    }
    for (const std::string& relation : relations) {
      for (const std::string& r : Rows(absl::StrCat(
               "SELECT ", h.ExactText("ds"), ", ", h.ExactText("customer_id"),
               ", ", h.ExactText("region"), ", ", h.ExactText("revenue"),
               " FROM ", relation, " ORDER BY ds, customer_id"))) {
        out.push_back(absl::StrCat(relation, ": ", r));
      }
    }
    return out;
  }

  DatasetSpec orders_, customers_, cust_;
};

INSTANTIATE_TEST_SUITE_P(Warehouses, EngineChecksConformanceTest,
                         ::testing::ValuesIn(testing::ConformanceWarehouses()),
                         testing::WarehouseParamName);

TEST_P(EngineChecksConformanceTest, StagedProfileMatchesPlainSql) {
  // The dimension as the job pins it, kept by plain SQL.
  Exec("CREATE TABLE customers_at_pin AS SELECT * FROM dim_customers");
  Stage("bf-1", cust_, kDays);
  // After the pin customer 2 leaves the published dimension and customer 5
  // joins it. Orphans of the pinned dataset are judged against the job's
  // snapshot, which still has 2 and not 5.
  Exec(
      "DELETE FROM dim_customers WHERE customer_id = 2; INSERT INTO "
      "dim_customers VALUES (5, 'US')");
  // The same table as a dataset the job does not pin: judged against the
  // published table as it is now. And a dataset not published yet: it
  // holds no keys.
  DatasetSpec current = customers_;
  current.name = "customers_now";
  DatasetSpec unpublished = customers_;
  unpublished.name = "customers_later";
  unpublished.table = "customers_later";
  ProfileRequest request;
  request.measures = {"revenue"};
  request.null_columns = {"region", "revenue"};
  request.references = {{"customer_id", &customers_, "customer_id"},
                        {"customer_id", &current, "customer_id"},
                        {"customer_id", &unpublished, "customer_id"}};
  request.types = true;
  auto profile = engine()->ProfileStaged("bf-1", cust_, request);
  ASSERT_TRUE(profile.ok()) << profile.status();

  // What the transform computes, from the orders and the pinned copy.
  const auto rows = Counts(
      "SELECT order_date, COUNT(DISTINCT customer_id) FROM raw_orders GROUP "
      "BY order_date");
  const auto cents = Counts(
      absl::StrCat("SELECT order_date, ", Cents("COALESCE(SUM(amount), 0)"),
                   " FROM raw_orders GROUP BY order_date"));
  auto missing_from = [&](const std::string& table) {
    return Groups(absl::StrCat(
        "SELECT DISTINCT order_date, CAST(customer_id AS TEXT) FROM "
        "raw_orders o WHERE NOT EXISTS (SELECT 1 FROM ",
        table, " k WHERE k.customer_id = o.customer_id)"));
  };
  const auto orphans_pinned = missing_from("customers_at_pin");
  const auto orphans_now = missing_from("dim_customers");
  const auto no_amount = Counts(
      "SELECT order_date, COUNT(*) FROM (SELECT order_date, customer_id FROM "
      "raw_orders GROUP BY order_date, customer_id HAVING COUNT(amount) = 0) "
      "AS g GROUP BY order_date");
  // The fixture is what it claims: orphans differ between the snapshot and
  // the published table, and one day has more than the samples shown.
  ASSERT_NE(orphans_pinned, orphans_now);
  ASSERT_EQ(orphans_pinned.at("2025-01-04").size(), 4u);
  ASSERT_EQ(no_amount.size(), 1u);

  ASSERT_EQ(profile->size(), rows.size());
  for (const auto& [day, p] : *profile) {
    SCOPED_TRACE(day);
    ASSERT_TRUE(rows.count(day));
    EXPECT_EQ(p.rows, rows.at(day));
    ASSERT_TRUE(p.sums().count("revenue"));
    EXPECT_EQ(InCents(p.sums().at("revenue")), cents.at(day));

    const auto pinned_it = orphans_pinned.find(day);
    const std::set<std::string> pinned_ids = pinned_it == orphans_pinned.end()
                                                 ? std::set<std::string>{}
                                                 : pinned_it->second;
    const auto now_it = orphans_now.find(day);
    const std::set<std::string> now_ids =
        now_it == orphans_now.end() ? std::set<std::string>{} : now_it->second;
    // A NULL region: the customer is not in the pinned dimension.
    ASSERT_TRUE(p.nulls().count("region"));
    EXPECT_EQ(p.nulls().at("region").count,
              static_cast<int64_t>(pinned_ids.size()));
    ExpectSamplesName(p.nulls().at("region"), 3, "customer_id", pinned_ids);
    for (const std::string& s : p.nulls().at("region").samples) {
      EXPECT_THAT(s, HasSubstr("region=NULL"));
    }
    ASSERT_TRUE(p.nulls().count("revenue"));
    EXPECT_EQ(p.nulls().at("revenue").count, At(no_amount, day));

    ASSERT_EQ(p.orphans().size(), 3u);
    EXPECT_EQ(p.orphans()[0].count, static_cast<int64_t>(pinned_ids.size()));
    ExpectSamplesName(p.orphans()[0], 3, "customer_id", pinned_ids);
    EXPECT_EQ(p.orphans()[1].count, static_cast<int64_t>(now_ids.size()));
    ExpectSamplesName(p.orphans()[1], 3, "customer_id", now_ids);
    // Every staged row has a customer: all are orphans of no table.
    EXPECT_EQ(p.orphans()[2].count, rows.at(day));
    EXPECT_EQ(p.orphans()[2].samples.size(),
              std::min<size_t>(3, static_cast<size_t>(rows.at(day))));

    EXPECT_TRUE(p.type_mismatches().empty());
  }
  // Customer 6's one order has no amount: its row is the NULL revenue.
  ASSERT_EQ(profile->at("2025-01-03").nulls().at("revenue").samples.size(), 1u);
  EXPECT_THAT(profile->at("2025-01-03").nulls().at("revenue").samples[0],
              HasSubstr("customer_id=6"));

  // Fewer samples when asked; none at all with 0.
  request.samples = 1;
  auto one = engine()->ProfileStaged("bf-1", cust_, request);
  ASSERT_TRUE(one.ok()) << one.status();
  ExpectSamplesName(one->at("2025-01-04").orphans()[0], 1, "customer_id",
                    orphans_pinned.at("2025-01-04"));
  request.samples = 0;
  auto none = engine()->ProfileStaged("bf-1", cust_, request);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->at("2025-01-04").orphans()[0].count, 4);
  EXPECT_THAT(none->at("2025-01-04").orphans()[0].samples, IsEmpty());
}

TEST_P(EngineChecksConformanceTest, StagedProfileNeedsContractColumns) {
  Stage("bf-1", cust_, {"2025-01-01"});
  ProfileRequest request;
  request.measures = {"amount"};  // an input's column, not the contract's
  EXPECT_EQ(engine()->ProfileStaged("bf-1", cust_, request).status().code(),
            absl::StatusCode::kInvalidArgument);
  request.measures.clear();
  request.null_columns = {"nope"};
  EXPECT_EQ(engine()->ProfileStaged("bf-1", cust_, request).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Nothing staged for a dataset of the job: a failed precondition.
  DatasetSpec other = cust_;
  other.name = "other";
  other.table = "other";
  JobLayout layout;
  layout.job_id = "bf-2";
  layout.items = {{&other, {"2025-01-01"}}};
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  auto nothing = engine()->ProfileStaged("bf-2", cust_, ProfileRequest{});
  EXPECT_EQ(nothing.status().code(), absl::StatusCode::kFailedPrecondition)
      << nothing.status();
}

TEST_P(EngineChecksConformanceTest, PublishedProfileCoversTheJobsPartitions) {
  JobLayout first =
      Stage("bf-1", cust_, {"2025-01-01", "2025-01-02", "2025-01-03"});
  absl::Status published = engine()->Publish(first);
  ASSERT_TRUE(published.ok()) << published;
  // A later job of 01-02 to 01-04: 01-01 is published but not its
  // partition, 01-04 is its partition but not published.
  Stage("bf-2", cust_, {"2025-01-02", "2025-01-03", "2025-01-04"});
  ProfileRequest request;
  request.measures = {"revenue"};
  request.null_columns = {"region"};  // ignored for published rows
  auto profile = engine()->ProfilePublished("bf-2", cust_, request);
  ASSERT_TRUE(profile.ok()) << profile.status();
  const auto rows = Counts(
      "SELECT ds, COUNT(*) FROM cust_rev WHERE ds IN ('2025-01-02', "
      "'2025-01-03', '2025-01-04') GROUP BY ds");
  const auto cents = Counts(absl::StrCat(
      "SELECT ds, ", Cents("COALESCE(SUM(revenue), 0)"),
      " FROM cust_rev WHERE ds IN ('2025-01-02', '2025-01-03', '2025-01-04') "
      "GROUP BY ds"));
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_EQ(profile->size(), rows.size());
  for (const auto& [day, p] : *profile) {
    SCOPED_TRACE(day);
    ASSERT_TRUE(rows.count(day));
    EXPECT_EQ(p.rows, rows.at(day));
    ASSERT_TRUE(p.sums().count("revenue"));
    EXPECT_EQ(InCents(p.sums().at("revenue")), cents.at(day));
  }

  // A measure the published table does not have is absent.
  Exec(
      "CREATE TABLE drifted (ds TEXT, customer_id INTEGER, region TEXT); "
      "INSERT INTO drifted VALUES ('2025-01-01', 1, 'EU'), ('2025-01-01', 2, "
      "'US'), ('2025-01-02', 3, NULL)");
  DatasetSpec drifted = cust_;
  drifted.name = "drifted";
  drifted.table = "drifted";
  JobLayout layout;
  layout.job_id = "bf-3";
  layout.items = {{&drifted, {"2025-01-01", "2025-01-03"}}};
  ASSERT_TRUE(engine()->PrepareJob(layout).ok());
  auto without = engine()->ProfilePublished("bf-3", drifted, request);
  ASSERT_TRUE(without.ok()) << without.status();
  ASSERT_EQ(without->size(), 1u);
  EXPECT_EQ(without->at("2025-01-01").rows,
            Int("SELECT COUNT(*) FROM drifted WHERE ds = '2025-01-01'"));
  EXPECT_THAT(without->at("2025-01-01").sums(), IsEmpty());

  // Before any publish the table does not exist: no rows.
  DatasetSpec later = cust_;
  later.table = "cust_rev_new";
  later.name = "cust_rev_new";
  Stage("bf-4", later, kDays);
  ASSERT_FALSE(Exists(Quote("cust_rev_new")));
  auto none = engine()->ProfilePublished("bf-4", later, request);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(*none, IsEmpty());
}

TEST_P(EngineChecksConformanceTest, AssertionsReadThePartitionsStagedRows) {
  Stage("bf-1", cust_, kDays);
  // Published rows of the same table must not be seen.
  Exec(
      "CREATE TABLE cust_rev (ds TEXT, customer_id INTEGER, region TEXT, "
      "revenue DOUBLE PRECISION); INSERT INTO cust_rev VALUES ('2025-01-01', "
      "9, NULL, 1)");
  const std::string staged = warehouse().StagingTable("bf-1", cust_.name);
  const std::vector<std::string> before = Dump({Quote("cust_rev"), staged});
  ASSERT_EQ(Count(staged),
            Int("SELECT COUNT(*) FROM (SELECT DISTINCT "
                "order_date, customer_id FROM raw_orders) AS t"));

  auto outside = engine()->RunAssertion(
      "bf-1", cust_,
      "SELECT * FROM cust_rev WHERE ds < :partition_start OR ds >= "
      ":partition_end OR ds <> :partition",
      3);
  ASSERT_TRUE(outside.ok()) << outside.status();
  ASSERT_EQ(outside->size(), kDays.size());
  for (const auto& [day, c] : *outside) {
    EXPECT_EQ(c.count, 0) << day;
    EXPECT_THAT(c.samples, IsEmpty()) << day;
  }

  // Every staged row of the partition, and only those.
  const auto rows = Counts(
      "SELECT order_date, COUNT(DISTINCT customer_id) FROM raw_orders GROUP "
      "BY order_date");
  auto all = engine()->RunAssertion(
      "bf-1", cust_,
      "SELECT ds, customer_id FROM cust_rev WHERE ds = :partition", 2);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), kDays.size());
  for (const auto& [day, c] : *all) {
    EXPECT_EQ(c.count, rows.at(day)) << day;
    EXPECT_EQ(c.samples.size(), 2u) << day;
    for (const std::string& s : c.samples) {
      EXPECT_THAT(s, HasSubstr(absl::StrCat("(ds='", day, "', customer_id=")));
    }
  }

  auto nulls = engine()->RunAssertion(
      "bf-1", cust_, "SELECT customer_id FROM cust_rev WHERE region IS NULL",
      1);
  ASSERT_TRUE(nulls.ok()) << nulls.status();
  const auto expected = Groups(
      "SELECT DISTINCT order_date, CAST(customer_id AS TEXT) FROM raw_orders o "
      "WHERE NOT EXISTS (SELECT 1 FROM dim_customers k WHERE k.customer_id = "
      "o.customer_id)");
  ASSERT_EQ(nulls->size(), kDays.size());
  for (const auto& [day, c] : *nulls) {
    SCOPED_TRACE(day);
    const auto it = expected.find(day);
    ASSERT_NE(it, expected.end());
    EXPECT_EQ(c.count, static_cast<int64_t>(it->second.size()));
    ASSERT_EQ(c.samples.size(), 1u);
    EXPECT_TRUE(it->second.count(c.samples[0].substr(
        13, c.samples[0].size() - 14)))  // "(customer_id=" ... ")"
        << c.samples[0];
  }
  EXPECT_EQ(nulls->at("2025-01-02").samples,
            std::vector<std::string>{"(customer_id=5)"});

  // Statements that would write are refused and change nothing, whatever
  // they would write to.
  for (const std::string& sql : std::vector<std::string>{
           "DELETE FROM cust_rev",
           "DELETE FROM raw_orders",
           "UPDATE raw_orders SET amount = 0 WHERE order_date = :partition",
           "INSERT INTO dim_customers VALUES (99, 'XX')",
           "WITH d AS (DELETE FROM raw_orders RETURNING order_id) SELECT "
           "order_id FROM d",
           "WITH d AS (DELETE FROM cust_rev RETURNING ds) SELECT ds FROM d",
           "DROP TABLE raw_orders",
       }) {
    SCOPED_TRACE(sql);
    auto writes = engine()->RunAssertion("bf-1", cust_, sql, 1);
    EXPECT_EQ(writes.status().code(), absl::StatusCode::kFailedPrecondition)
        << writes.status();
  }
  auto broken =
      engine()->RunAssertion("bf-1", cust_, "SELECT nope FROM cust_rev", 1);
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(broken.status().message()), HasSubstr("nope"));
  // The published table, the sources and the staged rows are intact.
  EXPECT_EQ(Dump({Quote("cust_rev"), staged}), before);
  // And the engine still answers.
  auto again = engine()->RunAssertion(
      "bf-1", cust_, "SELECT * FROM cust_rev WHERE ds = :partition", 0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->at("2025-01-04").count, rows.at("2025-01-04"));
}

TEST_P(EngineChecksConformanceTest,
       DescribeQueryStandsInForTablesNotPublishedYet) {
  DatasetSpec total;
  total.name = "total";
  total.kind = DatasetKind::kDerived;
  total.table = "total";
  total.columns = {{"ds", "TEXT"}, {"revenue", "DOUBLE PRECISION"}};
  const std::string sql =
      "SELECT t.ds, SUM(c.revenue) AS revenue, :partition AS p FROM cust_rev "
      "c JOIN total t ON t.ds = c.ds WHERE c.ds >= :partition_start GROUP BY "
      "t.ds";
  auto shape = engine()->DescribeQuery(sql, {&cust_, &total}, nullptr);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_THAT(shape->columns, ElementsAre("ds", "revenue", "p"));
  EXPECT_TRUE(shape->read_only);
  EXPECT_THAT(shape->parameters, ElementsAre(":partition", ":partition_start"));
  // A parameter used twice is one parameter.
  auto twice = engine()->DescribeQuery(
      "SELECT ds, :partition AS p FROM cust_rev WHERE ds = :partition",
      {&cust_}, nullptr);
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_THAT(twice->parameters, ElementsAre(":partition"));

  // Without the stand-in: no such table, named.
  auto missing = engine()->DescribeQuery(sql, {&total}, nullptr);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("cust_rev"));
  // A missing column is named; a table that exists is never stood in for,
  // whatever the contract says.
  DatasetSpec drifted = orders_;
  drifted.columns = {{"order_id", "INTEGER"}, {"refund", "DOUBLE PRECISION"}};
  auto column = engine()->DescribeQuery("SELECT refund FROM raw_orders",
                                        {&cust_, &drifted}, nullptr);
  EXPECT_EQ(column.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(column.status().message()), HasSubstr("refund"));
  auto syntax =
      engine()->DescribeQuery("SELEC ds FROM raw_orders", {}, nullptr);
  EXPECT_EQ(syntax.status().code(), absl::StatusCode::kInvalidArgument);

  // `own` reads its contract even when the table exists with other columns;
  // as a stand-in it would not.
  Exec("CREATE TABLE cust_rev (x INTEGER)");
  auto own = engine()->DescribeQuery("SELECT region FROM cust_rev", {}, &cust_);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_THAT(own->columns, ElementsAre("region"));
  auto published =
      engine()->DescribeQuery("SELECT region FROM cust_rev", {&cust_}, nullptr);
  EXPECT_EQ(published.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(published.status().message()), HasSubstr("region"));

  // Statements that write are described, not run, and not read-only.
  for (const std::string& write : std::vector<std::string>{
           "DELETE FROM raw_orders", "UPDATE raw_orders SET amount = 0",
           "INSERT INTO dim_customers VALUES (99, 'XX')",
           "DELETE FROM raw_orders WHERE order_date = :partition"}) {
    SCOPED_TRACE(write);
    auto w = engine()->DescribeQuery(write, {}, nullptr);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_FALSE(w->read_only);
  }
  auto with_param = engine()->DescribeQuery(
      "DELETE FROM raw_orders WHERE order_date = :partition", {}, nullptr);
  ASSERT_TRUE(with_param.ok()) << with_param.status();
  EXPECT_THAT(with_param->parameters, ElementsAre(":partition"));

  // Nothing was left behind or changed.
  EXPECT_EQ(Count("raw_orders"), 14);
  EXPECT_EQ(Count("dim_customers"), 3);
  EXPECT_FALSE(Exists(Quote("total")));
  auto columns = warehouse().Columns("cust_rev");
  ASSERT_TRUE(columns.ok()) << columns.status();
  EXPECT_THAT(*columns, ElementsAre(TableColumn{"x", "INTEGER", 0}));
  // Stand-ins do not outlive the call: the next one without them fails.
  auto after = engine()->DescribeQuery("SELECT ds FROM total", {}, nullptr);
  EXPECT_EQ(after.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(EngineChecksConformanceTest, DescribeTableReportsDeclaredColumns) {
  auto before = engine()->DescribeTable(cust_);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_FALSE(before->has_value());
  // The contract's columns, a column it does not have, and one whose type
  // differs from the contract's.
  Exec(
      "CREATE TABLE cust_rev (ds TEXT, customer_id INTEGER, region "
      "INTEGER, revenue DOUBLE PRECISION, note TEXT, n BIGINT)");
  auto after = engine()->DescribeTable(cust_);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_TRUE(after->has_value());
  auto declared = warehouse().Columns("cust_rev");
  ASSERT_TRUE(declared.ok()) << declared.status();
  ASSERT_EQ((*after)->size(), declared->size());
  for (size_t i = 0; i < declared->size(); ++i) {
    EXPECT_EQ((**after)[i].name, (*declared)[i].name) << i;
    EXPECT_TRUE(absl::EqualsIgnoreCase((**after)[i].type, (*declared)[i].type))
        << (**after)[i].name << ": " << (**after)[i].type << " vs "
        << (*declared)[i].type;
  }
  // A column of the contract's type is described in the contract's words.
  EXPECT_EQ((**after)[0].type, "TEXT");
  EXPECT_EQ((**after)[1].type, "INTEGER");
  EXPECT_EQ((**after)[3].type, "DOUBLE PRECISION");
  EXPECT_TRUE(absl::EqualsIgnoreCase((**after)[2].type, "INTEGER"));
  EXPECT_TRUE(absl::EqualsIgnoreCase((**after)[5].type, "BIGINT"));
  // Another dataset's table is not this one.
  DatasetSpec other = cust_;
  other.table = "cust_rev_new";
  auto none = engine()->DescribeTable(other);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
}

}  // namespace
}  // namespace storage_engine_conformance_checks_test
}  // namespace backfill
