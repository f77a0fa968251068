#include "storage/postgres/pg_pool.h"

#include <libpq-fe.h>

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "storage/sql/engine_checks.h"

namespace backfill::postgres {
namespace {

// libpq's connection keywords (host, port, password, ...).
std::set<std::string> ConnectionKeywords() {
  std::set<std::string> out;
  if (PQconninfoOption* defaults = PQconndefaults(); defaults != nullptr) {
    for (const PQconninfoOption* o = defaults; o->keyword != nullptr; ++o) {
      out.insert(o->keyword);
    }
    PQconninfoFree(defaults);
  }
  return out;
}

// libpq's message about a connection string it could not parse, with every
// quoted part replaced by "..." but connection keywords and the separators
// libpq names ("=", ":", "/", "]"): libpq quotes the piece it choked on,
// which may be a password or a whole URI holding one.
std::string MaskQuoted(const std::string& message) {
  std::set<std::string> keywords = ConnectionKeywords();
  keywords.insert({"=", ":", "/", "]"});
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    const size_t open = message.find('"', i);
    const size_t close =
        open == std::string::npos ? open : message.find('"', open + 1);
    if (close == std::string::npos) {
      // An unpaired quote: nothing after it can be told apart.
      out.append(message, i, open == std::string::npos ? open : open - i);
      if (open != std::string::npos) out.append("\"...");
      break;
    }
    out.append(message, i, open - i);
    const std::string quoted = message.substr(open + 1, close - open - 1);
    absl::StrAppend(&out, "\"", keywords.count(quoted) ? quoted : "...", "\"");
    i = close + 1;
  }
  return std::string(absl::StripAsciiWhitespace(out));
}

// libpq treats a dbname holding "=" or starting with a URI prefix as a
// whole connection string (PgConnection::Connect passes the caller's
// string that way); anything else is just a database name.
bool IsConnectionString(const std::string& dsn) {
  return absl::StartsWith(dsn, "postgresql://") ||
         absl::StartsWith(dsn, "postgres://") ||
         dsn.find('=') != std::string::npos;
}

// The secrets `dsn` holds (password, sslpassword), longest first;
// INVALID_ARGUMENT, without them, when it does not parse.
absl::StatusOr<std::vector<std::string>> Secrets(const std::string& dsn) {
  std::vector<std::string> out;
  if (!IsConnectionString(dsn)) return out;
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(dsn.c_str(), &error);
  if (options == nullptr) {
    const std::string message =
        error == nullptr ? std::string("out of memory") : MaskQuoted(error);
    if (error != nullptr) PQfreemem(error);
    return absl::InvalidArgumentError(absl::StrCat(
        "the PostgreSQL connection string does not parse: ", message));
  }
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    const std::string keyword = o->keyword;
    if ((keyword == "password" || keyword == "sslpassword") &&
        o->val != nullptr && *o->val != '\0') {
      out.push_back(o->val);
    }
  }
  PQconninfoFree(options);
  std::sort(out.begin(), out.end(),
            [](const std::string& a, const std::string& b) {
              return a.size() > b.size();
            });
  return out;
}

bool NotCancelling(int* cancelling) { return *cancelling == 0; }

}  // namespace

PgPool::Lease::Lease(Lease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      slot_(std::exchange(other.slot_, -1)),
      conn_(std::exchange(other.conn_, nullptr)),
      discard_(std::exchange(other.discard_, false)) {}

PgPool::Lease& PgPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    pool_ = std::exchange(other.pool_, nullptr);
    slot_ = std::exchange(other.slot_, -1);
    conn_ = std::exchange(other.conn_, nullptr);
    discard_ = std::exchange(other.discard_, false);
  }
  return *this;
}

void PgPool::Lease::Release() {
  if (pool_ != nullptr && conn_ != nullptr) {
    pool_->Give(slot_, conn_, discard_);
  }
  pool_ = nullptr;
  slot_ = -1;
  conn_ = nullptr;
  discard_ = false;
}

PgPool::PgPool(std::string dsn, std::vector<std::string> secrets, int size,
               PgPoolOptions options)
    : dsn_(std::move(dsn)),
      size_(size),
      secrets_(std::move(secrets)),
      options_(std::move(options)) {
  absl::MutexLock lock(&mu_);
  slots_.resize(size);
  // Slot 0 last: handed out first.
  for (int i = size - 1; i >= 0; --i) idle_.push_back(i);
}

