#include "storage/sqlite/sqlite_engine.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/model/partition.h"
#include "core/plan/affected_by.h"
#include "spdlog/spdlog.h"
#include "storage/sql/diff.h"
#include "storage/sql/engine_checks.h"
#include "storage/sql/markers.h"
#include "storage/sql/predicates.h"
#include "storage/sqlite/sqlite_bounded_functions.h"
#include "storage/sqlite/sqlite_connection.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_fingerprint_function.h"
#include "storage/sqlite/sqlite_hooks.h"
#include "storage/sqlite/sqlite_membership.h"
#include "storage/sqlite/sqlite_partition_stats.h"
#include "storage/sqlite/sqlite_sandbox.h"
#include "storage/sqlite/sqlite_wal_checkpointer.h"

namespace backfill {
namespace {

using sql::Annotate;
using sqlite::BindMembership;
using sqlite::Database;
using sqlite::MembershipConditionParams;
using sqlite::Statement;
using sqlite::Transaction;

constexpr char kPublications[] = "_bf_publications";

std::string Q(std::string_view name) { return sqlite::QuoteIdentifier(name); }

// Runs `sql` (one statement without parameters) through the statement
// cache.
absl::Status RunCached(Database* db, const std::string& sql) {
  ASSIGN_OR_RETURN(Statement q, db->PrepareCached(sql));
  return q.Run();
}

}  // namespace

// ---------------------------------------------------------------------------
// Connection pool

class SqliteEngine::Lease {
 public:
  Lease(SqliteEngine* engine, Database* db) : engine_(engine), db_(db) {}
  Lease(Lease&& other) noexcept
      : engine_(other.engine_), db_(std::exchange(other.db_, nullptr)) {}
  Lease& operator=(Lease&&) = delete;
  ~Lease() {
    if (db_ == nullptr) return;
    // Never hand back a connection inside a transaction.
    if (!db_->InAutocommit()) db_->Exec("ROLLBACK").IgnoreError();
    engine_->Release(db_);
  }
  Database* operator->() const { return db_; }
  Database* get() const { return db_; }
  // The connection, which the caller now gives back itself.
  Database* release() { return std::exchange(db_, nullptr); }

