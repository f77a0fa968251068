#include "storage/postgres/pg_connection.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace backfill::postgres {
namespace {

// The first words of a statement, for messages.
std::string Head(std::string_view sql) {
  constexpr size_t kMax = 80;
  const std::string prefix(sql.substr(0, kMax + 1));
  std::string head(absl::StripAsciiWhitespace(prefix));
  for (char& c : head) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (head.size() > kMax) head = absl::StrCat(head.substr(0, kMax), "...");
  return head;
}

std::string Trimmed(const char* text) {
  return text == nullptr ? std::string()
                         : std::string(absl::StripAsciiWhitespace(text));
}

// Notices (e.g. "table does not exist, skipping") are not errors and have
// no place on the daemon's stderr.
void DropNotice(void*, const char*) {}

// Why a connection could not be made. libpq gives no SQLSTATE for it, so
// the cause is read from its message (the server's text in English;
// messages in another language fall back to UNAVAILABLE, which is retried):
// what retrying cannot fix (a database or role that does not exist, a
// refused authentication, a malformed connection string) is not
// UNAVAILABLE, so that the runner does not retry it as if the server were
// only away.
absl::Status ConnectFailure(const std::string& error) {
  const std::string text =
      absl::StrCat("cannot connect to PostgreSQL: ", error);
  auto has = [&](const char* s) { return absl::StrContains(error, s); };
  if (has("invalid connection option") || has("missing \"=\"") ||
      has("invalid URI") || has("unterminated quoted string") ||
      has("invalid integer value") || has("invalid sslmode value")) {
    return absl::InvalidArgumentError(
        absl::StrCat(text, " (check the warehouse's dsn)"));
  }
  if (has("password authentication failed") || has("no pg_hba.conf entry") ||
      has("authentication failed") || has("no password supplied") ||
      has("fe_sendauth")) {
    return absl::PermissionDeniedError(absl::StrCat(
        text,
        " (check the user, and the password in PGPASSWORD or ~/.pgpass)"));
  }
  if ((has("database \"") || has("role \"")) && has("does not exist")) {
    return absl::FailedPreconditionError(
        absl::StrCat(text, " (check the warehouse's dsn)"));
  }
  if (has("too many clients") || has("too many connections") ||
      has("remaining connection slots")) {
    return absl::ResourceExhaustedError(text);
  }
  return absl::UnavailableError(text);
}

}  // namespace

absl::Status StatusFromSqlState(std::string_view sqlstate,
                                std::string_view message, bool cancelled) {
  const std::string state(sqlstate);
  const std::string text =
      absl::StrCat(std::string(message), " (SQLSTATE ", state, ")");
  auto in_class = [&](const char* cls) { return absl::StartsWith(state, cls); };
  if (sqlstate == "57014") {
    return cancelled ? absl::CancelledError(text)
                     : absl::DeadlineExceededError(text);
  }
  if (in_class("08") || sqlstate == "57P01" || sqlstate == "57P02" ||
      sqlstate == "57P03" || in_class("58")) {
    return absl::UnavailableError(text);
  }
  if (in_class("53")) return absl::ResourceExhaustedError(text);
  if (sqlstate == "40001" || sqlstate == "40P01") {
    return absl::AbortedError(text);
  }
  if (in_class("23")) return absl::FailedPreconditionError(text);
  if (in_class("42") || in_class("22") || sqlstate == "25006" ||
      in_class("2F") || in_class("0A")) {
    return absl::InvalidArgumentError(text);
  }
  if (sqlstate == "XX001" || sqlstate == "XX002") {
    return absl::DataLossError(text);
  }
  return absl::InternalError(text);
}

absl::StatusOr<PgDsnInfo> ParseDsn(const std::string& dsn) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(dsn.c_str(), &error);
  if (options == nullptr) {
    std::string message =
        error != nullptr ? Trimmed(error) : std::string("out of memory");
    if (error != nullptr) PQfreemem(error);
    return absl::InvalidArgumentError(
        absl::StrCat("connection string does not parse: ", message));
  }
  PgDsnInfo info;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const std::string_view key = o->keyword;
    if (key == "host") info.host = o->val;
    if (key == "hostaddr" && info.host.empty()) info.host = o->val;
    if (key == "port") info.port = o->val;
    if (key == "dbname") info.dbname = o->val;
    if (key == "user") info.user = o->val;
    if (key == "password" && o->val[0] != '\0') info.has_password = true;
  }
  PQconninfoFree(options);
  return info;
}

