#include "storage/sqlite/sqlite_db.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/base/call_once.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/sv.h"
#include "core/model/fingerprint.h"

namespace backfill::sqlite {
namespace {

absl::StatusCode CodeFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_CANTOPEN:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CONSTRAINT:
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_FULL:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_IOERR:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status ErrorStatus(sqlite3* db, int rc, std::string_view what,
                         std::string_view sql) {
  const char* msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  std::string text = absl::StrCat("sqlite: ", Sv(what), ": ", msg);
  if (!sql.empty()) absl::StrAppend(&text, " (in \"", SqlHead(sql), "\")");
  return absl::Status(CodeFor(rc), text);
}

// True when `sql` holds nothing but whitespace, comments and semicolons.
bool OnlyTrivia(sqlite3* db, const char* sql) {
  while (sql != nullptr && *sql != '\0') {
    sqlite3_stmt* stmt = nullptr;
    const char* tail = nullptr;
    int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, &tail);
    if (rc != SQLITE_OK) return false;
    if (stmt != nullptr) {
      sqlite3_finalize(stmt);
      return false;
    }
    if (tail == sql) break;
    sql = tail;
  }
  return true;
}

// "mode 0444, owner uid 0 gid 0" of `path`, or "" when it cannot be read.
std::string ModeText(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";
  return absl::StrFormat("mode %04o, owner uid %d gid %d", st.st_mode & 07777,
                         st.st_uid, st.st_gid);
}

// True when this process (its effective ids) may write `path`.
bool Writable(const std::string& path) {
  return faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) == 0;
}

}  // namespace

std::string NotWritableReason(const std::string& path) {
  if (path.empty() || path == ":memory:" || absl::StartsWith(path, "file:")) {
    return "";
  }
  const std::string who =
      absl::StrFormat("uid %d gid %d", geteuid(), getegid());
  std::error_code ec;
  const std::filesystem::path file(path);
  const bool exists = std::filesystem::exists(file, ec);
  if (exists && !Writable(path)) {
    return absl::StrCat(path, " is not writable by this process (", who,
                        "; the file has ", ModeText(path),
                        "): give that user write permission on it");
  }
  // In WAL mode SQLite creates, writes and removes the -wal and -shm files
  // beside the database: the directory must let it.
  std::filesystem::path dir = file.parent_path();
  if (dir.empty()) dir = ".";
  if (faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0) {
    return absl::StrCat(
        "the directory ", dir.string(), " of ", path,
        " is not writable by this process (", who, "; the directory has ",
        ModeText(dir.string()),
        "), and SQLite must create the file's -wal and -shm files in it: "
        "give that user write permission on the directory");
  }
  for (const char* suffix : {"-wal", "-shm"}) {
    const std::string side = path + suffix;
    if (std::filesystem::exists(side, ec) && !Writable(side)) {
      return absl::StrCat(side, " is not writable by this process (", who,
                          "; the file has ", ModeText(side),
                          "): give that user write permission on it (or, "
                          "with no process using the database, remove it)");
    }
  }
  return "";
}

std::string QuoteIdentifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    out.push_back(c);
    if (c == '"') out.push_back('"');
  }
  out.push_back('"');
  return out;
}

std::string SqlHead(std::string_view sql) {
  constexpr size_t kMax = 60;
  std::string out;
  bool space = false;
  for (char c : sql) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
    if (out.size() >= kMax) {
      out += "...";
      break;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Statement

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      stmt_(std::exchange(other.stmt_, nullptr)),
      sql_(std::move(other.sql_)),
      cache_(std::exchange(other.cache_, nullptr)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    Release();
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    sql_ = std::move(other.sql_);
    cache_ = std::exchange(other.cache_, nullptr);
  }
  return *this;
}

Statement::~Statement() { Release(); }

void Statement::Release() {
  if (stmt_ == nullptr) return;
  if (cache_ != nullptr) {
    cache_->Return(std::move(sql_), stmt_);
  } else {
    sqlite3_finalize(stmt_);
  }
  stmt_ = nullptr;
  cache_ = nullptr;
}

absl::Status Statement::Check(int rc, std::string_view what) const {
  if (rc == SQLITE_OK) return absl::OkStatus();
  if (rc == SQLITE_RANGE) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sqlite: ", Sv(what), ": parameter index out of range (in \"",
        SqlHead(sql_), "\")"));
  }
  return ErrorStatus(db_, rc, what, sql_);
}

