// ReadSandbox: makes one SQLite connection safe, for the life of the
// object, for statements that embed SQL text from a client (the predicate
// of an `affected_by` scope, which cannot be bound as a value).
//
// While a sandbox is alive its connection has
//   - an authorizer that allows only SELECT, reads of one table of the main
//     schema (any of its columns) and calls of SQL functions other than
//     load_extension; everything else — any other table (sqlite_schema, the
//     engine's _bf_* tables, another dataset's), writes, PRAGMA, ATTACH,
//     DETACH, transactions, DDL, recursive common table expressions — is
//     denied, so such a statement does not even compile;
//   - a progress handler that stops the running statement (SQLITE_INTERRUPT)
//     once `timeout` has passed since the sandbox was created;
//   - its statement cache disabled (sqlite_db.h), so that no statement
//     compiled meanwhile escapes the authorizer.
// All three are undone by the destructor. The caller still opens the
// connection read-only (or sets PRAGMA query_only) and checks
// sqlite3_stmt_readonly: the sandbox is one layer of several.
//
// Ownership: borrows the connection, which must outlive the sandbox.
// Thread-safety: not synchronized; the connection must be used by one
// thread at a time, as always. Sandboxes must not nest on one connection.

#ifndef BACKFILL_STORAGE_SQLITE_SANDBOX_H_
#define BACKFILL_STORAGE_SQLITE_SANDBOX_H_

#include <string>

#include "absl/time/time.h"
#include "storage/sqlite_db.h"

namespace backfill::sqlite {

class ReadSandbox {
 public:
  ReadSandbox(Database* db, std::string table, absl::Duration timeout);
  ReadSandbox(const ReadSandbox&) = delete;
  ReadSandbox& operator=(const ReadSandbox&) = delete;
  ~ReadSandbox();

  // What the authorizer denied first, in words ("writes to table x",
  // "reads table y", "uses PRAGMA"); empty when it denied nothing.
  const std::string& refused() const { return refused_; }
  // True once the progress handler stopped a statement for the timeout.
  bool timed_out() const { return timed_out_; }

  // SQLite's message for the connection's last failed call ("near \">\":
  // syntax error"); empty when the last call succeeded.
  std::string LastError() const;
  // True when the connection's last failed call was interrupted (by the
  // timeout or by Database::Interrupt).
  bool LastErrorInterrupted() const;
  // The byte offset in the statement's SQL that the last failed call's
  // error refers to, -1 when it refers to no particular place.
  int LastErrorOffset() const;

 private:
  static int Authorize(void* self, int action, const char* a, const char* b,
                       const char* schema, const char* trigger);
  static int Progress(void* self);

  Database* db_;
  std::string table_;
  absl::Time deadline_;
  std::string refused_;
  bool timed_out_ = false;
};

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_SANDBOX_H_