absl::StatusOr<std::unique_ptr<PgConnection>> PgConnection::Connect(
    const std::string& dsn, absl::Duration connect_timeout) {
  const std::string timeout = absl::StrCat(std::max<int64_t>(
      2, absl::ToInt64Seconds(absl::Ceil(connect_timeout, absl::Seconds(1)))));
  // Defaults first, then the caller's string: libpq takes the later value
  // of a key given twice, so the caller's own connect_timeout or
  // application_name wins, and expand_dbname lets that entry be a whole
  // connection string or URI.
  const char* keys[] = {"connect_timeout", "application_name", "dbname",
                        nullptr};
  const char* values[] = {timeout.c_str(), "backfilld", dsn.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) {
    return absl::ResourceExhaustedError(
        "cannot allocate a PostgreSQL connection");
  }
  if (PQstatus(conn) != CONNECTION_OK) {
    const std::string error = Trimmed(PQerrorMessage(conn));
    PQfinish(conn);
    return ConnectFailure(error);
  }
  PQsetNoticeProcessor(conn, DropNotice, nullptr);
  PGcancel* cancel = PQgetCancel(conn);
  if (cancel == nullptr) {
    PQfinish(conn);
    return absl::InternalError("PostgreSQL connection has no cancel handle");
  }
  std::unique_ptr<PgConnection> out(new PgConnection(conn, cancel));
  // Timestamps without a zone are read and written as UTC, whatever the
  // server's default.
  if (absl::Status s = out->Exec("SET TIME ZONE 'UTC'").status(); !s.ok()) {
    return s;
  }
  return out;
}

PgConnection::~PgConnection() {
  PQfreeCancel(cancel_);
  PQfinish(conn_);
}

absl::Status PgConnection::ExecScript(std::string_view sql) {
  cancel_requested_.store(false);
  const std::string text(sql);
  std::unique_ptr<PGresult, void (*)(PGresult*)> res(
      PQexec(conn_, text.c_str()), PQclear);
  const ExecStatusType status =
      res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK ||
      status == PGRES_EMPTY_QUERY) {
    return absl::OkStatus();
  }
  const char* state =
      res ? PQresultErrorField(res.get(), PG_DIAG_SQLSTATE) : nullptr;
  std::string message =
      res ? Trimmed(PQresultErrorField(res.get(), PG_DIAG_MESSAGE_PRIMARY))
          : std::string();
  if (message.empty()) message = Trimmed(PQerrorMessage(conn_));
  absl::StrAppend(&message, "; in: ", Head(sql));
  if (state == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    return absl::UnavailableError(
        absl::StrCat("PostgreSQL connection lost: ", message));
  }
  return StatusFromSqlState(state, message, cancel_requested_.load());
}

namespace {

// The status for a statement `sql` that failed with `res` (null when libpq
// returned no result).
absl::Status ErrorOf(pg_conn* conn, const PGresult* res, std::string_view sql,
                     bool cancelled) {
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string message =
      res ? Trimmed(PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY))
          : std::string();
  if (message.empty()) message = Trimmed(PQerrorMessage(conn));
  if (res) {
    if (std::string detail =
            Trimmed(PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL));
        !detail.empty()) {
      absl::StrAppend(&message, ": ", detail);
    }
  }
  absl::StrAppend(&message, "; in: ", Head(sql));
  // No SQLSTATE: the connection itself failed (the server went away).
  if (state == nullptr || PQstatus(conn) != CONNECTION_OK) {
    return absl::UnavailableError(
        absl::StrCat("PostgreSQL connection lost: ", message));
  }
  return StatusFromSqlState(state, message, cancelled);
}

}  // namespace

absl::StatusOr<PgResult> PgConnection::Describe(std::string_view sql) {
  cancel_requested_.store(false);
  const std::string text(sql);
  std::unique_ptr<PGresult, void (*)(PGresult*)> prepared(
      PQprepare(conn_, "", text.c_str(), 0, nullptr), PQclear);
  if (!prepared || PQresultStatus(prepared.get()) != PGRES_COMMAND_OK) {
    return ErrorOf(conn_, prepared.get(), sql, cancel_requested_.load());
  }
  std::unique_ptr<PGresult, void (*)(PGresult*)> res(
      PQdescribePrepared(conn_, ""), PQclear);
  if (!res || PQresultStatus(res.get()) != PGRES_COMMAND_OK) {
    return ErrorOf(conn_, res.get(), sql, cancel_requested_.load());
  }
  PgResult out;
  for (int c = 0; c < PQnfields(res.get()); ++c) {
    out.columns.push_back(PQfname(res.get(), c));
    out.types.push_back(static_cast<uint32_t>(PQftype(res.get(), c)));
  }
  return out;
}

