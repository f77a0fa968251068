#include "storage/sqlite/sqlite_sandbox.h"

#include <sqlite3.h>

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
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
      return absl::StrCat("calls ", Text(b),
                          ", which is not on the allow-list of functions");
    case SQLITE_RECURSIVE:
      return "uses a recursive common table expression";
    default:
      return "changes the database or its schema";
  }
}

}  // namespace

bool IsAllowedFunction(std::string_view name) {
  static const auto* const kAllowed = new absl::flat_hash_set<std::string>{
      // Operators SQLite calls as functions (MATCH: full-text search).
      "like", "glob", "match", "->", "->>",
      // Core scalar functions over their arguments.
      "abs", "char", "coalesce", "hex", "ifnull", "iif", "instr", "length",
      "likelihood", "likely", "lower", "ltrim", "max", "min", "nullif", "quote",
      "replace", "round", "rtrim", "sign", "substr", "substring", "trim",
      "typeof", "unicode", "unlikely", "upper",
      // Formatting: what they make is bounded by max_value_bytes where the
      // statement is a client's.
      "printf", "format",
      // Dates and times.
      "date", "time", "datetime", "julianday", "strftime", "unixepoch",
      "current_date", "current_time", "current_timestamp",
      // Aggregates.
      "avg", "count", "group_concat", "sum", "total",
      // Window functions.
      "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile",
      "lag", "lead", "first_value", "last_value", "nth_value",
      // Math.
      "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil",
      "ceiling", "cos", "cosh", "degrees", "exp", "floor", "ln", "log", "log10",
      "log2", "mod", "pi", "pow", "power", "radians", "sin", "sinh", "sqrt",
      "tan", "tanh", "trunc",
      // JSON.
      "json", "json_array", "json_array_length", "json_extract",
      "json_group_array", "json_group_object", "json_insert", "json_object",
      "json_patch", "json_quote", "json_remove", "json_replace", "json_set",
      "json_type", "json_valid"};
  return kAllowed->contains(absl::AsciiStrToLower(std::string(name)));
}

Sandbox::Sandbox(Database* db, Options options)
    : db_(db),
      options_(std::move(options)),
      deadline_(options_.timeout > absl::ZeroDuration()
                    ? absl::Now() + options_.timeout
                    : absl::InfiniteFuture()) {
  // The table-valued JSON functions declare their schema on a connection's
  // first use of them, which the authorizer would see as a schema change:
  // that first use happens here, outside it.
  db_->Prepare("SELECT 1 FROM json_each('[]'), json_tree('[]')").IgnoreError();
  // The names of the database's objects, before the authorizer would see
  // these reads.
  absl::StatusOr<Statement> names = db_->Prepare(
      "SELECT name FROM main.sqlite_schema WHERE type IN ('table', 'view') "
      "UNION ALL SELECT name FROM temp.sqlite_schema WHERE type IN ('table', "
      "'view') UNION ALL SELECT name FROM pragma_module_list");
  while (names.ok()) {
    absl::StatusOr<bool> row = names->Step();
    if (!row.ok() || !*row) break;
    objects_.insert(absl::AsciiStrToLower(names->ColumnText(0)));
  }
  // Every statement compiled meanwhile must meet the authorizer: none may
  // come from (or go to) the statement cache.
  db_->SetStatementCacheEnabled(false);
  sqlite3_set_authorizer(db_->raw(), &Sandbox::Authorize, this);
  if (options_.timeout > absl::ZeroDuration()) {
    sqlite3_progress_handler(db_->raw(), kProgressInstructions,
                             &Sandbox::Progress, this);
  }
  if (options_.max_value_bytes > 0) {
    saved_length_limit_ = sqlite3_limit(db_->raw(), SQLITE_LIMIT_LENGTH,
                                        options_.max_value_bytes);
  }
}

