// PgDialect: the SQL engine's Dialect (storage/sql/dialect.h) for the
// PostgreSQL warehouse. Published tables live in the base schema (the
// connection's current_schema() when the engine opened); a job's artifacts
// in a schema of its own, `_bf_<job>` (JobSchema): `_bf_stage_<dataset>`,
// `_bf_parts_<dataset>` (value, v1..vn: the values of its membership
// condition's parameters), `_bf_keys_<dataset>` and a snapshot named like
// each pinned table; rollback copies in `_bf` as `prev_<job>_<dataset>`;
// temporary objects in the session's pg_temp. Placeholders are `$N`.
// Membership is pg_membership.h's: typed ranges on DATE, TIMESTAMP and
// TIMESTAMPTZ columns, byte-order ranges and `_bf._bf_partition_of` on
// TEXT ones, whose kinds and collation come from the contract and from
// the published table (read once per table and kept).
//
// Thread-safety: thread-safe; the kept collations have their own mutex.

#ifndef BACKFILL_STORAGE_POSTGRES_PG_DIALECT_H_
#define BACKFILL_STORAGE_POSTGRES_PG_DIALECT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_membership.h"
#include "storage/sql/dialect.h"

namespace backfill::postgres {

// The schema of the warehouse's own records (Meta, Publications,
// Rollbacks), its rollback copies and its membership functions.
inline constexpr char kServiceSchema[] = "_bf";

// The advisory lock key (pg_advisory_xact_lock) that serializes the
// creation of the service schema and claims (LockRecords): "bf" in ASCII,
// then a version.
inline constexpr int64_t kServiceLockKey = 0x62660001;

class PgDialect : public sql::Dialect {
 public:
  // `base`: the schema of the published tables, unquoted;
  // `default_byte_ordered`: the database's default collation orders text
  // by bytes.
  PgDialect(std::string base, bool default_byte_ordered)
      : base_(std::move(base)), default_byte_ordered_(default_byte_ordered) {}

  // PostgreSQL's longest name (NAMEDATALEN - 1): a longer one is cut.
  static constexpr size_t kMaxName = 63;
  // The schema of a job's staging ("_bf_bf_12" for "bf-12"), unquoted.
  static std::string JobSchema(const std::string& job_id);
  // The column of `ds` that the tables the service creates for it declare
  // COLLATE "C": its TEXT time partition column, whose membership ranges
  // compare bytes, so that an index on it serves them. "" when none.
  static std::string ByteOrderColumn(const DatasetSpec& ds);

  const std::string& base() const { return base_; }

  // The partition columns of `ds` (quoted, with `qualifier` before them)
  // and their kinds: from the contract for a derived dataset, from the
  // published table for a source.
  absl::StatusOr<PgPartitionColumns> ColumnsOf(
      PgConnection* conn, const DatasetSpec& ds,
      const std::string& qualifier) const;

  // Creates the service schema and its records (storage/sql/markers.h)
  // where they do not exist: a transaction of its own under LockRecords,
  // so that daemons starting on one warehouse at once do not trip over
  // each other's CREATE.
  absl::Status CreateServiceSchema(sql::Connection* conn) const;

  std::string product() const override { return "PostgreSQL"; }
  std::string Placeholder(int index) const override;
  absl::Status CheckName(const std::string& name,
                         const std::string& what) const override;

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
  // The change signal's tables (in the service schema) and triggers
  // (pg_change_triggers.h); a bucket is the partition itself.
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
  // The job's schema (JobSchema).
  absl::Status CreateJobSpace(sql::Connection* conn,
                              const std::string& job_id) const override;
  // Drops the job's schema, CASCADE.
  absl::Status DropJobSpace(sql::Connection* conn,
                            const std::string& job_id) const override;
  // Parses the job ids back from the names of the job schemas.
  absl::StatusOr<std::vector<std::string>> ListJobSpaces(
      sql::Connection* conn) const override;

  absl::StatusOr<std::string> ColumnDefinitions(
      const DatasetSpec& dataset) const override;
  std::string Total(std::string_view expr) const override;
  std::string QuoteValue(std::string_view expr) const override;
  std::string RowText(const DatasetSpec& dataset,
                      std::string_view alias) const override;
  std::string SampleLiteral(const sql::Cell& cell) const override;
  std::string TimePlaceholder(int index) const override;
  sql::Param TimeValue(absl::Time when) const override;
  std::string BoolPlaceholder(int index) const override;
  sql::Param BoolValue(bool value) const override;
  std::string LockingRead(bool exclusive) const override;
  // " CASCADE": another session's temporary views over the list go too.
  std::string DropDependents() const override;
  std::string TimeType() const override;
  std::string BoolType() const override;
  // SET LOCAL search_path TO the base schema.
  absl::Status ScopeClientSql(sql::Connection* conn) const override;
  // NormalizeContract (pg_contract.h): "integer" for INT.
  absl::StatusOr<std::vector<std::string>> CatalogTypes(
      sql::Connection* conn, const DatasetSpec& dataset) const override;
  // pg_advisory_xact_lock(kServiceLockKey).
  absl::Status LockRecords(sql::Connection* conn) const override;
  std::string InKeys(const DatasetSpec& dataset, const sql::Relation& keys,
                     std::string_view qualifier) const override;

  absl::StatusOr<std::unique_ptr<sql::Membership>> MembershipOf(
      sql::Connection* conn, const DatasetSpec& dataset,
      std::string_view qualifier) const override;
  absl::StatusOr<Proven> WriteProven(
      sql::Connection* conn, const DatasetSpec& dataset,
      const sql::Relation& source, const std::optional<sql::Relation>& target,
      const std::string& columns, const std::string& partition) const override;

 private:
  const std::string base_;
  const bool default_byte_ordered_;
  // By published table: whether its time partition column orders by bytes
  // (read once the table exists).
  mutable absl::Mutex collation_mu_;
  mutable std::map<std::string, bool> byte_ordered_tables_
      ABSL_GUARDED_BY(collation_mu_);
};

}  // namespace backfill::postgres

#endif  // BACKFILL_STORAGE_POSTGRES_PG_DIALECT_H_