absl::StatusOr<std::unique_ptr<PgPool>> PgPool::Open(const std::string& dsn,
                                                     int size,
                                                     PgPoolOptions options) {
  if (size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a PostgreSQL connection pool needs at least 1 connection, not ",
        size));
  }
  absl::StatusOr<std::vector<std::string>> secrets = Secrets(dsn);
  if (!secrets.ok()) return secrets.status();
  std::unique_ptr<PgPool> pool(
      new PgPool(dsn, *std::move(secrets), size, std::move(options)));
  for (int i = 0; i < size; ++i) {
    absl::StatusOr<std::unique_ptr<PgConnection>> conn = pool->Connect();
    if (!conn.ok()) {
      return sql::Annotate(
          conn.status(),
          absl::StrCat(
              "cannot open the PostgreSQL connection pool (connection ", i + 1,
              " of ", size, ")"));
    }
    absl::MutexLock lock(&pool->mu_);
    pool->slots_[i].conn = *std::move(conn);
    pool->slots_[i].idle_since = absl::Now();
    ++pool->opened_;
  }
  return pool;
}

PgPool::~PgPool() { Close(); }

absl::StatusOr<std::unique_ptr<PgConnection>> PgPool::Connect() const {
  // Every message is scrubbed: libpq's may quote parts of the connection
  // string.
  auto scrubbed = [this](const absl::Status& status,
                         const std::string& context) {
    std::string message(status.message());
    for (const std::string& secret : secrets_) {
      message = absl::StrReplaceAll(message, {{secret, "<password>"}});
    }
    if (!context.empty()) message = absl::StrCat(context, ": ", message);
    return absl::Status(status.code(), message);
  };
  absl::StatusOr<std::unique_ptr<PgConnection>> conn =
      PgConnection::Connect(dsn_, options_.connect_timeout);
  if (!conn.ok()) return scrubbed(conn.status(), "");
  if (!options_.application_name.empty()) {
    absl::Status s =
        (*conn)
            ->Exec("SELECT set_config('application_name', $1, false)",
                   {options_.application_name})
            .status();
    if (!s.ok()) return scrubbed(s, "cannot set application_name");
  }
  if (options_.idle_in_transaction_timeout > absl::ZeroDuration()) {
    absl::Status s =
        (*conn)
            ->Exec(
                "SELECT set_config('idle_in_transaction_session_timeout', "
                "$1, false)",
                {absl::StrCat(absl::ToInt64Milliseconds(
                    options_.idle_in_transaction_timeout))})
            .status();
    if (!s.ok()) {
      return scrubbed(s, "cannot set idle_in_transaction_session_timeout");
    }
  }
  // Always set, so that a server or role default does not apply instead.
  if (absl::Status s = (*conn)->SetStatementTimeout(options_.statement_timeout);
      !s.ok()) {
    return scrubbed(s, "cannot set statement_timeout");
  }
  return conn;
}

bool PgPool::CanLend() const { return closed_ || !idle_.empty(); }

bool PgPool::AllReturned() const {
  for (const Slot& s : slots_) {
    if (s.leased) return false;
  }
  return true;
}

std::unique_ptr<PgConnection> PgPool::TakeConnection(int slot) {
  Slot& s = slots_[slot];
  mu_.Await(absl::Condition(&NotCancelling, &s.cancelling));
  if (s.conn != nullptr) ++replaced_;
  return std::move(s.conn);
}

absl::StatusOr<PgPool::Lease> PgPool::Acquire() {
  return AcquireWithDeadline(absl::InfiniteFuture());
}

