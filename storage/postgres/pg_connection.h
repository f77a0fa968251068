// A small RAII wrapper over libpq, for the PostgreSQL warehouse engine (the
// only code that links libpq).
//
//   PgConnection   one connection (PGconn*). Owns it, and the cancel handle
//                  made for it; closes both on destruction.
//   PgResult       the rows of one statement, as text (NULL is nullopt).
//   PgTransaction  a scope guard: BEGIN on Begin(), ROLLBACK on destruction
//                  unless Commit() succeeded.
//
// Values are always bound ($1..$n, text format), never spliced; identifiers
// are quoted with QuoteIdentifier (libpq's PQescapeIdentifier). Every
// failure is an absl::Status carrying the server's SQLSTATE and message and
// the first words of the statement; nothing throws. Codes, chosen so that
// the job runner's rules for retrying hold (see StatusFromSqlState):
//   connection lost or refused, server shutting down, system I/O error
//       -> UNAVAILABLE (transient: the runner retries with backoff)
//   connecting to a database or as a role that does not exist
//       -> FAILED_PRECONDITION; authentication refused -> PERMISSION_DENIED;
//       a malformed connection string -> INVALID_ARGUMENT (none is
//       retried: only the configuration can fix them)
//   disk full, out of memory, too many connections -> RESOURCE_EXHAUSTED
//   serialization failure, deadlock -> ABORTED (retryable)
//   statement timeout -> DEADLINE_EXCEEDED; Cancel() -> CANCELLED
//   syntax, undefined object, data exception, read-only transaction
//       -> INVALID_ARGUMENT (a bad statement does not get better)
//   integrity constraint -> FAILED_PRECONDITION
//   data or index corrupted -> DATA_LOSS; anything else -> INTERNAL
//
// Thread-safety: a PgConnection is used by one thread at a time (libpq
// connections are not shared); its owner serializes. Cancel() alone may be
// called from any thread while another runs a statement.

#ifndef BACKFILL_STORAGE_POSTGRES_PG_CONNECTION_H_
#define BACKFILL_STORAGE_POSTGRES_PG_CONNECTION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

struct pg_conn;
struct pg_cancel;

namespace backfill::postgres {

using PgValue = std::optional<std::string>;  // text; nullopt is NULL

struct PgResult {
  std::vector<std::string> columns;
  // Each column's type OID (pg_type.oid: 23 for integer, 25 for text).
  std::vector<uint32_t> types;
  std::vector<std::vector<PgValue>> rows;
  // Rows the command affected (INSERT, UPDATE, DELETE, ...), else 0.
  int64_t affected = 0;
  // The server's command tag ("INSERT 0 1", "COMMIT", "ROLLBACK").
  std::string command;
};

// The status for a server error with `sqlstate` (five characters) and
// `message`; `cancelled` says Cancel() was asked (57014 is then CANCELLED
// rather than a statement timeout).
absl::Status StatusFromSqlState(std::string_view sqlstate,
                                std::string_view message,
                                bool cancelled = false);

// What a connection string names, as libpq parses it (PQconninfoParse),
// with libpq's defaults where it says nothing.
struct PgDsnInfo {
  std::string host;    // "" for libpq's default (a local socket)
  std::string port;    // "" for libpq's default (5432)
  std::string dbname;  // "" for libpq's default (the user's name)
  std::string user;
  bool has_password = false;  // `password=` or a password in the URI
};

// INVALID_ARGUMENT with libpq's message when `dsn` does not parse.
absl::StatusOr<PgDsnInfo> ParseDsn(const std::string& dsn);

class PgConnection {
 public:
  // Connects with a libpq connection string (key=value pairs or a URI).
  // Passwords come from libpq's own sources (PGPASSWORD, ~/.pgpass,
  // PGPASSFILE); nothing here reads or logs one. `connect_timeout` bounds
  // the connection (libpq's own parameter, at least 2 s).
  static absl::StatusOr<std::unique_ptr<PgConnection>> Connect(
      const std::string& dsn,
      absl::Duration connect_timeout = absl::Seconds(10));

  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs one statement with `params` bound to $1..$n (as text, the server
  // casts them to the parameters' types) and returns its rows.
  absl::StatusOr<PgResult> Exec(std::string_view sql,
                                const std::vector<PgValue>& params = {});

  // Prepares `sql` (one statement, as the unnamed prepared statement) and
  // returns its output columns and their types without running it; no
  // rows. The server's errors as for Exec (INVALID_ARGUMENT for a
  // statement that does not compile).
  absl::StatusOr<PgResult> Describe(std::string_view sql);

  // Runs `sql`, one or more statements separated by semicolons, without
  // parameters (libpq's simple protocol); their rows are discarded. For
  // scripts of the caller's own, never for statements holding values.
  absl::Status ExecScript(std::string_view sql);

  // The server stops any later statement of this connection that runs
  // longer than `timeout` (DEADLINE_EXCEEDED); zero means no limit.
  absl::Status SetStatementTimeout(absl::Duration timeout);

  // Asks the server to stop the statement this connection runs now, if
  // any (it then fails with CANCELLED). Any thread; returns at once.
  absl::Status Cancel();

  // `name` quoted as an identifier ("a""b"), for names that come from
  // loaded specs only.
  absl::StatusOr<std::string> QuoteIdentifier(std::string_view name);

  // The connection is open and usable (false once the server went away).
  bool Healthy() const;
  // The session is outside any transaction and runs no statement, as libpq
  // last heard from the server (no round trip); false when unknown.
  bool Idle() const;

  // What the session's temporary objects were made from, for the engine
  // that keeps them between its calls (PgHooks: the staging's output
  // table): a key naming them ("" when none are known to be kept) and the
  // rows they took since they were made. They die with the session, and
  // so does this.
  struct SessionScratch {
    std::string key;
    int64_t rows = 0;
  };
  SessionScratch& session_scratch() { return session_scratch_; }
  // The server's version number (150004 for 15.4).
  int ServerVersion() const;

 private:
  PgConnection(pg_conn* conn, pg_cancel* cancel)
      : conn_(conn), cancel_(cancel) {}

  pg_conn* conn_;
  pg_cancel* cancel_;  // made at connect: PQcancel on it is thread-safe
  std::atomic<bool> cancel_requested_{false};
  SessionScratch session_scratch_;
};

class PgTransaction {
 public:
  explicit PgTransaction(PgConnection* conn) : conn_(conn) {}
  ~PgTransaction();  // ROLLBACK unless committed
  PgTransaction(const PgTransaction&) = delete;
  PgTransaction& operator=(const PgTransaction&) = delete;

  // BEGIN, with `mode` after it ("ISOLATION LEVEL REPEATABLE READ, READ
  // ONLY"); a constant of the caller's, never user input.
  absl::Status Begin(std::string_view mode = "");
  // ABORTED when the server rolled back instead (a statement of the
  // transaction had failed: PostgreSQL then answers COMMIT with ROLLBACK).
  absl::Status Commit();

 private:
  PgConnection* conn_;
  bool open_ = false;
};

}  // namespace backfill::postgres

#endif  // BACKFILL_STORAGE_POSTGRES_PG_CONNECTION_H_
