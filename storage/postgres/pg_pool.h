// PgPool: a fixed number of PostgreSQL connections (PgConnection) shared by
// the threads of the PostgreSQL warehouse engine. The engine sizes it to
// the daemon's --workers plus a few for planning and reads.
//
// Ownership: the pool owns every connection. Acquire() lends one out as a
// PgPool::Lease, an RAII handle that gives it back when destroyed; the
// PgConnection* a lease exposes is valid while the lease lives and must not
// be kept beyond it. Leases must not outlive the pool: Close() (and the
// destructor) waits until every lease is back.
//
// Connections are opened eagerly: Open() connects all `size` of them, so
// that a wrong connection string, a refused login or a server without room
// for `size` more connections stops the daemon at start with a clear
// message rather than failing the first backfill after it. A connection
// that breaks later (the server restarted, its backend was terminated) is
// replaced lazily, by the next Acquire() that draws it.
//
// Broken connections. A statement on a connection whose server went away
// fails with UNAVAILABLE (retryable); when its lease is given back, the
// pool sees that the connection is no longer Healthy() and closes it, and
// the next Acquire() opens a fresh one in its place. A connection that sat
// idle for longer than `validate_after_idle` is checked with a round trip
// (SELECT 1) before it is handed out, so that connections broken while
// idle (a server restart) are replaced before anyone sees them. A broken
// connection is never handed out twice. A server that vanishes without
// closing its connections (a network that drops packets) is noticed only
// by TCP's own timeouts: set libpq's keepalives_idle and tcp_user_timeout
// in the connection string to bound them.
//
// Session state. Every new connection gets the same session: TimeZone UTC
// (PgConnection::Connect), the pool's `application_name` and
// `statement_timeout`. A returned connection is rolled back (a transaction
// left open by its holder is not inherited by the next one; a ROLLBACK that
// fails is tried once more, then the connection is replaced) but its
// session settings are not reset: a holder that changes one (SET ...,
// SetStatementTimeout) restores it before giving the lease back, or calls
// Lease::Discard() so that the connection is closed instead of reused.
//
// Secrets. The connection string may hold a password (libpq's PGPASSWORD,
// ~/.pgpass and PGPASSFILE apply as usual). No message of the pool repeats
// the connection string, and any password (or sslpassword) it holds is cut
// out of libpq's messages before they are returned.
//
// Thread-safety: all methods of PgPool are thread-safe. A Lease, like the
// PgConnection it lends, is used by one thread at a time; it may be moved
// to and released from another thread. InterruptAll() may be called from
// any thread at any time, including while others Acquire() or run
// statements.

#ifndef BACKFILL_STORAGE_POSTGRES_PG_POOL_H_
#define BACKFILL_STORAGE_POSTGRES_PG_POOL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/postgres/pg_connection.h"

namespace backfill::postgres {

struct PgPoolOptions {
  // application_name of every connection (pg_stat_activity, the server's
  // log); empty keeps the connection string's, else "backfilld".
  std::string application_name;
  // statement_timeout of every connection (a statement running longer
  // fails with DEADLINE_EXCEEDED); zero: no limit.
  absl::Duration statement_timeout = absl::ZeroDuration();
  // idle_in_transaction_session_timeout of every connection: the server
  // ends the session of a holder that stays inside a transaction without a
  // statement for longer (a process frozen in the middle of one), and so
  // lets go of its locks; zero: the server's default.
  absl::Duration idle_in_transaction_timeout = absl::ZeroDuration();
  // Bounds each connection attempt (libpq's connect_timeout, at least 2 s).
  absl::Duration connect_timeout = absl::Seconds(10);
  // An idle connection unused for longer than this is checked with a round
  // trip before it is handed out; zero checks every time. A connection
  // that broke within the window reaches its next holder, whose first
  // statement then fails with UNAVAILABLE (retryable).
  absl::Duration validate_after_idle = absl::Seconds(1);
};

class PgPool {
 public:
  // A connection lent by the pool; gives it back when destroyed (or on
  // Release()). Movable, not copyable. An empty lease (moved from,
  // released) holds no connection.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { Release(); }

    PgConnection* get() const { return conn_; }
    PgConnection* operator->() const { return conn_; }
    PgConnection& operator*() const { return *conn_; }
    explicit operator bool() const { return conn_ != nullptr; }

    // The connection is closed when the lease is given back, instead of
    // being reused (its session state is not what the pool set up, or the
    // holder does not trust it any more).
    void Discard() { discard_ = true; }
    // Gives the connection back now: rolls back any transaction left open
    // and returns it to the pool (or closes it when broken or discarded).
    // The lease is empty afterwards.
    void Release();

