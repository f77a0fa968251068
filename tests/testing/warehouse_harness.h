// WarehouseHarness: what a test of an Engine needs of a real warehouse,
// whatever the engine: the engine under test, a plain connection of the
// warehouse's own client library through which the test builds its fixture
// and reads, independently of the engine, what the engine wrote, a way to
// restart the engine or open a second one on the same warehouse, and a few
// hooks for what cannot be said in SQL both warehouses accept. The engine
// conformance suites (tests/testing/engine_conformance.h) run the same test
// text on every harness; SqliteWarehouseHarness is the SQLite one.
//
// What an implementation must provide:
//   - A fresh, empty warehouse of its own per harness object, removed when
//     the harness is destroyed. SQLite: a temporary directory holding
//     `warehouse.db`. PostgreSQL: a database created for the harness on a
//     throwaway server (tests/testing/postgres_test_server.h, one per test
//     binary, started on first use), dropped by the destructor once its
//     engines are gone. Text must compare and sort bytewise, as SQLite's
//     BINARY collation does (PostgreSQL: CREATE DATABASE ... TEMPLATE
//     template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'), because the
//     suites' ORDER BY over text expects that order.
//   - engine(): the engine under test, opened on that warehouse with
//     kDefaultConnections concurrent connections when the harness is made.
//   - Exec and Query on ONE plain connection of the warehouse's client
//     library (sqlite3, libpq), never through the engine, kept for the
//     harness's life so that a BEGIN in one Exec and a COMMIT in a later
//     one make one transaction. Exec runs one or more statements separated
//     by semicolons (libpq: PQexec); Query runs one statement and returns
//     every value as the client library's text of it (sqlite3_column_text,
//     PQgetvalue), NULL as nullopt. Fixture SQL is written to run unchanged
//     on SQLite and PostgreSQL 15 (see engine_conformance.h).
//   - Reopen(n): destroys the engine, then opens a new one on the same
//     warehouse with `n` connections, as a restart of the daemon: nothing
//     the old engine kept in memory survives, only what the warehouse
//     holds. OpenAnother(): a second engine on the same warehouse, as
//     another process, while engine() stays open.
//   - The hooks below, each documented with what SQLite gives.
// A new engine joins the suites with its harness, a factory for it (as
// SqliteWarehouse() below) and that factory added to
// ConformanceWarehouses() in engine_conformance.h.
//
// Ownership: the harness owns its engine, its connection and its warehouse;
// the Engine* from engine() is valid until the next Reopen (or a hook that
// says it reopens) or the harness's destruction. An engine from OpenAnother
// belongs to the caller and must be destroyed before the harness.
//
// Thread-safety: not thread-safe; one test thread drives it. engine() may
// be read from other threads while no other method of the harness runs
// (the engine itself is thread-safe).

#ifndef BACKFILL_TESTS_TESTING_WAREHOUSE_HARNESS_H_
#define BACKFILL_TESTS_TESTING_WAREHOUSE_HARNESS_H_

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/ports/engine.h"

namespace backfill {

class SqliteEngine;

namespace sqlite {
class Database;
}

namespace testing {

// One column of a table as the warehouse's own catalog describes it.
struct TableColumn {
  std::string name;
  // The declared type in upper case, as the catalog spells it ("TEXT",
  // "INTEGER", "BIGINT", "DOUBLE PRECISION").
  std::string type;
  // 1-based position of the column in the table's primary key; 0 when the
  // column is not part of it.
  int primary_key = 0;

  bool operator==(const TableColumn& other) const {
    return name == other.name && type == other.type &&
           primary_key == other.primary_key;
  }
};

inline void PrintTo(const TableColumn& c, std::ostream* os) {
  *os << c.name << " " << c.type << " pk=" << c.primary_key;
}

class WarehouseHarness {
 public:
  // One row of a query result: each value as text, nullopt for NULL.
  using Row = std::vector<std::optional<std::string>>;