 private:
  SqliteEngine* engine_;
  Database* db_;
};

SqliteEngine::Lease SqliteEngine::AcquireAsItIs() {
  pool_mu_.LockWhen(absl::Condition(
      +[](std::vector<Database*>* idle) { return !idle->empty(); }, &idle_));
  Database* db = idle_.back();
  idle_.pop_back();
  pool_mu_.Unlock();
  return Lease(this, db);
}

absl::StatusOr<SqliteEngine::Lease> SqliteEngine::AcquireDb() {
  Lease lease = AcquireAsItIs();
  // StagePartition's views shadow published tables by their names: no
  // other call may see them.
  if (!sql_connections_.at(lease.get())->scratch_key().empty()) {
    RETURN_IF_ERROR(DropTempObjects(lease.get()));
  }
  return lease;
}

sql::Lease SqliteEngine::Lend(Database* db) {
  return sql::Lease(sql_connections_.at(db).get(),
                    [this, db](sql::Connection* conn) {
                      // Never hand back a connection inside a transaction.
                      conn->Rollback();
                      if (!db->InAutocommit()) {
                        db->Exec("ROLLBACK").IgnoreError();
                      }
                      Release(db);
                    });
}

absl::StatusOr<sql::Lease> SqliteEngine::Acquire() {
  ASSIGN_OR_RETURN(Lease lease, AcquireDb());
  return Lend(lease.release());
}

absl::StatusOr<sql::Lease> SqliteEngine::AcquireForStaging() {
  // The connection keeps its temp objects from the last call.
  return Lend(AcquireAsItIs().release());
}

absl::Status SqliteEngine::DropTempObjects(Database* db) {
  return sql_connections_.at(db)->DropScratch();
}

void SqliteEngine::Release(Database* db) {
  absl::MutexLock lock(&pool_mu_);
  idle_.push_back(db);
}

SqliteEngine::SqliteEngine(std::vector<std::unique_ptr<Database>> conns)
    : sql::SqlEngine(&dialect_),
      connections_(std::move(conns)),
      hooks_(std::make_unique<sqlite::SqliteHooks>(
          &dialect_, [this] { return CheckFile(); },
          [this] { return StatsNow(); })) {
  absl::MutexLock lock(&pool_mu_);
  for (const auto& c : connections_) {
    idle_.push_back(c.get());
    sql_connections_[c.get()] =
        std::make_unique<sqlite::SqliteConnection>(c.get(), &dialect_);
  }
}

void SqliteEngine::Interrupt() {
  // connections_ never changes after construction; sqlite3_interrupt is
  // safe on a connection another thread is using.
  for (const auto& c : connections_) c->Interrupt();
  if (query_db_ != nullptr) query_db_->Interrupt();
}

SqliteEngine::~SqliteEngine() = default;

std::string SqliteEngine::StageTable(const std::string& job_id,
                                     const std::string& dataset) {
  return sqlite::SqliteDialect().Stage(job_id, dataset).name;
}
std::string SqliteEngine::PartsTable(const std::string& job_id,
                                     const std::string& dataset) {
  return sqlite::SqliteDialect().Parts(job_id, dataset).name;
}
std::string SqliteEngine::PinTable(const std::string& job_id,
                                   const std::string& dataset) {
  DatasetSpec pinned;
  pinned.name = dataset;
  return sqlite::SqliteDialect().Pin(job_id, pinned).name;
}
std::string SqliteEngine::KeysTable(const std::string& job_id,
                                    const std::string& dataset) {
  return sqlite::SqliteDialect().Keys(job_id, dataset).name;
}
std::string SqliteEngine::PrevTable(const std::string& job_id,
                                    const std::string& dataset) {
  return sqlite::SqliteDialect().Copy(job_id, dataset).name;
}

absl::StatusOr<std::unique_ptr<SqliteEngine>> SqliteEngine::Open(
    const std::string& warehouse_path, int connections,
    bool create_if_missing) {
  const bool memory = warehouse_path == ":memory:" || warehouse_path.empty();
  if (connections < 1 || memory) connections = 1;
  if (!memory && !create_if_missing) {
    struct stat st;
    if (stat(warehouse_path.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat("warehouse ", warehouse_path,
                                              " does not exist (",
                                              std::strerror(errno), ")"));
    }
    // SQLite takes an empty file for an empty database and would write its
    // own tables into it: a file that must hold a warehouse and holds
    // nothing is as missing as no file, and is left as it is.
    if (S_ISREG(st.st_mode) && st.st_size == 0) {
      return absl::NotFoundError(
          absl::StrCat("warehouse ", warehouse_path,
                       " is an empty file (0 bytes): it holds no database"));
    }
  }
  std::vector<std::unique_ptr<Database>> conns;
  // The pool's writers queue for one another in the process (sqlite_db.h).
  auto writer = std::make_shared<sqlite::WriterLock>();
  for (int i = 0; i < connections; ++i) {
    sqlite::OpenOptions options;
    options.busy_timeout = absl::Seconds(10);
    options.create = create_if_missing;
    ASSIGN_OR_RETURN(std::unique_ptr<Database> db,
                     Database::Open(warehouse_path, options));
    if (i == 0 && !memory) {
      ASSIGN_OR_RETURN(std::string was, db->QueryText("PRAGMA journal_mode"));
      ASSIGN_OR_RETURN(std::string mode,
                       db->QueryText("PRAGMA journal_mode=WAL"));
      if (mode != "wal") {
        return absl::FailedPreconditionError(
            absl::StrCat("warehouse ", warehouse_path,
                         ": cannot switch to WAL mode (got ", mode, ")"));
      }
      if (was != "wal") {
        // WAL mode stays with the file: other programs reading it, and
        // copies of it, must know (docs/operations.md, "Backups").
        spdlog::info(
            "warehouse {} switched from journal mode {} to WAL: recent "
            "commits live in {}-wal until checkpointed, so copy the file "
            "with sqlite3 .backup or VACUUM INTO, not cp",
            warehouse_path, was, warehouse_path);
      }
    }
    RETURN_IF_ERROR(db->Exec("PRAGMA synchronous=NORMAL"));
    // The temp schema is scratch space (StagePartition's output table, the
    // diff's tables), lost with the connection anyway: its rollback journal
    // is kept in memory, so a staging transaction creates and deletes no
    // journal file. (Not OFF: a rollback without a journal leaves the
    // pages already spilled to the temp file as they were written.) Its
    // pages still spill to a temp file, so a large partition's output need
    // not fit in memory; the journal holds only the pages a transaction
    // changes that existed before it, and every use empties the tables.
    RETURN_IF_ERROR(db->Exec("PRAGMA temp.journal_mode=MEMORY"));
    db->ShareWriterLock(writer);
    RETURN_IF_ERROR(sqlite::RegisterPartitionFunction(db.get()));
    RETURN_IF_ERROR(sqlite::RegisterFingerprintFunction(db.get()));
    // In memory the one connection also runs clients' predicates.
    if (memory) RETURN_IF_ERROR(sqlite::InstallBoundedFunctions(db.get()));
    if (i == 0) RETURN_IF_ERROR(CreateServiceTables(db.get()));
    if (i == 0) RETURN_IF_ERROR(sqlite::CreatePartitionStatsTables(db.get()));
    conns.push_back(std::move(db));
  }
  std::unique_ptr<SqliteEngine> engine(new SqliteEngine(std::move(conns)));
  engine->path_ = memory ? std::string() : warehouse_path;
  if (!memory) {
    sqlite::WalCheckpointer::Options options;
    options.thread_name = "bf-wh-ckpt";
    ASSIGN_OR_RETURN(engine->checkpointer_,
                     sqlite::WalCheckpointer::Start(warehouse_path, options));
    for (const auto& c : engine->connections_) {
      engine->checkpointer_->Attach(c.get());
    }
  }
  if (!memory) {
    // For client predicates (PartitionsMatching): cannot write, whatever
    // the statement.
    sqlite::OpenOptions options;
    options.read_only = true;
    options.busy_timeout = absl::Seconds(10);
    ASSIGN_OR_RETURN(engine->query_db_,
                     Database::Open(warehouse_path, options));
    RETURN_IF_ERROR(engine->query_db_->Exec("PRAGMA query_only=ON"));
    RETURN_IF_ERROR(sqlite::RegisterPartitionFunction(engine->query_db_.get()));
    RETURN_IF_ERROR(sqlite::InstallBoundedFunctions(engine->query_db_.get()));
  }
  if (!engine->path_.empty()) {
    struct stat st;
    if (stat(warehouse_path.c_str(), &st) != 0) {
      return absl::UnavailableError(absl::StrCat("warehouse ", warehouse_path,
                                                 ": ", std::strerror(errno)));
    }
    engine->file_device_ = st.st_dev;
    engine->file_inode_ = st.st_ino;
  }
  return engine;
}

absl::Status SqliteEngine::CreateServiceTables(Database* db) {
  const sqlite::SqliteDialect dialect;
  sqlite::SqliteConnection conn(db, &dialect);
  ASSIGN_OR_RETURN(sql::Transaction txn,
                   sql::Transaction::Begin(&conn, sql::TxnMode::kWrite));
  ASSIGN_OR_RETURN(bool has_markers, db->TableExists(kPublications));
  bool named = false;
  if (has_markers) {
    ASSIGN_OR_RETURN(int64_t columns,
                     db->QueryInt(absl::StrCat(
                         "SELECT COUNT(*) FROM pragma_table_info('",
                         kPublications, "') WHERE name = 'store_id'")));
    named = columns > 0;
  }
  if (has_markers && !named) {
    // Markers of a version that did not name their store: kept, with an
    // empty store id, until a store claims the warehouse.
    RETURN_IF_ERROR(
        db->Exec(absl::StrCat("ALTER TABLE main.", Q(kPublications),
                              " RENAME TO ", Q("_bf_publications_unnamed"))));
  }
  RETURN_IF_ERROR(sql::CreateRecords(&conn));
  // The fingerprint cache of earlier versions, replaced by the change
  // signal's (storage/sql/change_signal.h).
  RETURN_IF_ERROR(db->Exec(
      "DROP TABLE IF EXISTS main.\"_bf_partition_fingerprints\"; DROP TABLE "
      "IF EXISTS main.\"_bf_partition_fingerprints_meta\""));
  if (has_markers && !named) {
    RETURN_IF_ERROR(db->Exec(absl::StrCat(
        "INSERT INTO main.", Q(kPublications),
        " (store_id, job_id, published_at) SELECT '', job_id, published_at "
        "FROM main.",
        Q("_bf_publications_unnamed"), "; DROP TABLE main.",
        Q("_bf_publications_unnamed"))));
  }
  return txn.Commit();
}

absl::Status SqliteEngine::CheckFile() const {
  if (path_.empty()) return absl::OkStatus();
  struct stat st;
  if (stat(path_.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the warehouse file ", path_,
        " was removed while backfilld was "
        "running (",
        std::strerror(errno),
        "); nothing more is written to it. Stop backfilld, put the warehouse "
        "back (or check --data-dir) and start it again"));
  }
  if (st.st_dev != file_device_ || st.st_ino != file_inode_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the warehouse file ", path_,
        " was replaced by another file while "
        "backfilld was running; nothing more is written to it. Stop "
        "backfilld and start it again on the warehouse you mean"));
  }
  return absl::OkStatus();
}

