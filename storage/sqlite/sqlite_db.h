// A small RAII wrapper over the sqlite3 C API, used by the state store and
// the SQLite warehouse engine (the only code that links SQLite).
//
//   Database    one connection (sqlite3*). Owns it; closes it on destruction.
//   Statement   one prepared statement (sqlite3_stmt*). Owns it while it
//               lives; on destruction it is reset and handed back to its
//               Database's statement cache (or finalized). Must not outlive
//               its Database.
//   Transaction a scope guard: BEGIN [IMMEDIATE] on Begin(), ROLLBACK on
//               destruction unless Commit() succeeded.
//   WriterLock  shared by the connections of one process to one file
//               (Database::ShareWriterLock): BEGIN IMMEDIATE takes it first
//               and the transaction holds it until it ends, so that the
//               process's writers queue for one another instead of polling
//               SQLite's write lock with the busy handler, whose shortest
//               sleep (1 ms) is many times a short write. A writer that
//               cannot have it within the busy timeout goes on without it:
//               SQLite's own lock still decides, against other processes
//               too.
//
// Statement cache: preparing (parsing and planning) a statement costs more
// than running most of the short statements the state store and the engine
// run per partition. Database::PrepareCached keeps the statements it
// prepared, once their Statement is destroyed, by their SQL text (at most
// Database::kCachedStatements, least recently used dropped first) and hands
// one back, reset and with no bindings, when the same text is asked for
// again. SQLite re-prepares a cached statement by itself when the schema
// changed since, so a statement whose table is gone fails when it is
// stepped, not when it is taken from the cache: code that prepares to see
// whether SQL compiles uses Prepare, which always compiles. While the cache
// is disabled (a ReadSandbox's authorizer is installed) PrepareCached
// neither takes nor keeps statements, so that every statement compiled
// then meets the authorizer.
//
// Every failure is an absl::Status carrying SQLite's message and the first
// words of the SQL that failed; nothing throws. Codes: SQLITE_BUSY/LOCKED ->
// UNAVAILABLE (retryable), SQLITE_CONSTRAINT -> FAILED_PRECONDITION,
// SQLITE_CANTOPEN and SQLITE_IOERR -> UNAVAILABLE, SQLITE_FULL (disk or
// quota full) -> RESOURCE_EXHAUSTED, SQLITE_CORRUPT and SQLITE_NOTADB ->
// DATA_LOSS, anything else -> INTERNAL.
//
// Thread-safety: none of these types is synchronized. Connections are opened
// in SQLite's multi-thread mode (SQLITE_OPEN_NOMUTEX): one connection (and
// its statements) must be used by one thread at a time; the owner serializes
// (see SqliteStateStore's mutex and SqliteEngine's connection pool).

#ifndef BACKFILL_STORAGE_SQLITE_SQLITE_DB_H_
#define BACKFILL_STORAGE_SQLITE_SQLITE_DB_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/model/fingerprint.h"

struct sqlite3;
struct sqlite3_stmt;

namespace backfill::sqlite {

class Database;

// Sets SQLite's process-wide options, once, before SQLite initializes (the
// first Database::Open or FaultVfs::Install calls it; it does nothing after
// that). It turns off SQLite's count of its own memory use (nothing here
// reads it): that count takes one mutex, shared by every connection of the
// process, on each of SQLite's allocations, which the workers, the state
// store's writer and the readers otherwise contend for. Thread-safe.
void ConfigureLibrary();

// `"name"` with embedded double quotes doubled: safe to splice into SQL as an
// identifier whatever `name` contains.
std::string QuoteIdentifier(std::string_view name);

// The first words of `sql` (whitespace collapsed, at most ~60 characters),
// for error messages.
std::string SqlHead(std::string_view sql);

// Why this process could not write the database file at `path` and the
// files SQLite keeps beside it in WAL mode ("" when it can, and for
// ":memory:" and URIs): the file itself, its directory (where the -wal
// and -shm files are created) or an existing -wal or -shm file is not
// writable by the process's effective user. Each reason names the file,
// its mode and owner, the process's ids and what to change.
std::string NotWritableReason(const std::string& path);

// Column types as reported by sqlite3_column_type.
enum class ColumnType { kInteger, kReal, kText, kBlob, kNull };

class Statement {
 public:
  Statement() = default;
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Bind by 1-based index.
  absl::Status BindInt(int index, int64_t value);
  absl::Status BindDouble(int index, double value);
  absl::Status BindText(int index, std::string_view value);
  absl::Status BindNull(int index);