  // The engine's connection pool when the harness makes it and on
  // Restart().
  static constexpr int kDefaultConnections = 2;

  virtual ~WarehouseHarness() = default;

  // What test parameter names call this warehouse: letters and digits only
  // ("Sqlite", "Postgres").
  virtual std::string name() const = 0;

  // ---- The engine ----------------------------------------------------------

  // The engine under test (see Ownership above).
  virtual Engine* engine() = 0;

  // Destroys the engine and opens a new one on the same warehouse with
  // `connections` connections (at least 1): a daemon restart.
  virtual absl::Status Reopen(int connections) = 0;
  absl::Status Restart() { return Reopen(kDefaultConnections); }

  // A second engine on the same warehouse, as another process would open
  // it; engine() stays open.
  virtual absl::StatusOr<std::unique_ptr<Engine>> OpenAnother() = 0;

  // ---- Plain SQL on the harness's own connection ---------------------------

  // Runs one or more statements; their results are discarded.
  virtual absl::Status Exec(const std::string& sql) = 0;

  // Runs one statement and returns its rows.
  virtual absl::StatusOr<std::vector<Row>> Query(const std::string& sql) = 0;

  // ---- The warehouse's catalog ---------------------------------------------

  // Whether `relation` (an SQL reference to a table as it would follow
  // FROM: a quoted name such as Quote(table), or what StagingTable and
  // RollbackCopyTable return) exists. SQLite: whether a statement reading
  // it prepares once the schema is read afresh, "no such table" meaning
  // false.
  virtual absl::StatusOr<bool> Exists(const std::string& relation) = 0;

  // The columns of the table named `table` (unquoted, in the warehouse's
  // default namespace), in their order; empty when there is no such table.
  // SQLite: pragma_table_info.
  virtual absl::StatusOr<std::vector<TableColumn>> Columns(
      const std::string& table) = 0;

  // ---- What the engine leaves in the warehouse for a job -------------------
  // These name the engine's own artifacts so that a test can read them with
  // plain SQL; what they hold is the Engine interface's to say.

  // An SQL reference (as Exists takes) to the table of the rows the job
  // staged for `dataset`, with the dataset's contract columns in contract
  // order. SQLite: SqliteEngine::StageTable, quoted.
  virtual std::string StagingTable(const std::string& job_id,
                                   const std::string& dataset) const = 0;

  // An SQL reference to the rollback copy of `dataset` for the job: the
  // published rows its Publish replaced, with the published table's
  // columns. Dropping it (DROP TABLE <reference>) is how a test loses a
  // copy. SQLite: SqliteEngine::PrevTable, quoted.
  virtual std::string RollbackCopyTable(const std::string& job_id,
                                        const std::string& dataset) const = 0;

  // The names of every object the warehouse holds for the job's staging
  // (staged rows, partition lists, entity key lists, pinned snapshots; not
  // its rollback copies), found through the warehouse's own catalog,
  // sorted. Empty once DropStaging ran. SQLite: the tables whose names
  // start as SqliteEngine::StageTable, PartsTable, KeysTable and PinTable
  // of the job do.
  virtual absl::StatusOr<std::vector<std::string>> StagingObjects(
      const std::string& job_id) = 0;

  // Rewrites the warehouse's publication markers as a version of the engine
  // that did not record which state store wrote them would have left them:
  // one marker per job of `jobs` and no other. Reopens the engine (so
  // engine() changes). UNIMPLEMENTED for an engine that never had such a
  // version (a test then skips). SQLite: the `_bf_publications` table of
  // (job_id, published_at).
  virtual absl::Status AddLegacyPublications(
      const std::vector<std::string>& jobs) = 0;

  // An SQL reference to one of the warehouse's own record tables, `which`
  // being "meta" (key, value: the owner_store_id), "publications"
  // (store_id, job_id, published_at) or "rollbacks". SQLite: _bf_<which>.
  virtual std::string RecordsTable(const std::string& which) const = 0;

