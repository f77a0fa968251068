#include "storage/sqlite_sandbox.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace backfill::sqlite {
namespace {

// VM instructions between two looks at the clock.
constexpr int kProgressInstructions = 1000;

std::string Text(const char* s) { return s != nullptr ? s : "?"; }

// The denied action in words, for the refusal message.
std::string Describe(int action, const char* a, const char* b) {
  switch (action) {
    case SQLITE_READ:
      return absl::StrCat("reads table ", Text(a));
    case SQLITE_INSERT:
    case SQLITE_UPDATE:
    case SQLITE_DELETE:
      return absl::StrCat("writes to table ", Text(a));
    case SQLITE_PRAGMA:
      return "uses PRAGMA";
    case SQLITE_ATTACH:
    case SQLITE_DETACH:
      return "attaches or detaches a database";
    case SQLITE_TRANSACTION:
    case SQLITE_SAVEPOINT:
      return "controls a transaction";
    case SQLITE_FUNCTION:
      return absl::StrCat("calls ", Text(b));
    case SQLITE_RECURSIVE:
      return "uses a recursive common table expression";
    default:
      return "changes the database or its schema";
  }
}

}  // namespace

ReadSandbox::ReadSandbox(Database* db, std::string table,
                         absl::Duration timeout)
    : db_(db), table_(std::move(table)), deadline_(absl::Now() + timeout) {
  // Every statement compiled meanwhile must meet the authorizer: none may
  // come from (or go to) the statement cache.
  db_->SetStatementCacheEnabled(false);
  sqlite3_set_authorizer(db_->raw(), &ReadSandbox::Authorize, this);
  sqlite3_progress_handler(db_->raw(), kProgressInstructions,
                           &ReadSandbox::Progress, this);
}

ReadSandbox::~ReadSandbox() {
  sqlite3_progress_handler(db_->raw(), 0, nullptr, nullptr);
  sqlite3_set_authorizer(db_->raw(), nullptr, nullptr);
  db_->SetStatementCacheEnabled(true);
}

std::string ReadSandbox::LastError() const {
  if (sqlite3_errcode(db_->raw()) == SQLITE_OK) return "";
  return sqlite3_errmsg(db_->raw());
}

bool ReadSandbox::LastErrorInterrupted() const {
  return (sqlite3_errcode(db_->raw()) & 0xff) == SQLITE_INTERRUPT;
}

int ReadSandbox::LastErrorOffset() const {
  return sqlite3_error_offset(db_->raw());
}

int ReadSandbox::Authorize(void* self, int action, const char* a, const char* b,
                           const char* schema, const char* /*trigger*/) {
  auto* sandbox = static_cast<ReadSandbox*>(self);
  bool allowed = false;
  switch (action) {
    case SQLITE_SELECT:
      allowed = true;
      break;
    case SQLITE_READ:
      // A read of no column (SELECT COUNT(*) FROM t) names no schema.
      allowed = a != nullptr &&
                (schema == nullptr || absl::EqualsIgnoreCase(schema, "main")) &&
                absl::EqualsIgnoreCase(a, sandbox->table_);
      break;
    case SQLITE_FUNCTION:
      allowed = b != nullptr && !absl::EqualsIgnoreCase(b, "load_extension");
      break;
    default:
      allowed = false;
      break;
  }
  if (allowed) return SQLITE_OK;
  if (sandbox->refused_.empty()) sandbox->refused_ = Describe(action, a, b);
  return SQLITE_DENY;
}

int ReadSandbox::Progress(void* self) {
  auto* sandbox = static_cast<ReadSandbox*>(self);
  if (absl::Now() < sandbox->deadline_) return 0;
  sandbox->timed_out_ = true;
  return 1;
}

}  // namespace backfill::sqlite