absl::Status Statement::BindInt(int index, int64_t value) {
  return Check(sqlite3_bind_int64(stmt_, index, value), "bind");
}
absl::Status Statement::BindDouble(int index, double value) {
  return Check(sqlite3_bind_double(stmt_, index, value), "bind");
}
absl::Status Statement::BindText(int index, std::string_view value) {
  return Check(sqlite3_bind_text64(stmt_, index, value.data(), value.size(),
                                   SQLITE_TRANSIENT, SQLITE_UTF8),
               "bind");
}
absl::Status Statement::BindNull(int index) {
  return Check(sqlite3_bind_null(stmt_, index), "bind");
}

int Statement::ParameterIndex(std::string_view name) const {
  return sqlite3_bind_parameter_index(stmt_, std::string(name).c_str());
}

int Statement::ParameterCount() const {
  return sqlite3_bind_parameter_count(stmt_);
}

std::string Statement::ParameterName(int index) const {
  const char* name = sqlite3_bind_parameter_name(stmt_, index);
  return name != nullptr ? name : "";
}

#define BACKFILL_BIND_BY_NAME_(call)                                        \
  int index = ParameterIndex(name);                                         \
  if (index == 0) {                                                         \
    return absl::InvalidArgumentError(absl::StrCat(                         \
        "sqlite: no parameter ", Sv(name), " in \"", SqlHead(sql_), "\"")); \
  }                                                                         \
  return call

absl::Status Statement::BindInt(std::string_view name, int64_t value) {
  BACKFILL_BIND_BY_NAME_(BindInt(index, value));
}
absl::Status Statement::BindDouble(std::string_view name, double value) {
  BACKFILL_BIND_BY_NAME_(BindDouble(index, value));
}
absl::Status Statement::BindText(std::string_view name,
                                 std::string_view value) {
  BACKFILL_BIND_BY_NAME_(BindText(index, value));
}
absl::Status Statement::BindNull(std::string_view name) {
  BACKFILL_BIND_BY_NAME_(BindNull(index));
}
#undef BACKFILL_BIND_BY_NAME_

absl::StatusOr<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return ErrorStatus(db_, rc, "step", sql_);
}

absl::Status Statement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

int Statement::ColumnCount() const { return sqlite3_column_count(stmt_); }

std::string Statement::ColumnName(int index) const {
  const char* name = sqlite3_column_name(stmt_, index);
  return name != nullptr ? name : "";
}

ColumnType Statement::GetColumnType(int index) const {
  switch (sqlite3_column_type(stmt_, index)) {
    case SQLITE_INTEGER:
      return ColumnType::kInteger;
    case SQLITE_FLOAT:
      return ColumnType::kReal;
    case SQLITE_TEXT:
      return ColumnType::kText;
    case SQLITE_BLOB:
      return ColumnType::kBlob;
    default:
      return ColumnType::kNull;
  }
}