  // Bind by name, including its prefix (":partition"). INVALID_ARGUMENT if
  // the statement has no such parameter.
  absl::Status BindInt(std::string_view name, int64_t value);
  absl::Status BindDouble(std::string_view name, double value);
  absl::Status BindText(std::string_view name, std::string_view value);
  absl::Status BindNull(std::string_view name);

  // 1-based index of a named parameter, 0 when the statement has none such.
  int ParameterIndex(std::string_view name) const;
  int ParameterCount() const;
  // The name of parameter `index` (":x", "@x", "?1"), "" for a bare "?".
  std::string ParameterName(int index) const;

  // Runs one step: true when a row is available, false when done.
  absl::StatusOr<bool> Step();
  // Steps until done (for statements that return no rows or whose rows are
  // not needed).
  absl::Status Run();

  int ColumnCount() const;
  std::string ColumnName(int index) const;
  ColumnType GetColumnType(int index) const;
  bool ColumnIsNull(int index) const;
  int64_t ColumnInt(int index) const;
  double ColumnDouble(int index) const;
  std::string ColumnText(int index) const;  // "" for NULL

  // Resets the statement for another execution and clears its bindings.
  absl::Status Reset();

  // True when the statement does not write to the database.
  bool IsReadOnly() const;

  // The text of the statement as prepared (up to and including its ';').
  std::string Sql() const;

  sqlite3_stmt* raw() const { return stmt_; }

 private:
  friend class Database;
  Statement(sqlite3* db, sqlite3_stmt* stmt, std::string sql, Database* cache)
      : db_(db), stmt_(stmt), sql_(std::move(sql)), cache_(cache) {}
  absl::Status Check(int rc, std::string_view what) const;
  // Hands the statement back to the cache, or finalizes it.
  void Release();

  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;            // the cache key, and for error messages
  Database* cache_ = nullptr;  // where it goes back to; nullptr: finalized
};

class WriterLock {
 public:
  // True when taken within `timeout`.
  bool Acquire(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  void Release() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
};

struct OpenOptions {
  // A read-write connection (false) is refused (FAILED_PRECONDITION, with
  // NotWritableReason) when the process could not write the file, rather
  // than opened read-only as SQLite would, to fail at the first write.
  bool read_only = false;
  bool create = true;  // create the file if missing (read-write only)
  absl::Duration busy_timeout = absl::Seconds(10);
};

class Database {
 public:
  // Opens (or creates) the database file at `path` (":memory:" allowed).
  static absl::StatusOr<std::unique_ptr<Database>> Open(
      const std::string& path, const OpenOptions& options = {});

  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  absl::Status SetBusyTimeout(absl::Duration timeout);
  absl::Duration busy_timeout() const { return busy_timeout_; }

  // Makes BEGIN IMMEDIATE on this connection take `lock` first (see
  // WriterLock at the top of this file). Not while a transaction is open.
  void ShareWriterLock(std::shared_ptr<WriterLock> lock) {
    writer_lock_ = std::move(lock);
  }
  WriterLock* writer_lock() const { return writer_lock_.get(); }

  // Runs one or more statements that take no parameters.
  absl::Status Exec(std::string_view sql);

