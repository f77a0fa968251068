// SqliteEngine: the embedded warehouse, one SQLite file
// (`<data-dir>/warehouse.db`) in WAL mode, where datasets live and
// transforms run. It is the SQL engine of storage/sql/ (sql::SqlEngine)
// over SqliteDialect and a pool of SqliteConnections; what it adds is
// SQLite's own: the file and its identity, WAL mode and its checkpointer,
// the statement sandbox for transforms and predicates (SqliteHooks,
// sqlite_sandbox.h), the partition statistics and fingerprint caches, and
// a diff over indexed TEMP tables.
//
// Artifacts a job leaves in the warehouse, all with reserved names (`<job>`
// is the job id with every character outside [A-Za-z0-9] replaced by '_';
// every identifier is quoted with QuoteIdentifier):
//
//   _bf_stage_<job>_<dataset>  staged rows; the contract's columns and types
//   _bf_parts_<job>_<dataset>  (value, lo, hi): the job's partitions of the
//                              dataset with their candidate ranges
//   _bf_pin_<job>_<dataset>    snapshot of a pinned (`mapping: all`) input,
//                              taken once by PrepareJob (kept on restart)
//   _bf_keys_<job>_<dataset>   ("key"): the entity keys of a job that
//                              replaces only some keys' rows of the dataset
//                              (rebuilt by every PrepareJob)
//   _bf_prev_<job>_<dataset>   the rollback copy: the published rows a
//                              Publish replaced, kept for Rollback
//                              (DropStaging keeps them; Rollback and
//                              DropRollbackCopies, i.e. retention, drop them)
//   _bf_publications           (store_id, job_id, published_at): written in
//                              Publish's transaction, so IsPublished survives
//                              a crash between the warehouse commit and the
//                              state store's record of it. The store id keeps
//                              a recreated state store's "bf-1" from passing
//                              for the "bf-1" another store published.
//   _bf_rollbacks              (store_id, job_id, rolled_back_at,
//                              requested_by, reason, forced, with_jobs):
//                              written in Rollback's transaction, so that a
//                              crash before the state store records the
//                              rollback is recovered and nothing is restored
//                              twice.
//   _bf_meta                   (key, value): owner_store_id, the state store
//                              that claimed the warehouse.
//   _bf_partition_stats,       rows per partition of each dataset's table
//   _bf_partition_stats_meta   and what they were counted from: see
//                              storage/sqlite/sqlite_partition_stats.h for the
//                              change signal, the cost of a refresh and the
//                              staleness bound. Publish and Rollback keep
//                              them exact for the partitions they replace,
//                              in their own transaction.
//   _bf_change_tables,         the change signal of the tables read as
//   _bf_change_counts,         inputs and the fingerprints cached against
//   _bf_fingerprints           it, with the triggers `_bf_chg_*` on those
//                              tables: storage/sql/change_signal.h and
//                              storage/sqlite/sqlite_change_triggers.h.
//
// The engine remembers the identity (device, inode) of the file it opened
// and checks it before each step and inside the publish transaction before
// committing: a warehouse removed or replaced while the daemon runs fails
// the step instead of "publishing" into a file nobody reads.
//
// Every statement that selects rows by partition uses the membership
// conditions of storage/sqlite/sqlite_membership.h (the one definition of
// partition membership, evaluated by an SQL function each connection
// registers), and Publish and Rollback count, per partition, that they
// delete exactly the rows that belong to it (and Rollback that it restores
// exactly the copy's rows of it).
//
// Staging (storage/sql/staging.h) reads its inputs through TEMP VIEWs that
// shadow the table names the transform uses (SQLite resolves unqualified
// names in the temp schema first), kept on the connection from one
// partition of a job's dataset to the next. Its first transaction is a
// deferred (read) one that writes only the temp schema, which takes no
// lock on the warehouse, so many workers run transforms concurrently (WAL
// readers); its second is BEGIN IMMEDIATE, the only one that holds the
// (single) writer lock. The pool's connections share a sqlite::WriterLock,
// so the engine's own writers queue for it in the process; busy_timeout
// (10 s) makes them wait for other processes' writers.
//
// Ownership: the engine owns its connections, its dialect and its hooks.
// JobLayouts handed to PrepareJob are copied, but their DatasetSpec
// pointers are kept (sql_engine.h).
//
// Thread-safety: thread-safe. A pool of `connections` connections serves
// concurrent calls (each call leases one connection for its duration).

#ifndef BACKFILL_STORAGE_SQLITE_SQLITE_ENGINE_H_
#define BACKFILL_STORAGE_SQLITE_SQLITE_ENGINE_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/ports/engine.h"
#include "storage/sql/connection.h"
#include "storage/sql/sql_engine.h"
#include "storage/sqlite/sqlite_dialect.h"

namespace backfill {

namespace sqlite {
class Database;
class SqliteConnection;
class SqliteHooks;
class WalCheckpointer;
}  // namespace sqlite

class SqliteEngine : public sql::SqlEngine {
 public:
  // Opens the warehouse file at `warehouse_path` with `connections` pooled
  // connections (at least 1; ":memory:" forces 1, since every in-memory
  // connection is a separate database). A missing file is created, unless
  // `create_if_missing` is false (then NOT_FOUND, as for an empty file of 0
  // bytes, which is left unwritten). The file is switched to WAL mode (and
  // stays in it), which is logged when it was in another mode.
  static absl::StatusOr<std::unique_ptr<SqliteEngine>> Open(
      const std::string& warehouse_path, int connections,
      bool create_if_missing = true);

  ~SqliteEngine() override;