absl::Status SqliteEngine::Probe() {
  if (path_.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(CheckFile());
  // The header is read through SQLite's own handle of the file (the
  // predicates' connection, when no predicate runs): opening and closing
  // another descriptor of the file would drop the process's POSIX locks on
  // it, which SQLite's locking depends on.
  if (!query_mu_.TryLock()) return absl::OkStatus();
  unsigned char header[100] = {};
  sqlite3_int64 size = -1;
  int read_rc = SQLITE_ERROR;
  {
    sqlite3_file* file = nullptr;
    if (sqlite3_file_control(query_db_->raw(), "main",
                             SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK &&
        file != nullptr && file->pMethods != nullptr) {
      read_rc = file->pMethods->xRead(file, header, sizeof(header), 0);
      if (file->pMethods->xFileSize(file, &size) != SQLITE_OK) size = -1;
    }
  }
  query_mu_.Unlock();
  const std::string restore =
      "; stop backfilld, restore the warehouse from a backup "
      "(docs/operations.md) and start it again";
  if (read_rc != SQLITE_OK || size < 100 ||
      std::memcmp(header, "SQLite format 3", 16) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the warehouse file ", path_,
        " was truncated or overwritten while backfilld was running (",
        size >= 0 ? absl::StrCat(size, " bytes, ") : std::string(),
        "no SQLite header)", restore));
  }
  auto be32 = [&](int at) {
    return (uint32_t{header[at]} << 24) | (uint32_t{header[at + 1]} << 16) |
           (uint32_t{header[at + 2]} << 8) | uint32_t{header[at + 3]};
  };
  int64_t page_size = (int64_t{header[16]} << 8) | header[17];
  if (page_size == 1) page_size = 65536;
  // The page count in the header holds when the change counter it was
  // written with is the current one.
  const int64_t pages = be32(28);
  if (be32(24) == be32(92) && size < pages * page_size) {
    return absl::FailedPreconditionError(
        absl::StrCat("the warehouse file ", path_,
                     " was truncated while backfilld was running (", size,
                     " bytes; its header counts ", pages, " pages of ",
                     page_size, ")", restore));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------

absl::StatusOr<std::vector<std::string>> SqliteEngine::PartitionsMatching(
    const DatasetSpec& dataset, const std::string& predicate,
    size_t max_partitions) {
  RETURN_IF_ERROR(CheckPredicate(predicate));
  RETURN_IF_ERROR(CheckFile());
  absl::MutexLock lock(&query_mu_);
  std::optional<Lease> lease;
  Database* db = query_db_.get();
  if (db == nullptr) {
    // ":memory:": the one connection there is, query-only for this call.
    absl::StatusOr<Lease> acquired = AcquireDb();
    if (!acquired.ok()) return acquired.status();
    lease.emplace(*std::move(acquired));
    db = lease->get();
  }
  ASSIGN_OR_RETURN(bool exists, db->TableExists(dataset.table));
  if (!exists) return std::vector<std::string>{};
  struct QueryOnly {
    Database* db = nullptr;
    ~QueryOnly() {
      if (db != nullptr) db->Exec("PRAGMA query_only=OFF").IgnoreError();
    }
  } query_only;
  if (lease) {
    RETURN_IF_ERROR(db->Exec("PRAGMA query_only=ON"));
    query_only.db = db;
  }

  sqlite::SqliteConnection over(db, &dialect_);
  ASSIGN_OR_RETURN(
      const sql::MatchingStatement statement,
      sql::MatchingSql(&over, dataset,
                       dialect_.Name(dialect_.Published(dataset)), predicate));
  const size_t predicate_end = statement.predicate_end;
  const std::string quoted = QuotePredicate(predicate);
  const std::string where =
      absl::StrCat("table ", dataset.table, " of dataset ", dataset.name);
  const absl::Duration timeout = predicate_timeout();
  // The engine's part of the statement maps rows to partitions with its
  // own function.
  sqlite::ReadSandbox sandbox(db, dataset.table, timeout,
                              {sqlite::kPartitionFunction});
  // Every failure of the statement, as the client should read it.
  auto failed = [&](const absl::Status& status) -> absl::Status {
    if (sandbox.timed_out()) {
      return PredicateRanTooLong(predicate, timeout, where);
    }
    if (sandbox.LastErrorTooBig()) {
      return PredicateTooBig(predicate, sqlite::kPredicateMaxValueBytes, where);
    }
    if (!sandbox.refused().empty()) {
      return PredicateRefused(predicate, sandbox.refused(), where,
                              "call SQLite's functions of the allow-list in "
                              "docs/pipeline-spec.md");
    }
    if (sandbox.LastErrorInterrupted()) return PredicateInterrupted(predicate);
    if (status.code() == absl::StatusCode::kInternal ||
        status.code() == absl::StatusCode::kInvalidArgument) {
      const std::string message = sandbox.LastError();
      const int offset = sandbox.LastErrorOffset();
      return absl::InvalidArgumentError(absl::StrCat(
          "affected_by: predicate ", quoted, " does not work against ", where,
          ": ", message.empty() ? std::string(status.message()) : message,
          offset >= 0 && static_cast<size_t>(offset) >= predicate_end
              ? " (the expression is incomplete at its end)"
              : ""));
    }
    return Annotate(status, absl::StrCat("affected_by: predicate ", quoted));
  };
  absl::StatusOr<Statement> q = db->Prepare(statement.sql);
  if (!q.ok()) return failed(q.status());
  if (!q->IsReadOnly()) {
    return absl::InvalidArgumentError(
        absl::StrCat("affected_by: predicate ", quoted,
                     " is refused: it would write to the warehouse"));
  }
  if (q->ParameterCount() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "affected_by: predicate ", quoted, " has a parameter (",
        q->ParameterName(1),
        "); write the values into the predicate (nothing is bound)"));
  }
  std::set<std::string> matching;
  while (true) {
    absl::StatusOr<bool> row = q->Step();
    if (!row.ok()) return failed(row.status());
    if (!*row) break;
    RETURN_IF_ERROR(sql::AddMatchingRow(
        dataset, predicate, max_partitions,
        q->ColumnIsNull(0) ? std::nullopt
                           : std::optional<std::string>(q->ColumnText(0)),
        &matching));
  }
  return std::vector<std::string>(matching.begin(), matching.end());
}