absl::StatusOr<PgPool::Lease> PgPool::AcquireWithDeadline(absl::Time deadline) {
  const absl::Time start = absl::Now();
  int slot = -1;
  PgConnection* conn = nullptr;
  bool check = false;
  std::unique_ptr<PgConnection> broken;  // closed outside mu_
  {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithDeadline(absl::Condition(this, &PgPool::CanLend),
                               deadline)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no PostgreSQL connection came free within ",
          absl::FormatDuration(absl::Now() - start), ": ",
          size_ == 1 ? std::string("the pool's only connection")
                     : absl::StrCat("all ", size_, " connections of the pool"),
          " stayed leased"));
    }
    if (closed_) {
      return absl::CancelledError("the PostgreSQL connection pool is closed");
    }
    slot = idle_.back();
    idle_.pop_back();
    Slot& s = slots_[slot];
    s.leased = true;
    s.interrupted = false;
    if (s.conn != nullptr && !s.conn->Healthy()) broken = TakeConnection(slot);
    conn = s.conn.get();
    check = conn != nullptr &&
            absl::Now() - s.idle_since >= options_.validate_after_idle;
  }
  broken.reset();
  if (check && !conn->Exec("SELECT 1").ok()) {
    {
      absl::MutexLock lock(&mu_);
      broken = TakeConnection(slot);
    }
    broken.reset();
    conn = nullptr;
  }
  std::unique_ptr<PgConnection> fresh;
  if (conn == nullptr) {
    absl::StatusOr<std::unique_ptr<PgConnection>> opened = Connect();
    if (!opened.ok()) {
      absl::MutexLock lock(&mu_);
      Slot& s = slots_[slot];
      s.leased = false;
      s.idle_since = absl::Now();
      // Behind the open connections: they are handed out first.
      idle_.insert(idle_.begin(), slot);
      return sql::Annotate(opened.status(),
                           "cannot open a PostgreSQL connection for the pool");
    }
    fresh = *std::move(opened);
  }
  absl::MutexLock lock(&mu_);
  Slot& s = slots_[slot];
  if (fresh != nullptr) {
    s.conn = std::move(fresh);
    conn = s.conn.get();
    ++opened_;
  }
  if (closed_) {
    s.leased = false;
    idle_.push_back(slot);
    return absl::CancelledError("the PostgreSQL connection pool is closed");
  }
  return Lease(this, slot, conn);
}

void PgPool::Give(int slot, PgConnection* conn, bool discard) {
  // A transaction its holder left open must not reach the next holder.
  // (PostgreSQL answers ROLLBACK outside a transaction with a warning.)
  // A failed ROLLBACK on a connection still up is tried once more: a cancel
  // (InterruptAll) can reach the backend twice, since the postmaster signals
  // the backend and then its process group, and the second signal may
  // cancel this ROLLBACK after the first cancelled the holder's statement.
  // Repeating a ROLLBACK is harmless; a second failure gives the connection
  // up. A connection libpq knows to be idle outside any transaction, and
  // that no cancel was sent to during the lease, needs no ROLLBACK (one
  // round trip less per lease).
  bool interrupted;
  {
    absl::MutexLock lock(&mu_);
    interrupted = slots_[slot].interrupted || slots_[slot].cancelling > 0;
  }
  auto rolled_back = [conn, interrupted] {
    if (!interrupted && conn->Idle()) return true;
    return conn->Exec("ROLLBACK").ok() ||
           (conn->Healthy() && conn->Exec("ROLLBACK").ok());
  };
  const bool drop = discard || !conn->Healthy() || !rolled_back();
  std::unique_ptr<PgConnection> closing;  // closed outside mu_
  {
    absl::MutexLock lock(&mu_);
    Slot& s = slots_[slot];
    // Not idle while InterruptAll() is sending a cancel to it: the cancel
    // could reach the statement of the next holder.
    mu_.Await(absl::Condition(&NotCancelling, &s.cancelling));
    if (drop) {
      closing = TakeConnection(slot);
      // Behind the open connections: they are handed out first.
      idle_.insert(idle_.begin(), slot);
    } else {
      idle_.push_back(slot);
    }
    s.leased = false;
    s.idle_since = absl::Now();
  }
}

int PgPool::InterruptAll() {
  std::vector<std::pair<int, PgConnection*>> targets;
  {
    absl::MutexLock lock(&mu_);
    for (int i = 0; i < size_; ++i) {
      Slot& s = slots_[i];
      if (s.leased && s.conn != nullptr) {
        ++s.cancelling;
        s.interrupted = true;
        targets.emplace_back(i, s.conn.get());
      }
    }
  }
  // Without mu_: each cancel is a round trip to the server.
  for (const auto& [slot, conn] : targets) conn->Cancel().IgnoreError();
  absl::MutexLock lock(&mu_);
  for (const auto& [slot, conn] : targets) --slots_[slot].cancelling;
  return static_cast<int>(targets.size());
}

void PgPool::Close() {
  std::vector<std::unique_ptr<PgConnection>> closing;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    mu_.Await(absl::Condition(this, &PgPool::AllReturned));
    for (Slot& s : slots_) {
      if (s.conn != nullptr) closing.push_back(std::move(s.conn));
    }
    idle_.clear();
  }
}

PgPool::Stats PgPool::GetStats() const {
  absl::MutexLock lock(&mu_);
  Stats out;
  out.size = size_;
  for (const Slot& s : slots_) {
    if (s.leased) ++out.leased;
    if (s.conn != nullptr) ++out.open;
  }
  out.opened = opened_;
  out.replaced = replaced_;
  return out;
}

}  // namespace backfill::postgres