  // Exact, through the membership pre-filter (an index on the partition
  // column makes it cost the rows of those partitions); afterwards, when the
  // stored statistics claim to be current but disagree with these exact
  // counts, drops them so the next PartitionStatistics counts in full.
  absl::StatusOr<std::vector<int64_t>> CountRowsInPartitions(
      const DatasetSpec& dataset,
      const std::vector<std::string>& partitions) override;
  // Refreshed as storage/sqlite/sqlite_partition_stats.h says, under the policy
  // set with SetStatsPolicy (default: counts older than an hour are
  // recounted).
  absl::StatusOr<PartitionStats> PartitionStatistics(
      const DatasetSpec& dataset) override;
  // Copies the partition's published and staged rows into two TEMP tables
  // of its connection, indexed by the primary key, and compares them with
  // joins on the key (values with IS NOT); without a key, as multisets by a
  // GROUP BY over every column. One read transaction: no warehouse lock.
  absl::StatusOr<PartitionDiff> DiffPartition(const std::string& job_id,
                                              const DatasetSpec& dataset,
                                              const std::string& partition,
                                              int sample_limit) override;
  // Shares the connection, its TEMP tables and a read transaction among
  // up to 256 partitions at a time.
  absl::StatusOr<std::vector<absl::StatusOr<PartitionDiff>>> DiffPartitions(
      const std::string& job_id, const DatasetSpec& dataset,
      absl::Span<const std::string> partitions, int sample_limit) override;
  // Runs on a connection of its own opened read-only with PRAGMA
  // query_only=ON (":memory:": the pool's connection, query_only for the
  // call), inside a ReadSandbox (storage/sqlite/sqlite_sandbox.h) that lets
  // the statement read only the dataset's table. The predicate is checked
  // by CheckPredicate (core/plan/affected_by.h) and spliced into the statement
  // of storage/sql/predicates.h, which must prepare as exactly one
  // read-only statement without parameters. One predicate runs at a time;
  // it is stopped after the predicate timeout (SetPredicateTimeout, default
  // 20 s, below backfillctl's default RPC deadline) or by Interrupt().
  absl::StatusOr<std::vector<std::string>> PartitionsMatching(
      const DatasetSpec& dataset, const std::string& predicate,
      size_t max_partitions) override;
  void Interrupt() override;
  // The warehouse file is there, the one opened, and not shorter than its
  // header says (nor without one).
  absl::Status Probe() override;

  // Reserved table names (unquoted), exposed for tests and tooling.
  static std::string StageTable(const std::string& job_id,
                                const std::string& dataset);
  static std::string PartsTable(const std::string& job_id,
                                const std::string& dataset);
  static std::string PinTable(const std::string& job_id,
                              const std::string& dataset);
  static std::string PrevTable(const std::string& job_id,
                               const std::string& dataset);
  // The entity keys of a job's dataset (an item with keys), one row each.
  static std::string KeysTable(const std::string& job_id,
                               const std::string& dataset);

 private:
  class Lease;

  explicit SqliteEngine(std::vector<std::unique_ptr<sqlite::Database>> conns);

  // Creates _bf_meta and _bf_publications (renaming markers of a version
  // that did not name their store).
  static absl::Status CreateServiceTables(sqlite::Database* db);
  // FAILED_PRECONDITION when the file at path_ is gone or is another file
  // than the one opened.
  absl::Status CheckFile() const;
  // A connection of the pool without temp objects (those StagePartition
  // kept are dropped first).
  absl::StatusOr<Lease> AcquireDb();
  // A connection as it is: StagePartition's, which reuses its temp objects.
  Lease AcquireAsItIs();
  // The connection as the shared units of storage/sql/ take it, given back
  // to the pool when the lease ends.
  sql::Lease Lend(sqlite::Database* db);
  // sql::SqlEngine.
  absl::StatusOr<sql::Lease> Acquire() override;
  absl::StatusOr<sql::Lease> AcquireForStaging() override;
  // Its staging connections keep their temporary tables between calls.
  bool StagesInGroups() const override { return true; }
  absl::Status CheckWarehouse() override { return CheckFile(); }
  sql::ReplaceHooks& replace_hooks() override;
  sql::StagingHooks& staging_hooks() override;
  void Release(sqlite::Database* db);
  // Drops every temp object of `db` (SqliteConnection::DropScratch).
  absl::Status DropTempObjects(sqlite::Database* db);
  const sqlite::SqliteDialect dialect_;

  // Checkpoints of the warehouse's log, off the committing threads (null
  // for ":memory:"). Declared before the connections, which it must
  // outlive.
  std::unique_ptr<sqlite::WalCheckpointer> checkpointer_;
  std::vector<std::unique_ptr<sqlite::Database>> connections_;
  // The file opened ("" for ":memory:") and its identity.
  std::string path_;
  uint64_t file_device_ = 0;
  uint64_t file_inode_ = 0;

  absl::Mutex pool_mu_;
  std::vector<sqlite::Database*> idle_ ABSL_GUARDED_BY(pool_mu_);

  // Each connection as the shared units use it (it keeps the fingerprint
  // statements staging runs, and names what its temp schema holds:
  // scratch_key()). Made by the constructor; an entry is used only by the
  // thread holding its connection's lease.
  std::map<const sqlite::Database*, std::unique_ptr<sqlite::SqliteConnection>>
      sql_connections_;

  // PartitionsMatching's read-only connection (null for ":memory:"),
  // opened by Open() and never replaced: Interrupt() may reach it from any
  // thread. query_mu_ lets one predicate run at a time.
  std::unique_ptr<sqlite::Database> query_db_;
  absl::Mutex query_mu_;

  std::unique_ptr<sqlite::SqliteHooks> hooks_;
};

}  // namespace backfill

#endif  // BACKFILL_STORAGE_SQLITE_SQLITE_ENGINE_H_