absl::StatusOr<std::vector<int64_t>> SqliteEngine::CountRowsInPartitions(
    const DatasetSpec& dataset, const std::vector<std::string>& partitions) {
  ASSIGN_OR_RETURN(Lease db, AcquireDb());
  std::vector<int64_t> out;
  bool contradicted = false;
  {
    ASSIGN_OR_RETURN(
        Transaction txn,
        Transaction::Begin(db.get(), Transaction::Mode::kDeferred));
    ASSIGN_OR_RETURN(out,
                     sqlite::CountPartitions(db.get(), dataset, partitions));
    ASSIGN_OR_RETURN(contradicted, sqlite::StatsContradicted(db.get(), dataset,
                                                             partitions, out));
    RETURN_IF_ERROR(txn.Commit());
  }
  if (contradicted) {
    spdlog::info(
        "{}: table {} changed in a way its partition statistics could not "
        "see (rows deleted or moved); they are counted again",
        dataset.name, dataset.table);
    RETURN_IF_ERROR(sqlite::DropPartitionStats(db.get(), dataset.name));
  }
  return out;
}

absl::StatusOr<PartitionStats> SqliteEngine::PartitionStatistics(
    const DatasetSpec& dataset) {
  sqlite::StatsPolicy policy;
  policy.max_age = stats_max_age();
  const absl::Time now = StatsNow();
  ASSIGN_OR_RETURN(Lease db, AcquireDb());
  return sqlite::RefreshPartitionStats(db.get(), dataset, policy, now);
}

