// The engine conformance suites: what every Engine must do, observed on a
// real warehouse through a WarehouseHarness (warehouse_harness.h) and
// checked with plain SQL over the fixture, never with the engine's own
// output. The suites are in tests/storage_engine_conformance_*_test.cc;
// each is parameterised over ConformanceWarehouses(), so a new engine is
// one harness class and one line there.
//
// The fixture SQL of the suites runs unchanged on SQLite and PostgreSQL 15:
//   - types both accept with the same meaning: TEXT, INTEGER, BIGINT,
//     DOUBLE PRECISION (not REAL, which is 4 bytes on PostgreSQL); dates
//     are TEXT 'YYYY-MM-DD';
//   - standard SQL: no functions of one warehouse only (strftime, printf,
//     TOTAL, json_*; where a test needs one, a harness hook writes it),
//     single-quoted strings, || to concatenate, CAST instead of affinity,
//     IS [NOT] DISTINCT FROM instead of IS, CASE instead of two-argument
//     MIN/MAX, an alias on every subquery in FROM, NULLS FIRST/LAST where
//     NULLs are sorted;
//   - numbers computed by the engine are compared with numbers computed by
//     plain SQL as integers or rounded values (Cents), never as float text,
//     whose formatting differs between client libraries.
// Transform parameters are written :partition_start, :partition_end,
// :partition (the engines bind them).
//
// ConformanceTest, the suites' base fixture, makes a fresh harness per test
// (SetUp) and destroys it after (TearDown). Not thread-safe beyond what
// WarehouseHarness allows.

#ifndef BACKFILL_TESTS_TESTING_ENGINE_CONFORMANCE_H_
#define BACKFILL_TESTS_TESTING_ENGINE_CONFORMANCE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/ports/engine.h"
#include "gtest/gtest.h"
#include "tests/testing/postgres_warehouse_harness.h"
#include "tests/testing/warehouse_harness.h"

namespace backfill::testing {

// The warehouses every conformance suite runs on, one factory per engine.
inline std::vector<WarehouseHarnessFactory> ConformanceWarehouses() {
  return {SqliteWarehouse(), PostgresWarehouse()};
}

// The test parameter name of a warehouse: its harness's name ("Sqlite").
inline std::string WarehouseParamName(
    const ::testing::TestParamInfo<WarehouseHarnessFactory>& info) {
  return info.param.name;
}

class ConformanceTest
    : public ::testing::TestWithParam<WarehouseHarnessFactory> {
 protected:
  void SetUp() override {
    auto harness = GetParam().make();
    ASSERT_TRUE(harness.ok()) << harness.status();
    harness_ = *std::move(harness);
    ASSERT_NE(harness_->engine(), nullptr);
  }

  void TearDown() override { harness_.reset(); }

  WarehouseHarness& warehouse() { return *harness_; }
  Engine* engine() { return harness_->engine(); }

  // A daemon restart with `connections` connections (see Reopen).
  void Restart(int connections = WarehouseHarness::kDefaultConnections) {
    absl::Status s = harness_->Reopen(connections);
    ASSERT_TRUE(s.ok()) << s;
  }

  // Runs `sql` (one or more statements) on the harness's connection.
  void Exec(const std::string& sql) {
    absl::Status s = harness_->Exec(sql);
    ASSERT_TRUE(s.ok()) << s << "\n" << sql;
  }

  // The rows of a query, each as "a|b|c" (NULL as "NULL").
  std::vector<std::string> Rows(const std::string& sql) {
    std::vector<std::string> out;
    auto rows = harness_->Query(sql);
    EXPECT_TRUE(rows.ok()) << rows.status() << "\n" << sql;
    if (!rows.ok()) return out;
    for (const WarehouseHarness::Row& row : *rows) {
      std::vector<std::string> cols;
      for (const std::optional<std::string>& v : row) {
        cols.push_back(v.has_value() ? *v : "NULL");
      }
      out.push_back(absl::StrJoin(cols, "|"));
    }
    return out;
  }

  // The first column of each row of a query (NULL as "NULL").
  std::vector<std::string> Strings(const std::string& sql) {
    std::vector<std::string> out;
    auto rows = harness_->Query(sql);
    EXPECT_TRUE(rows.ok()) << rows.status() << "\n" << sql;
    if (!rows.ok()) return out;
    for (const WarehouseHarness::Row& row : *rows) {
      out.push_back(row.empty() || !row[0].has_value() ? "NULL" : *row[0]);
    }
    return out;
  }

  // The integer a query returns in its first row and column (-1 after a
  // failed expectation).
  int64_t Int(const std::string& sql) {
    auto rows = harness_->Query(sql);
    EXPECT_TRUE(rows.ok()) << rows.status() << "\n" << sql;
    if (!rows.ok()) return -1;
    EXPECT_FALSE(rows->empty() || (*rows)[0].empty() || !(*rows)[0][0])
        << "no value: " << sql;
    if (rows->empty() || (*rows)[0].empty() || !(*rows)[0][0]) return -1;
    int64_t n = 0;
    EXPECT_TRUE(absl::SimpleAtoi(*(*rows)[0][0], &n)) << *(*rows)[0][0] << "\n"
                                                      << sql;
    return n;
  }

  // The number a query returns in its first row and column, parsed from
  // its text (-1 after a failed expectation).
  double Double(const std::string& sql) {
    auto rows = harness_->Query(sql);
    EXPECT_TRUE(rows.ok()) << rows.status() << "\n" << sql;
    if (!rows.ok() || rows->empty() || (*rows)[0].empty() || !(*rows)[0][0]) {
      ADD_FAILURE() << "no value: " << sql;
      return -1;
    }
    double v = 0;
    EXPECT_TRUE(absl::SimpleAtod(*(*rows)[0][0], &v)) << *(*rows)[0][0];
    return v;
  }

  // Rows of `relation` (an SQL reference, e.g. Quote(table) or
  // StagingTable(...)).
  int64_t Count(const std::string& relation) {
    return Int(absl::StrCat("SELECT COUNT(*) FROM ", relation));
  }

  bool Exists(const std::string& relation) {
    auto e = harness_->Exists(relation);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() && *e;
  }

  // The names of the warehouse objects of the job's staging.
  std::vector<std::string> StagingObjects(const std::string& job_id) {
    auto names = harness_->StagingObjects(job_id);
    EXPECT_TRUE(names.ok()) << names.status();
    return names.ok() ? *names : std::vector<std::string>{};
  }

  static std::string Quote(const std::string& name) {
    return WarehouseHarness::Quote(name);
  }

  // An amount as whole cents: an integer that compares the same on every
  // warehouse, whatever order a sum was added up in.
  static std::string Cents(const std::string& expr) {
    return absl::StrCat("CAST(ROUND((", expr, ") * 100) AS BIGINT)");
  }

  std::unique_ptr<WarehouseHarness> harness_;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_ENGINE_CONFORMANCE_H_