Sandbox::~Sandbox() {
  if (saved_length_limit_ >= 0) {
    sqlite3_limit(db_->raw(), SQLITE_LIMIT_LENGTH, saved_length_limit_);
  }
  if (options_.timeout > absl::ZeroDuration()) {
    sqlite3_progress_handler(db_->raw(), 0, nullptr, nullptr);
  }
  sqlite3_set_authorizer(db_->raw(), nullptr, nullptr);
  db_->SetStatementCacheEnabled(true);
}

std::string Sandbox::LastError() const {
  if (sqlite3_errcode(db_->raw()) == SQLITE_OK) return "";
  return sqlite3_errmsg(db_->raw());
}

bool Sandbox::LastErrorInterrupted() const {
  return (sqlite3_errcode(db_->raw()) & 0xff) == SQLITE_INTERRUPT;
}

bool Sandbox::LastErrorTooBig() const {
  return (sqlite3_errcode(db_->raw()) & 0xff) == SQLITE_TOOBIG;
}

int Sandbox::LastErrorOffset() const {
  return sqlite3_error_offset(db_->raw());
}

bool Sandbox::IsTable(const char* name) const {
  if (name == nullptr) return false;
  // Table-valued functions over their arguments.
  if (absl::EqualsIgnoreCase(name, "json_each") ||
      absl::EqualsIgnoreCase(name, "json_tree")) {
    return true;
  }
  for (const std::string& t : options_.tables) {
    if (absl::EqualsIgnoreCase(t, name)) return true;
  }
  return false;
}

bool Sandbox::Allowed(int action, const char* a, const char* b,
                      const char* schema) const {
  switch (action) {
    case SQLITE_SELECT:
      return true;
    case SQLITE_READ: {
      if (a == nullptr) return false;
      // A read of no column (SELECT COUNT(*) FROM t) names no schema.
      const bool in_schema =
          schema == nullptr || absl::EqualsIgnoreCase(schema, "main") ||
          (options_.temp_tables && absl::EqualsIgnoreCase(schema, "temp"));
      if (in_schema && IsTable(a)) return true;
      // The statement's own common table expressions and subqueries are
      // named by nothing of the database's. (A name made to look like one
      // of them, `sqlite_...`, is refused.)
      const std::string name = absl::AsciiStrToLower(a);
      return objects_.count(name) == 0 && !absl::StartsWith(name, "sqlite_");
    }
    case SQLITE_FUNCTION:
      if (b == nullptr) return false;
      if (IsAllowedFunction(b)) return true;
      for (const std::string& f : options_.extra_functions) {
        if (absl::EqualsIgnoreCase(f, b)) return true;
      }
      return false;
    case SQLITE_RECURSIVE:
      return options_.recursive;
    default:
      return false;
  }
}

int Sandbox::Authorize(void* self, int action, const char* a, const char* b,
                       const char* schema, const char* view) {
  auto* sandbox = static_cast<Sandbox*>(self);
  // Where a read comes from (`view`: a view's or a common table
  // expression's name) does not count: a common table expression may take
  // any name.
  if (sandbox->Allowed(action, a, b, schema)) return SQLITE_OK;
  if (sandbox->refused_.empty()) sandbox->refused_ = Describe(action, a, b);
  return SQLITE_DENY;
}

int Sandbox::Progress(void* self) {
  auto* sandbox = static_cast<Sandbox*>(self);
  if (absl::Now() < sandbox->deadline_) return 0;
  sandbox->timed_out_ = true;
  return 1;
}

namespace {

Sandbox::Options PredicateOptions(std::string table, absl::Duration timeout,
                                  std::set<std::string> extra_functions) {
  Sandbox::Options options;
  options.tables.insert(std::move(table));
  options.extra_functions = std::move(extra_functions);
  options.timeout = timeout;
  options.max_value_bytes = kPredicateMaxValueBytes;
  return options;
}

}  // namespace

ReadSandbox::ReadSandbox(Database* db, std::string table,
                         absl::Duration timeout,
                         std::set<std::string> extra_functions)
    : Sandbox(db, PredicateOptions(std::move(table), timeout,
                                   std::move(extra_functions))) {}

}  // namespace backfill::sqlite
