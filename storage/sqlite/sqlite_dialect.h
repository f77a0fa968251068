// SqliteDialect: the SQL engine's Dialect (storage/sql/dialect.h) for the
// SQLite warehouse. Everything lives in the one file's main schema: a job's
// artifacts are tables named `_bf_stage_<job>_<dataset>`,
// `_bf_parts_<job>_<dataset>` (value, lo, hi), `_bf_keys_<job>_<dataset>`,
// `_bf_pin_<job>_<dataset>` and the rollback copy `_bf_prev_<job>_<dataset>`
// (`<job>` is the job id with every character outside [A-Za-z0-9] replaced
// by '_'); temporary objects live in the connection's temp schema.
// Placeholders are `?N`. Membership is sqlite_membership.h's: the
// `_bf_partition_of` function every connection registers, behind a
// candidate range an index on the partition column serves.
//
// Stateless; thread-safe.

#ifndef BACKFILL_STORAGE_SQLITE_SQLITE_DIALECT_H_
#define BACKFILL_STORAGE_SQLITE_SQLITE_DIALECT_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/sql/dialect.h"

namespace backfill::sqlite {

class SqliteDialect : public sql::Dialect {
 public:
  std::string product() const override { return "SQLite"; }
  std::string Name(const sql::Relation& relation) const override;
  std::string Placeholder(int index) const override;

  sql::Relation Published(const DatasetSpec& dataset) const override;
  sql::Relation Stage(const std::string& job_id,
                      const std::string& dataset) const override;
  sql::Relation Parts(const std::string& job_id,
                      const std::string& dataset) const override;
  sql::Relation Keys(const std::string& job_id,
                     const std::string& dataset) const override;
  sql::Relation Pin(const std::string& job_id,
                    const DatasetSpec& dataset) const override;
  sql::Relation Copies() const override;
  sql::Relation Scratch(const std::string& name) const override;
  sql::Relation Meta() const override;
  sql::Relation Publications() const override;
  sql::Relation Rollbacks() const override;
  // The change signal's tables and triggers (sqlite_change_triggers.h).
  sql::Relation ChangeTables() const override;
  sql::Relation ChangeCounts() const override;
  sql::Relation FingerprintCache() const override;
  absl::StatusOr<std::vector<std::string>> ChangeTriggerSql(
      sql::Connection* conn, const DatasetSpec& dataset,
      const std::string& epoch) const override;
  absl::StatusOr<std::string> ChangeIdentity(
      sql::Connection* conn, const DatasetSpec& dataset) const override;
  absl::StatusOr<std::string> ChangeBucket(
      const DatasetSpec& dataset, const std::string& partition) const override;
  // Drops the job's `_bf_stage_`, `_bf_parts_`, `_bf_pin_` and `_bf_keys_`
  // tables.
  absl::Status DropJobSpace(sql::Connection* conn,
                            const std::string& job_id) const override;
  // Parses the job ids back from the names of those tables.
  absl::StatusOr<std::vector<std::string>> ListJobSpaces(
      sql::Connection* conn) const override;

  // Declared like the table, with its keys and indexes
  // (sqlite_pin_snapshot.h).
  absl::StatusOr<std::vector<std::string>> PinStatements(
      sql::Connection* conn, const sql::Relation& table,
      const sql::Relation& snapshot) const override;

  absl::StatusOr<std::string> ColumnDefinitions(
      const DatasetSpec& dataset) const override;
  std::string Total(std::string_view expr) const override;
  std::string QuoteValue(std::string_view expr) const override;
  std::string RowText(const DatasetSpec& dataset,
                      std::string_view alias) const override;
  std::optional<std::string> TypeMismatch(
      std::string_view column, const std::string& type) const override;
  std::string SampleLiteral(const sql::Cell& cell) const override;
  std::string InKeys(const DatasetSpec& dataset, const sql::Relation& keys,
                     std::string_view qualifier) const override;

  absl::StatusOr<std::unique_ptr<sql::Membership>> MembershipOf(
      sql::Connection* conn, const DatasetSpec& dataset,
      std::string_view qualifier) const override;
  absl::StatusOr<Proven> WriteProven(
      sql::Connection* conn, const DatasetSpec& dataset,
      const sql::Relation& source, const std::optional<sql::Relation>& target,
      const std::string& columns, const std::string& partition) const override;
};

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_SQLITE_DIALECT_H_
