// SqliteHooks: what the SQLite engine adds to the shared publish, rollback
// (sql::ReplaceHooks) and staging (sql::StagingHooks) of storage/sql/:
//   - the warehouse file's identity, checked before a write starts and
//     just before it commits;
//   - the partition statistics of a table replaced, kept right in the
//     same transaction (sqlite_partition_stats.h; its fingerprints follow
//     the change triggers, sqlite_change_triggers.h), an index on its
//     partition column,
//     and the staged rows checked against the job's partition list before
//     they are published;
//   - an index on a staging table's partition column;
//   - a transform's objects (the job's views and the output table) kept in
//     the connection's temp schema from one partition of the job's dataset
//     to the next (no schema change per partition, and its cached
//     statements stay compiled), made again when anything they are made of
//     differs; the transform compiled once over them, then again in a
//     Sandbox (sqlite_sandbox.h) that lets it read its declared inputs and
//     the job's objects only and call the functions of the allow-list.
//
// Ownership: borrows the dialect; the engine owns the hooks and the
// connections they see.
// Thread-safety: thread-safe. What a connection's transform compiled to is
// kept by connection: the map is guarded, an entry is used only by the
// thread holding its connection's lease.

#ifndef BACKFILL_STORAGE_SQLITE_SQLITE_HOOKS_H_
#define BACKFILL_STORAGE_SQLITE_SQLITE_HOOKS_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/sql/dialect.h"
#include "storage/sql/replace_hooks.h"
#include "storage/sql/staging.h"
#include "storage/sqlite/sqlite_connection.h"

namespace backfill::sqlite {

class SqliteHooks : public sql::ReplaceHooks, public sql::StagingHooks {
 public:
  // `check_file`: FAILED_PRECONDITION when the warehouse file is not the
  // one opened any more; `now`: the time statistics are stamped with.
  SqliteHooks(const sql::Dialect* dialect,
              std::function<absl::Status()> check_file,
              std::function<absl::Time()> now)
      : dialect_(*dialect),
        check_file_(std::move(check_file)),
        now_(std::move(now)) {}

  absl::Status CheckWarehouse() override { return check_file_(); }

  // ---- Staging
  // ---------------------------------------------------------------
  absl::Status StageTableReady(sql::Connection* conn,
                               const sql::Relation& stage,
                               const DatasetSpec& ds) override;
  absl::StatusOr<sql::CompiledTransform> OpenTransform(
      sql::Connection* conn, const sql::TransformSetup& setup) override;
  absl::StatusOr<std::vector<std::string>> VetTransform(
      sql::Connection* conn, const sql::TransformSetup& setup,
      const sql::CompiledTransform& transform,
      const sql::Params& params) override;
  // The output table stays for the next partition, empty.
  // Keeps the table of the last group when `create` is what made it, and
  // empties it.
  absl::Status PrepareGroupTable(sql::Connection* conn,
                                 const std::string& create) override;
  absl::Status CloseTransform(sql::Connection* conn,
                              int64_t rows_staged) override;

  // ---- Publish and rollback -------------------------------------------------
  absl::StatusOr<std::function<absl::Status()>> BeforeReplacing(
      sql::Connection* conn, const DatasetSpec& ds,
      const std::vector<std::string>& partitions) override;
  absl::Status PrepareTable(sql::Connection* conn,
                            const DatasetSpec& ds) override;
  absl::Status CheckStaged(sql::Connection* conn, const DatasetSpec& ds,
                           const sql::Relation& stage,
                           const sql::Relation& parts,
                           const std::string& where) override;

 private:
  // A transform as compiled over a connection's objects: valid while the
  // connection's scratch_key() is the one it was compiled with.
  struct Compiled {
    sql::CompiledTransform transform;
    std::vector<std::string> outputs;
  };
  Compiled& CompiledOn(const SqliteConnection* conn);

  const sql::Dialect& dialect_;
  const std::function<absl::Status()> check_file_;
  const std::function<absl::Time()> now_;
  absl::Mutex mu_;
  std::map<const SqliteConnection*, Compiled> compiled_ ABSL_GUARDED_BY(mu_);
};

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_SQLITE_HOOKS_H_