namespace {

std::string Listed(const std::vector<std::string>& columns) {
  std::vector<std::string> parts;
  for (const std::string& c : columns) parts.push_back(Q(c));
  return absl::StrJoin(parts, ", ");
}

// Copies the partition's staged and published rows into the TEMP tables
// _bf_diff_after and _bf_diff_before made for the dataset
// (SqliteEngine::DiffPartitions) and compares them, inside the caller's
// read transaction.
absl::StatusOr<PartitionDiff> DiffOnePartition(
    sqlite::SqliteConnection* conn, const DatasetSpec& dataset,
    const DiffColumns& columns, const std::string& stage, bool published,
    const std::string& partition, int sample_limit) {
  Database* db = conn->db();
  const char* const names[] = {"_bf_diff_after", "_bf_diff_before"};
  const std::string in_partition =
      dataset.partition ? MembershipConditionParams(dataset) : std::string("1");
  const std::string cols = sql::ColumnList(dataset);
  const std::pair<const char*, std::string> sides[] = {
      {names[0], absl::StrCat("SELECT ", cols, " FROM main.", Q(stage),
                              " WHERE ", in_partition)},
      {names[1], published
                     ? absl::StrCat("SELECT ", cols, " FROM main.",
                                    Q(dataset.table), " WHERE ", in_partition)
                     : std::string()}};
  for (const auto& [name, select] : sides) {
    RETURN_IF_ERROR(RunCached(db, absl::StrCat("DELETE FROM temp.", Q(name))));
    if (select.empty()) continue;
    ASSIGN_OR_RETURN(Statement copy, db->PrepareCached(absl::StrCat(
                                         "INSERT INTO temp.", Q(name), " (",
                                         cols, ") ", select)));
    if (dataset.partition) {
      RETURN_IF_ERROR(BindMembership(copy, dataset, partition));
    }
    RETURN_IF_ERROR(copy.Run());
  }
  sql::DiffSides compared;
  compared.after = absl::StrCat("temp.", Q(names[0]));
  compared.before = absl::StrCat("temp.", Q(names[1]));
  return sql::DiffOnePartition(conn, dataset, columns, compared, partition,
                               sample_limit);
}

}  // namespace