   private:
    friend class PgPool;
    Lease(PgPool* pool, int slot, PgConnection* conn)
        : pool_(pool), slot_(slot), conn_(conn) {}

    PgPool* pool_ = nullptr;
    int slot_ = -1;
    PgConnection* conn_ = nullptr;
    bool discard_ = false;
  };

  // Counters, for metrics and tests.
  struct Stats {
    // Connections the pool may hold.
    int size = 0;
    // Lent out now (including places whose connection is being opened).
    int leased = 0;
    // Open now, leased or idle.
    int open = 0;
    // Connections opened since Open(), replacements included.
    int64_t opened = 0;
    // Connections closed as broken or discarded.
    int64_t replaced = 0;
  };

  // Opens `size` connections (>= 1) to `dsn` (a libpq connection string,
  // key=value pairs or a URI) and applies the session setup to each.
  // INVALID_ARGUMENT for a size below 1 or a connection string that does
  // not parse; otherwise the error of the first connection that failed
  // (its code as PgConnection::Connect gives it: UNAVAILABLE when the
  // server cannot be reached, PERMISSION_DENIED when it refuses the login,
  // ...), saying which of the `size` it was. No message holds the password.
  static absl::StatusOr<std::unique_ptr<PgPool>> Open(
      const std::string& dsn, int size, PgPoolOptions options = {});

  // Close(): waits for every lease to come back.
  ~PgPool();
  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;

  // Lends a connection, waiting as long as all are leased. A connection
  // found broken is replaced first; UNAVAILABLE (retryable) when that
  // fails (the server is down). CANCELLED once the pool is closing.
  absl::StatusOr<Lease> Acquire() ABSL_LOCKS_EXCLUDED(mu_);
  // The same, but waits for a free connection only until `deadline`:
  // DEADLINE_EXCEEDED when all stayed leased. The deadline bounds the wait
  // for a free connection; opening a replacement takes at most
  // `connect_timeout` more.
  absl::StatusOr<Lease> AcquireWithDeadline(absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<Lease> AcquireWithTimeout(absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_) {
    return AcquireWithDeadline(absl::Now() + timeout);
  }

  // Asks the server to stop the statement each leased connection runs now
  // (PgConnection::Cancel); those statements fail with CANCELLED. For a
  // shutdown that cannot wait for long statements: call it, then Close().
  // A statement that starts after the cancel reached the server is not
  // stopped. Returns at once when nothing is leased; otherwise after one
  // cancel request per leased connection. The pool stays usable. Returns
  // the number of connections a cancel was sent to.
  int InterruptAll() ABSL_LOCKS_EXCLUDED(mu_);

  // Refuses new leases (Acquire() then fails with CANCELLED, waiters
  // included), waits until every lease is back, and closes all
  // connections. Idempotent. A thread must not call it (or destroy the
  // pool) while it holds a lease itself: it would wait forever.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  int size() const { return size_; }
  Stats GetStats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One connection place. `conn` is null while none is open there (never
  // opened, closed as broken, or being opened by its lessee).
  struct Slot {
    std::unique_ptr<PgConnection> conn;
    bool leased = false;
    // InterruptAll() calls sending a cancel to `conn` right now, without
    // mu_: `conn` is neither closed nor reused until they are done.
    int cancelling = 0;
    // InterruptAll() sent a cancel to `conn` during the current lease.
    bool interrupted = false;
    absl::Time idle_since;  // when it was last given back
  };

  PgPool(std::string dsn, std::vector<std::string> secrets, int size,
         PgPoolOptions options);

  // A new connection with the session setup applied; errors with the
  // secrets cut out.
  absl::StatusOr<std::unique_ptr<PgConnection>> Connect() const;
  // Called by Lease::Release().
  void Give(int slot, PgConnection* conn, bool discard)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the connection out of a slot leased by the caller once no cancel
  // is being sent to it (the caller then closes it, outside mu_).
  std::unique_ptr<PgConnection> TakeConnection(int slot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CanLend() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllReturned() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dsn_;
  const int size_;
  // Values the connection string holds that no message may repeat.
  const std::vector<std::string> secrets_;
  const PgPoolOptions options_;

  mutable absl::Mutex mu_;
  // Sized once by the constructor, never resized: a slot's address is
  // stable.
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  // Idle slots, the most recently returned last (handed out first).
  std::vector<int> idle_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t opened_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t replaced_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace backfill::postgres

#endif  // BACKFILL_STORAGE_POSTGRES_PG_POOL_H_