bool Statement::ColumnIsNull(int index) const {
  return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

int64_t Statement::ColumnInt(int index) const {
  return sqlite3_column_int64(stmt_, index);
}

double Statement::ColumnDouble(int index) const {
  return sqlite3_column_double(stmt_, index);
}

std::string Statement::ColumnText(int index) const {
  if (GetColumnType(index) == ColumnType::kBlob) {
    const void* data = sqlite3_column_blob(stmt_, index);
    int n = sqlite3_column_bytes(stmt_, index);
    return data != nullptr ? std::string(static_cast<const char*>(data), n)
                           : std::string();
  }
  const unsigned char* text = sqlite3_column_text(stmt_, index);
  if (text == nullptr) return "";
  int n = sqlite3_column_bytes(stmt_, index);
  return std::string(reinterpret_cast<const char*>(text), n);
}

absl::Status Statement::Reset() {
  // sqlite3_reset returns the error of the last step again; that error was
  // already reported by Step(), so only the reset itself matters here.
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  return absl::OkStatus();
}

bool Statement::IsReadOnly() const { return sqlite3_stmt_readonly(stmt_); }

std::string Statement::Sql() const {
  const char* sql = sqlite3_sql(stmt_);
  return sql != nullptr ? sql : "";
}

void ConfigureLibrary() {
  static absl::once_flag once;
  absl::call_once(once, [] {
    // SQLITE_MISUSE when SQLite was initialized before (by code that used
    // it directly): its defaults then stay, which is correct, only slower.
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  });
}

// ---------------------------------------------------------------------------
// Database

absl::StatusOr<std::unique_ptr<Database>> Database::Open(
    const std::string& path, const OpenOptions& options) {
  ConfigureLibrary();
  int flags = SQLITE_OPEN_NOMUTEX;
  if (options.read_only) {
    flags |= SQLITE_OPEN_READONLY;
  } else {
    flags |= SQLITE_OPEN_READWRITE;
    if (options.create) flags |= SQLITE_OPEN_CREATE;
  }
  if (!options.read_only) {
    // SQLite opens a file it may not write read-only without a word, and
    // every write then fails: refuse the connection instead, saying why.
    if (std::string why = NotWritableReason(path); !why.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("sqlite: cannot open ", path, " for writing: ", why));
    }
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = absl::Status(
        CodeFor(rc),
        absl::StrCat("sqlite: cannot open ", path, ": ",
                     db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_close_v2(db);
    return status;
  }
  sqlite3_extended_result_codes(db, 1);
  if (!options.read_only && sqlite3_db_readonly(db, "main") == 1) {
    // Whatever the check above did not foresee (a read-only mount).
    sqlite3_close_v2(db);
    return absl::FailedPreconditionError(absl::StrCat(
        "sqlite: cannot open ", path,
        " for writing: SQLite opened it read-only (a read-only file system, "
        "or a file this process may not write)"));
  }
  // fts3_tokenizer() with two arguments installs a tokenizer from a raw
  // pointer, and with one returns a pointer of the library's: neither has a
  // use here, and Debian's SQLite enables it at build time. Defensive mode
  // keeps SQL from corrupting the file on purpose (writable_schema and
  // friends).
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  std::unique_ptr<Database> out(new Database(db, path));
  absl::Status status = out->SetBusyTimeout(options.busy_timeout);
  if (!status.ok()) return status;
  return out;
}

Database::~Database() {
  ClearStatementCache();
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

void Database::Return(std::string sql, sqlite3_stmt* stmt) {
  // sqlite3_reset returns the error of the last step again; Step() reported
  // it already.
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  if (!cache_enabled_ || idle_.contains(sql)) {
    sqlite3_finalize(stmt);
    return;
  }
  lru_.emplace_front(std::move(sql), stmt);
  idle_.emplace(lru_.front().first, lru_.begin());
  if (lru_.size() > kCachedStatements) {
    idle_.erase(lru_.back().first);
    sqlite3_finalize(lru_.back().second);
    lru_.pop_back();
  }
}

void Database::ClearStatementCache() {
  for (auto& [sql, stmt] : lru_) sqlite3_finalize(stmt);
  lru_.clear();
  idle_.clear();
}

void Database::SetStatementCacheEnabled(bool enabled) {
  cache_enabled_ = enabled;
  if (!enabled) ClearStatementCache();
}

absl::Status Database::SetBusyTimeout(absl::Duration timeout) {
  busy_timeout_ = timeout;
  int rc = sqlite3_busy_timeout(
      db_, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  if (rc != SQLITE_OK) return ErrorStatus(db_, rc, "busy_timeout", "");
  return absl::OkStatus();
}

absl::Status Database::Exec(std::string_view sql) {
  std::string text(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return absl::Status(
        CodeFor(rc),
        absl::StrCat("sqlite: exec: ", msg, " (in \"", SqlHead(sql), "\")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Statement> Database::Prepare(std::string_view sql) {
  return Compile(sql, false);
}

absl::StatusOr<Statement> Database::PrepareCached(std::string_view sql) {
  if (cache_enabled_) {
    auto it = idle_.find(Sv(sql));
    if (it != idle_.end()) {
      auto entry = it->second;
      idle_.erase(it);
      Statement out(db_, entry->second, std::move(entry->first), this);
      lru_.erase(entry);
      return out;
    }
  }
  return Compile(sql, cache_enabled_);
}

absl::StatusOr<Statement> Database::Compile(std::string_view sql, bool cache) {
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()),
                              &stmt, &tail);
  if (rc != SQLITE_OK) return ErrorStatus(db_, rc, "prepare", sql);
  if (stmt == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("sqlite: no statement in \"", SqlHead(sql), "\""));
  }
  Statement out(db_, stmt, std::string(sql), cache ? this : nullptr);
  size_t used = static_cast<size_t>(tail - sql.data());
  if (used < sql.size()) {
    std::string rest(sql.substr(used));
    if (!OnlyTrivia(db_, rest.c_str())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sqlite: more than one statement in \"", SqlHead(sql), "\""));
    }
  }
  return out;
}

absl::StatusOr<int64_t> Database::QueryInt(std::string_view sql) {
  absl::StatusOr<Statement> stmt = PrepareCached(sql);
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    return absl::NotFoundError(
        absl::StrCat("sqlite: no row from \"", SqlHead(sql), "\""));
  }
  return stmt->ColumnInt(0);
}

absl::StatusOr<std::string> Database::QueryText(std::string_view sql) {
  absl::StatusOr<Statement> stmt = PrepareCached(sql);
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    return absl::NotFoundError(
        absl::StrCat("sqlite: no row from \"", SqlHead(sql), "\""));
  }
  return stmt->ColumnText(0);
}