  // Prepares exactly one statement. Trailing text other than whitespace,
  // comments and semicolons is INVALID_ARGUMENT (one statement at a time).
  absl::StatusOr<Statement> Prepare(std::string_view sql);
  // Prepare for statements of fixed text run many times: a statement of
  // the same text that was prepared before and is no longer in use comes
  // from the cache (see the top of this file), and goes back to it when
  // its Statement is destroyed.
  absl::StatusOr<Statement> PrepareCached(std::string_view sql);

  // Idle statements kept per connection.
  static constexpr size_t kCachedStatements = 128;
  // Disables (false) or enables again the statement cache; disabling it
  // also finalizes the statements it holds.
  void SetStatementCacheEnabled(bool enabled);
  size_t cached_statements() const { return idle_.size(); }

  // For a query returning one row with one integer (e.g. a PRAGMA or
  // COUNT(*)); NOT_FOUND when it returns no row. These three run through
  // the statement cache.
  absl::StatusOr<int64_t> QueryInt(std::string_view sql);
  absl::StatusOr<std::string> QueryText(std::string_view sql);

  // True when a table or view named `name` exists in `schema` ("main",
  // "temp").
  absl::StatusOr<bool> TableExists(std::string_view name,
                                   std::string_view schema = "main");

  int64_t Changes() const;
  // Rows inserted, updated or deleted through this connection since it
  // was opened (sqlite3_total_changes64); grows with every such write,
  // committed or not.
  int64_t TotalChanges() const;
  int64_t LastInsertRowId() const;
  // False while a transaction is open.
  bool InAutocommit() const;
  // Makes the statement running on this connection, if any, fail soon with
  // SQLITE_INTERRUPT. The one method that may be called from another thread
  // while the connection is in use.
  void Interrupt();
  const std::string& path() const { return path_; }
  sqlite3* raw() const { return db_; }

 private:
  friend class Statement;
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  // Takes the statement (reset) into the cache, or finalizes it when the
  // cache is disabled or already holds one of the same text.
  void Return(std::string sql, sqlite3_stmt* stmt);
  void ClearStatementCache();
  absl::StatusOr<Statement> Compile(std::string_view sql, bool cache);

  sqlite3* db_;
  std::string path_;
  absl::Duration busy_timeout_;
  std::shared_ptr<WriterLock> writer_lock_;
  bool cache_enabled_ = true;
  // Idle statements, most recently returned first, and an index by text.
  std::list<std::pair<std::string, sqlite3_stmt*>> lru_;
  absl::flat_hash_map<
      std::string, std::list<std::pair<std::string, sqlite3_stmt*>>::iterator>
      idle_;
};

class Transaction {
 public:
  enum class Mode {
    kDeferred,   // BEGIN: locks taken on first read / write
    kImmediate,  // BEGIN IMMEDIATE: the write lock now (waits busy_timeout)
  };

  static absl::StatusOr<Transaction> Begin(Database* db,
                                           Mode mode = Mode::kImmediate);

  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  // Rolls back unless committed.
  ~Transaction();

  absl::Status Commit();
  // Explicit rollback; the destructor then does nothing.
  void Rollback();

 private:
  Transaction(Database* db, WriterLock* writer) : db_(db), writer_(writer) {}
  // Ends the transaction's hold of the writer lock, if it has it.
  void Ended();
  Database* db_;                  // nullptr once committed or rolled back
  WriterLock* writer_ = nullptr;  // held until the transaction ends
};

// The hash (core/model/fingerprint.h's RowHasher) of the row `q` is on: its
// first `columns` columns (every column when negative), each by its storage
// type, so that equal rows hash equal whatever the statement. The statement
// must be on a row (Step returned true).
uint64_t HashCurrentRow(const Statement& q, int columns = -1);

// Steps `q` to its end and returns the order-independent fingerprint of
// every row it returns (HashCurrentRow over all columns).
absl::StatusOr<Fingerprint> HashRows(Statement& q);

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_SQLITE_DB_H_