  // ---- Engine settings outside the Engine interface ------------------------

  // How long the engine under test lets one PartitionsMatching predicate
  // run before it stops it; until the next Reopen (which restores the
  // engine's default). SQLite: SqliteEngine::SetPredicateTimeout.
  virtual void SetPredicateTimeout(absl::Duration timeout) = 0;

  // ---- SQL that differs between warehouses ---------------------------------

  // An expression giving, as text, the value of the expression `expr` such
  // that two values render equal only when they are the same value of the
  // same storage type (what "identical" compares). Never NULL. SQLite:
  // typeof(x) || ' ' || quote(x). PostgreSQL, whose columns have one type
  // each: quote_nullable(x) (a double prints exactly with the default
  // extra_float_digits).
  virtual std::string ExactText(const std::string& expr) const = 0;

  // An expression giving the number of elements of the JSON array that
  // the text expression `json` holds (NULL when it is NULL). SQLite:
  // json_array_length(x). PostgreSQL: json_array_length(CAST(x AS json)).
  virtual std::string JsonArrayLength(const std::string& json) const = 0;

  // A SELECT returning one text column `value`, one row per element of
  // the JSON array of strings that the text expression `json` holds.
  // SQLite: SELECT value FROM json_each(x). PostgreSQL: SELECT value FROM
  // json_array_elements_text(CAST(x AS json)) AS e(value).
  virtual std::string JsonArrayElements(const std::string& json) const = 0;

  // `"name"` with embedded double quotes doubled: an identifier as standard
  // SQL (and so both SQLite and PostgreSQL) quotes it.
  static std::string Quote(const std::string& name);
};

// How a parameterised test gets a warehouse: the name its tests are
// reported under (the harness's name()) and what makes a fresh harness.
struct WarehouseHarnessFactory {
  std::string name;
  std::function<absl::StatusOr<std::unique_ptr<WarehouseHarness>>()> make;
};

inline void PrintTo(const WarehouseHarnessFactory& factory, std::ostream* os) {
  *os << factory.name;
}

// The SQLite warehouse: a temporary directory (under TEST_TMPDIR, else the
// system's) with the file `warehouse.db`, a SqliteEngine opened on it and
// a sqlite::Database connection of the harness's own. The directory is
// removed by the destructor.
class SqliteWarehouseHarness : public WarehouseHarness {
 public:
  static constexpr char kName[] = "Sqlite";

  static absl::StatusOr<std::unique_ptr<SqliteWarehouseHarness>> Create();
  ~SqliteWarehouseHarness() override;

  std::string name() const override { return kName; }
  Engine* engine() override;
  absl::Status Reopen(int connections) override;
  // Opened with one connection.
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
  absl::Status AddLegacyPublications(
      const std::vector<std::string>& jobs) override;
  std::string RecordsTable(const std::string& which) const override;
  void SetPredicateTimeout(absl::Duration timeout) override;
  std::string ExactText(const std::string& expr) const override;
  std::string JsonArrayLength(const std::string& json) const override;
  std::string JsonArrayElements(const std::string& json) const override;

  // The engine under test as what it is, for SQLite-only tests.
  SqliteEngine* sqlite_engine() { return engine_.get(); }
  // The warehouse file.
  const std::string& path() const { return path_; }
  // The harness's own connection.
  sqlite::Database& db() { return *db_; }

 private:
  SqliteWarehouseHarness() = default;

  std::string dir_;
  std::string path_;
  std::unique_ptr<sqlite::Database> db_;
  int connections_ = kDefaultConnections;
  std::unique_ptr<SqliteEngine> engine_;
};

// The factory of SqliteWarehouseHarness, named "Sqlite".
WarehouseHarnessFactory SqliteWarehouse();

}  // namespace testing
}  // namespace backfill

#endif  // BACKFILL_TESTS_TESTING_WAREHOUSE_HARNESS_H_
