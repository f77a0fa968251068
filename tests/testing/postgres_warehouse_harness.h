// PostgresWarehouseHarness: the WarehouseHarness (warehouse_harness.h) of
// the PostgreSQL engine. One throwaway server per test binary
// (postgres_test_server.h, started on first use, stopped at exit); a
// database of its own per harness, created with bytewise text order (C
// collation) and dropped by the destructor; a PostgresEngine opened on it;
// and a plain libpq connection of the harness's own for Exec and Query.
//
// Ownership and thread-safety as WarehouseHarness says.

#ifndef BACKFILL_TESTS_TESTING_POSTGRES_WAREHOUSE_HARNESS_H_
#define BACKFILL_TESTS_TESTING_POSTGRES_WAREHOUSE_HARNESS_H_

#include <memory>
#include <string>
#include <vector>

#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_engine.h"
#include "tests/testing/warehouse_harness.h"

namespace backfill::testing {

class PostgresWarehouseHarness : public WarehouseHarness {
 public:
  static constexpr char kName[] = "Postgres";
  static absl::StatusOr<std::unique_ptr<PostgresWarehouseHarness>> Create();
  ~PostgresWarehouseHarness() override;

  std::string name() const override { return kName; }
  Engine* engine() override { return engine_.get(); }
  absl::Status Reopen(int connections) override;
  absl::StatusOr<std::unique_ptr<Engine>> OpenAnother() override;
  absl::Status Exec(const std::string& sql) override;
  absl::StatusOr<std::vector<Row>> Query(const std::string& sql) override;
  absl::StatusOr<bool> Exists(const std::string& relation) override;
  absl::StatusOr<std::vector<TableColumn>> Columns(
      const std::string& table) override;
  std::string StagingTable(const std::string& job_id,
                           const std::string& dataset) const override;
  std::string RollbackCopyTable(const std::string& job_id,
                                const std::string& dataset) const override;
  absl::StatusOr<std::vector<std::string>> StagingObjects(
      const std::string& job_id) override;
  // Markers with an empty store id: what ClaimWarehouse stamps.
  absl::Status AddLegacyPublications(
      const std::vector<std::string>& jobs) override;
  // _bf.<which>.
  std::string RecordsTable(const std::string& which) const override;
  // PostgresEngine::SetPredicateTimeout.
  void SetPredicateTimeout(absl::Duration timeout) override;
  std::string ExactText(const std::string& expr) const override;
  std::string JsonArrayLength(const std::string& json) const override;
  std::string JsonArrayElements(const std::string& json) const override;

 private:
  PostgresWarehouseHarness(std::string database, std::string dsn)
      : database_(std::move(database)), dsn_(std::move(dsn)) {}

  const std::string database_;
  const std::string dsn_;
  int connections_ = kDefaultConnections;
  std::unique_ptr<postgres::PgConnection> conn_;
  std::unique_ptr<postgres::PostgresEngine> engine_;
};

// The factory for ConformanceWarehouses().
WarehouseHarnessFactory PostgresWarehouse();

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_POSTGRES_WAREHOUSE_HARNESS_H_
