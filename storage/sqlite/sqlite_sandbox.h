// Sandbox: makes one SQLite connection safe, for the life of the object,
// for statements that embed SQL text the engine did not write: the
// predicate of an `affected_by` scope (from a client over the network, so
// it cannot be bound as a value) and a dataset's transform (from a pipeline
// file).
//
// While a sandbox is alive its connection has
//   - an authorizer that decides by allow-lists, never by a block-list:
//     SELECT; reads of the tables the sandbox names (any of their columns,
//     also where a view reads them), of the statement's own common table
//     expressions and subqueries, and of json_each and json_tree; calls of
//     the SQL functions on the allow-list below (IsAllowedFunction) and of
//     those the sandbox adds (the engine's own, which its part of the
//     statement calls); recursive common table expressions only where its
//     options say so. Everything else — any other table or view
//     (sqlite_schema, the engine's _bf_* tables, another dataset's), any
//     virtual table module (dbstat, sqlite_dbpage, pragma_*), any other
//     function (load_extension,
//     fts3_tokenizer, zeroblob, randomblob, sqlite_version, ...),
//     writes, PRAGMA, ATTACH, DETACH, transactions, DDL — is denied, so such
//     a statement does not even compile;
//   - when `timeout` is set, a progress handler that stops the running
//     statement (SQLITE_INTERRUPT) once `timeout` has passed since the
//     sandbox was created;
//   - when `max_value_bytes` is set, that bound on every string or blob the
//     statement makes (SQLITE_LIMIT_LENGTH: "string or blob too big");
//   - its statement cache disabled (sqlite_db.h), so that no statement
//     compiled meanwhile escapes the authorizer.
// All of it is undone by the destructor. For predicates the caller still
// opens the connection read-only (or sets PRAGMA query_only) and checks
// sqlite3_stmt_readonly: the sandbox is one layer of several. Connections
// also never enable fts3_tokenizer (Database::Open).
//
// Ownership: borrows the connection, which must outlive the sandbox.
// Thread-safety: not synchronized; the connection must be used by one
// thread at a time, as always. Sandboxes must not nest on one connection.

#ifndef BACKFILL_STORAGE_SQLITE_SQLITE_SANDBOX_H_
#define BACKFILL_STORAGE_SQLITE_SQLITE_SANDBOX_H_

#include <set>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "storage/sqlite/sqlite_db.h"

namespace backfill::sqlite {

// True for the SQL functions any sandboxed statement may call: SQLite's
// scalar functions that compute only from their arguments (text, numbers,
// dates, JSON, math, printf), its aggregates and window functions, and the
// operators SQLite implements as functions (LIKE, GLOB, MATCH, ->, ->>). Names
// are compared without regard to case. Functions that read or change the
// connection or the process (load_extension, fts3_tokenizer, changes,
// last_insert_rowid, sqlite_*), make blobs of a size the statement chooses
// (zeroblob, randomblob), or differ from run to run (random) are not on it.
// The table-valued functions json_each and json_tree may be read in any
// sandbox.
bool IsAllowedFunction(std::string_view name);

class Sandbox {
 public:
  struct Options {
    // The tables a statement may read (names compared without regard to
    // case), in the main schema, and in the temp schema too where
    // `temp_tables` says so.
    std::set<std::string> tables;
    bool temp_tables = false;
    // Functions allowed besides the allow-list: the engine's own, which
    // its part of the statement calls.
    std::set<std::string> extra_functions;
    // WITH RECURSIVE.
    bool recursive = false;
    // Zero: no time limit.
    absl::Duration timeout = absl::ZeroDuration();
    // Zero: SQLite's own limit.
    int max_value_bytes = 0;
  };

  Sandbox(Database* db, Options options);
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;
  ~Sandbox();

  // What the authorizer denied first, in words ("writes to table x",
  // "reads table y", "calls zeroblob, which is not on the allow-list");
  // empty when it denied nothing.
  const std::string& refused() const { return refused_; }
  // True once the progress handler stopped a statement for the timeout.
  bool timed_out() const { return timed_out_; }

  // SQLite's message for the connection's last failed call ("near \">\":
  // syntax error"); empty when the last call succeeded.
  std::string LastError() const;
  // True when the connection's last failed call was interrupted (by the
  // timeout or by Database::Interrupt).
  bool LastErrorInterrupted() const;
  // True when the last failed call made a value over max_value_bytes.
  bool LastErrorTooBig() const;
  // The byte offset in the statement's SQL that the last failed call's
  // error refers to, -1 when it refers to no particular place.
  int LastErrorOffset() const;

 private:
  static int Authorize(void* self, int action, const char* a, const char* b,
                       const char* schema, const char* view);
  static int Progress(void* self);
  bool Allowed(int action, const char* a, const char* b,
               const char* schema) const;
  bool IsTable(const char* name) const;

  Database* db_;
  Options options_;
  // Lower-case names that are not the statement's own (tables and views of
  // the main and temp schemas, virtual table modules), read when the
  // sandbox is made: a read of any other name is of a common table
  // expression or a subquery.
  std::set<std::string> objects_;
  absl::Time deadline_;
  int saved_length_limit_ = -1;
  std::string refused_;
  bool timed_out_ = false;
};

// The sandbox of an `affected_by` predicate over `table`: reads of that
// table only, no recursion, stopped after `timeout`, values of at most
// kPredicateMaxValueBytes.
inline constexpr int kPredicateMaxValueBytes = 4 << 20;
class ReadSandbox : public Sandbox {
 public:
  ReadSandbox(Database* db, std::string table, absl::Duration timeout,
              std::set<std::string> extra_functions = {});
};

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_SQLITE_SANDBOX_H_