absl::StatusOr<PartitionDiff> SqliteEngine::DiffPartition(
    const std::string& job_id, const DatasetSpec& dataset,
    const std::string& partition, int sample_limit) {
  ASSIGN_OR_RETURN(
      std::vector<absl::StatusOr<PartitionDiff>> diffs,
      DiffPartitions(job_id, dataset, absl::MakeConstSpan(&partition, 1),
                     sample_limit));
  return std::move(diffs.front());
}

absl::StatusOr<std::vector<absl::StatusOr<PartitionDiff>>>
SqliteEngine::DiffPartitions(const std::string& job_id,
                             const DatasetSpec& dataset,
                             absl::Span<const std::string> partitions,
                             int sample_limit) {
  RETURN_IF_ERROR(CheckFile());
  RETURN_IF_ERROR(sql::CheckWritable(dialect_, dataset));
  const DiffColumns columns = DiffColumnsOf(dataset);
  const std::string stage = StageTable(job_id, dataset.name);
  // The connection keeps the two temp tables from one partition to the
  // next of the dataset (as StagePartition keeps its objects).
  Lease db = AcquireAsItIs();
  ASSIGN_OR_RETURN(bool staged, db->TableExists(stage));
  if (!staged) {
    return absl::FailedPreconditionError(
        absl::StrCat("nothing staged for ", dataset.name, " in job ", job_id));
  }
  // The partition's rows on each side, in TEMP tables typed like the
  // contract and indexed by the key.
  const char* const names[] = {"_bf_diff_after", "_bf_diff_before"};
  ASSIGN_OR_RETURN(const std::string defs, dialect_.ColumnDefinitions(dataset));
  std::vector<std::string> setup;
  for (const char* name : names) {
    setup.push_back(
        absl::StrCat("CREATE TEMP TABLE ", Q(name), " (", defs, ")"));
    if (columns.by_key) {
      setup.push_back(absl::StrCat("CREATE INDEX temp.",
                                   Q(absl::StrCat(name, "_key")), " ON ",
                                   Q(name), " (", Listed(columns.key), ")"));
    }
  }
  const std::string setup_key =
      absl::StrCat("-- diff\n", absl::StrJoin(setup, ";\n"));
  sqlite::SqliteConnection* conn = sql_connections_.at(db.get()).get();
  if (conn->scratch_key() != setup_key) {
    RETURN_IF_ERROR(DropTempObjects(db.get()));
    for (const std::string& sql : setup) RETURN_IF_ERROR(db->Exec(sql));
    conn->scratch_key() = setup_key;
  }
  // Partitions share a read transaction (a snapshot, and one pair of WAL
  // read-lock calls) up to kDiffsPerTransaction of them, so that a long
  // job's diff does not hold one snapshot (and the log's checkpoints back)
  // from its first partition to its last. A partition whose comparison
  // fails ends the transaction it ran in: the next one starts afresh.
  constexpr size_t kDiffsPerTransaction = 256;
  std::vector<absl::StatusOr<PartitionDiff>> out;
  out.reserve(partitions.size());
  std::optional<Transaction> txn;
  size_t in_txn = 0;
  bool published = false;
  for (const std::string& partition : partitions) {
    absl::Status valid = Annotate(
        ValidatePartition(dataset.layout(), partition),
        absl::StrCat("dataset ", dataset.name, " partition '", partition, "'"));
    if (!valid.ok()) {
      out.push_back(std::move(valid));
      continue;
    }
    if (txn.has_value() && in_txn == kDiffsPerTransaction) {
      RETURN_IF_ERROR(txn->Commit());
      txn.reset();
    }
    if (!txn.has_value()) {
      ASSIGN_OR_RETURN(
          Transaction begun,
          Transaction::Begin(db.get(), Transaction::Mode::kDeferred));
      txn.emplace(std::move(begun));
      in_txn = 0;
      ASSIGN_OR_RETURN(published, db->TableExists(dataset.table));
    }
    ++in_txn;
    absl::StatusOr<PartitionDiff> diff = DiffOnePartition(
        conn, dataset, columns, stage, published, partition, sample_limit);
    if (!diff.ok()) {
      txn->Rollback();
      txn.reset();
    }
    out.push_back(std::move(diff));
  }
  if (txn.has_value()) RETURN_IF_ERROR(txn->Commit());
  // The tables stay for the next partition, empty.
  for (const char* name : names) {
    RETURN_IF_ERROR(
        RunCached(db.get(), absl::StrCat("DELETE FROM temp.", Q(name))));
  }
  return out;
}

sql::ReplaceHooks& SqliteEngine::replace_hooks() { return *hooks_; }
sql::StagingHooks& SqliteEngine::staging_hooks() { return *hooks_; }

}  // namespace backfill