absl::StatusOr<bool> Database::TableExists(std::string_view name,
                                           std::string_view schema) {
  std::string sql = absl::StrCat(
      "SELECT 1 FROM ", QuoteIdentifier(schema),
      ".sqlite_master WHERE type IN ('table', 'view') AND name = ?1");
  absl::StatusOr<Statement> stmt = PrepareCached(sql);
  if (!stmt.ok()) return stmt.status();
  absl::Status bound = stmt->BindText(1, name);
  if (!bound.ok()) return bound;
  return stmt->Step();
}

int64_t Database::Changes() const { return sqlite3_changes64(db_); }

int64_t Database::TotalChanges() const { return sqlite3_total_changes64(db_); }

int64_t Database::LastInsertRowId() const {
  return sqlite3_last_insert_rowid(db_);
}

bool Database::InAutocommit() const { return sqlite3_get_autocommit(db_); }

void Database::Interrupt() { sqlite3_interrupt(db_); }

// ---------------------------------------------------------------------------
// Transaction

bool WriterLock::Acquire(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const bool free =
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](bool* held) { return !*held; }, &held_),
                           timeout);
  if (free) held_ = true;
  return free;
}

void WriterLock::Release() {
  absl::MutexLock lock(&mu_);
  held_ = false;
}

absl::StatusOr<Transaction> Transaction::Begin(Database* db, Mode mode) {
  WriterLock* writer = nullptr;
  if (mode == Mode::kImmediate && db->writer_lock() != nullptr &&
      db->writer_lock()->Acquire(db->busy_timeout())) {
    writer = db->writer_lock();
  }
  absl::StatusOr<Statement> begin =
      db->PrepareCached(mode == Mode::kImmediate ? "BEGIN IMMEDIATE" : "BEGIN");
  absl::Status status = begin.ok() ? begin->Run() : begin.status();
  if (!status.ok()) {
    if (writer != nullptr) writer->Release();
    return status;
  }
  return Transaction(db, writer);
}

Transaction::Transaction(Transaction&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      writer_(std::exchange(other.writer_, nullptr)) {}

Transaction::~Transaction() { Rollback(); }

absl::Status Transaction::Commit() {
  if (db_ == nullptr) {
    return absl::FailedPreconditionError(
        "sqlite: commit of a transaction that is no longer open");
  }
  absl::StatusOr<Statement> commit = db_->PrepareCached("COMMIT");
  absl::Status status = commit.ok() ? commit->Run() : commit.status();
  if (!status.ok()) {
    Rollback();
    return status;
  }
  db_ = nullptr;
  Ended();
  return absl::OkStatus();
}

void Transaction::Rollback() {
  if (db_ == nullptr) return;
  // SQLite may already have rolled back on its own (e.g. after SQLITE_FULL);
  // then there is nothing to undo.
  if (!db_->InAutocommit()) db_->Exec("ROLLBACK").IgnoreError();
  db_ = nullptr;
  Ended();
}

void Transaction::Ended() {
  if (writer_ != nullptr) std::exchange(writer_, nullptr)->Release();
}

uint64_t HashCurrentRow(const Statement& q, int columns) {
  // One buffer per thread for every row it hashes (every caller hashes
  // rows in a loop: a table, a partition, a query's result).
  thread_local RowHasher h;
  h.Clear();
  const int n = columns < 0 ? q.ColumnCount() : columns;
  for (int i = 0; i < n; ++i) {
    switch (q.GetColumnType(i)) {
      case ColumnType::kNull:
        h.AddNull();
        break;
      case ColumnType::kInteger:
        h.AddInt(q.ColumnInt(i));
        break;
      case ColumnType::kReal:
        h.AddReal(q.ColumnDouble(i));
        break;
      case ColumnType::kText:
        h.AddText(q.ColumnText(i));
        break;
      case ColumnType::kBlob:
        h.AddBlob(q.ColumnText(i));
        break;
    }
  }
  return h.Finish();
}

absl::StatusOr<Fingerprint> HashRows(Statement& q) {
  Fingerprint fp;
  while (true) {
    absl::StatusOr<bool> row = q.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    fp.AddRow(HashCurrentRow(q));
  }
  return fp;
}

}  // namespace backfill::sqlite