absl::StatusOr<PgResult> PgConnection::Exec(
    std::string_view sql, const std::vector<PgValue>& params) {
  cancel_requested_.store(false);
  const std::string text(sql);
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const PgValue& p : params) {
    values.push_back(p.has_value() ? p->c_str() : nullptr);
  }
  PGresult* raw =
      PQexecParams(conn_, text.c_str(), static_cast<int>(params.size()),
                   nullptr, values.data(), nullptr, nullptr, 0);
  std::unique_ptr<PGresult, void (*)(PGresult*)> res(raw, PQclear);
  const ExecStatusType status =
      res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return ErrorOf(conn_, res.get(), sql, cancel_requested_.load());
  }
  PgResult out;
  const int columns = PQnfields(res.get());
  for (int c = 0; c < columns; ++c) {
    out.columns.push_back(PQfname(res.get(), c));
    out.types.push_back(static_cast<uint32_t>(PQftype(res.get(), c)));
  }
  const int rows = PQntuples(res.get());
  out.rows.reserve(rows);
  for (int r = 0; r < rows; ++r) {
    std::vector<PgValue> row;
    row.reserve(columns);
    for (int c = 0; c < columns; ++c) {
      if (PQgetisnull(res.get(), r, c)) {
        row.emplace_back(std::nullopt);
      } else {
        row.emplace_back(std::string(PQgetvalue(res.get(), r, c),
                                     PQgetlength(res.get(), r, c)));
      }
    }
    out.rows.push_back(std::move(row));
  }
  out.command = PQcmdStatus(res.get());
  const char* affected = PQcmdTuples(res.get());
  if (affected != nullptr && *affected != '\0') {
    out.affected = std::strtoll(affected, nullptr, 10);
  }
  return out;
}

absl::Status PgConnection::SetStatementTimeout(absl::Duration timeout) {
  const int64_t ms =
      timeout <= absl::ZeroDuration()
          ? 0
          : std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout));
  return Exec("SELECT set_config('statement_timeout', $1, false)",
              {absl::StrCat(ms)})
      .status();
}

absl::Status PgConnection::Cancel() {
  cancel_requested_.store(true);
  char error[256] = {0};
  if (PQcancel(cancel_, error, sizeof error) == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot cancel the PostgreSQL statement: ", error));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PgConnection::QuoteIdentifier(
    std::string_view name) {
  if (name.empty() || name.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        "an identifier must be non-empty and hold no NUL character");
  }
  char* quoted = PQescapeIdentifier(conn_, name.data(), name.size());
  if (quoted == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot quote identifier: ", Trimmed(PQerrorMessage(conn_))));
  }
  std::string out(quoted);
  PQfreemem(quoted);
  return out;
}

bool PgConnection::Healthy() const { return PQstatus(conn_) == CONNECTION_OK; }

bool PgConnection::Idle() const {
  return PQstatus(conn_) == CONNECTION_OK &&
         PQtransactionStatus(conn_) == PQTRANS_IDLE;
}

int PgConnection::ServerVersion() const { return PQserverVersion(conn_); }

PgTransaction::~PgTransaction() {
  if (open_) conn_->Exec("ROLLBACK").IgnoreError();
}

absl::Status PgTransaction::Begin(std::string_view mode) {
  if (open_) return absl::FailedPreconditionError("transaction already open");
  absl::Status s =
      conn_
          ->Exec(mode.empty() ? std::string("BEGIN")
                              : absl::StrCat("BEGIN ", std::string(mode)))
          .status();
  if (s.ok()) open_ = true;
  return s;
}

absl::Status PgTransaction::Commit() {
  if (!open_) return absl::FailedPreconditionError("no transaction is open");
  absl::StatusOr<PgResult> done = conn_->Exec("COMMIT");
  // Whatever COMMIT answered, the transaction is over: a failed COMMIT
  // rolled back (or the connection is gone, and with it the transaction).
  open_ = false;
  if (!done.ok()) return done.status();
  if (done->command != "COMMIT") {
    return absl::AbortedError(absl::StrCat(
        "PostgreSQL rolled the transaction back instead of committing it (",
        done->command, "): a statement in it had failed"));
  }
  return absl::OkStatus();
}

}  // namespace backfill::postgres
