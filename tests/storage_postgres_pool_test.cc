// PgPool against a real PostgreSQL server: it never holds more than its
// size (counted by the server, in pg_stat_activity), reuses its
// connections, replaces a connection whose backend was terminated or whose
// server restarted (the holder sees UNAVAILABLE, the next holder a working
// connection), stops every leased statement on InterruptAll, times out an
// acquire, sets up every new connection's session, rolls back what a
// holder left open, and never repeats a password in an error.

#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_pool.h"
#include "tests/testing/postgres_suite.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill::postgres {
namespace storage_postgres_pool_test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;

class PgPoolTest : public backfill::testing::PostgresSuite {
 protected:
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    auto admin = PgConnection::Connect(server_->Dsn());
    ASSERT_TRUE(admin.ok()) << admin.status();
    admin_ = *std::move(admin);
  }

  // An application_name of this test's own, so that the server's count of
  // the pool's backends sees no other connection.
  static std::string AppName() {
    return absl::StrCat(
               "pool_",
               ::testing::UnitTest::GetInstance()->current_test_info()->name())
        .substr(0, 60);
  }

  static PgPoolOptions Options() {
    PgPoolOptions options;
    options.application_name = AppName();
    return options;
  }

  // The server's count of backends with `app` as their application_name.
  int Backends(const std::string& app) {
    auto r = admin_->Exec(
        "SELECT count(*)::text FROM pg_stat_activity "
        "WHERE application_name = $1",
        {app});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::stoi(*r->rows[0][0]) : -1;
  }

  // Backends(app) once it is `n`, or after 5 s: a backend whose client
  // closed its connection leaves a moment later.
  int BackendsSettleAt(const std::string& app, int n) {
    int count = Backends(app);
    for (int i = 0; i < 100 && count != n; ++i) {
      absl::SleepFor(absl::Milliseconds(50));
      count = Backends(app);
    }
    return count;
  }

  // Terminates the backend `pid` and waits until it is gone.
  void Terminate(const std::string& pid) {
    auto r = admin_->Exec("SELECT pg_terminate_backend($1::int, 10000)::text",
                          {pid});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_THAT(r->rows[0][0], Optional(std::string("true")));
  }

  static std::string Pid(PgConnection* conn) {
    auto r = conn->Exec("SELECT pg_backend_pid()::text");
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r->rows[0][0] : std::string();
  }

  std::unique_ptr<PgConnection> admin_;
};

TEST_F(PgPoolTest, OpensItsSizeEagerlyAndNeverMoreUnderManyThreads) {
  const std::string app = AppName();
  auto pool = PgPool::Open(server_->Dsn(), 3, Options());
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ(Backends(app), 3);  // all opened by Open()

  std::atomic<int> held{0};
  std::atomic<int> max_held{0};
  std::atomic<int> max_on_server{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 15; ++i) {
        absl::StatusOr<PgPool::Lease> lease = (*pool)->Acquire();
        if (!lease.ok()) {
          ++failures;
          continue;
        }
        const int now = ++held;
        for (int m = max_held;
             now > m && !max_held.compare_exchange_weak(m, now);) {
        }
        auto r = (*lease)->Exec(
            "SELECT (SELECT count(*) FROM pg_stat_activity "
            "WHERE application_name = $1)::text, pg_sleep(0.005)",
            {app});
        if (!r.ok()) {
          ++failures;
        } else {
          const int seen = std::stoi(*r->rows[0][0]);
          for (int m = max_on_server;
               seen > m && !max_on_server.compare_exchange_weak(m, seen);) {
          }
        }
        --held;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(max_held, 3);  // 8 threads kept all 3 busy, and never more
  EXPECT_EQ(max_on_server, 3);
  EXPECT_EQ(Backends(app), 3);
  const PgPool::Stats stats = (*pool)->GetStats();
  EXPECT_EQ(stats.size, 3);
  EXPECT_EQ(stats.open, 3);
  EXPECT_EQ(stats.leased, 0);
  EXPECT_EQ(stats.opened, 3);  // no connection was ever replaced
  EXPECT_EQ(stats.replaced, 0);

  pool->reset();
  EXPECT_EQ(BackendsSettleAt(app, 0), 0);  // closed with the pool
}

TEST_F(PgPoolTest, OpenFailsWholeWhenTheServerRefusesOneConnection) {
  const std::string app = AppName();
  // Roles belong to the whole server, which other tests may share: the
  // name is the test database's.
  const std::string role = absl::StrCat(server_->database(), "_limited");
  ASSERT_TRUE(admin_->Exec(absl::StrCat("DROP ROLE IF EXISTS ", role)).ok());
  ASSERT_TRUE(admin_
                  ->Exec(absl::StrCat("CREATE ROLE ", role,
                                      " LOGIN CONNECTION LIMIT 2"))
                  .ok());
  auto pool =
      PgPool::Open(absl::StrCat(server_->Dsn(), " user=", role), 3, Options());
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(pool.status().message(),
              AllOf(HasSubstr("cannot open the PostgreSQL connection pool "
                              "(connection 3 of 3)"),
                    HasSubstr("too many connections for role")));
  // The two it had opened are closed again.
  EXPECT_EQ(BackendsSettleAt(app, 0), 0);
  ASSERT_TRUE(admin_->Exec(absl::StrCat("DROP ROLE ", role)).ok());
}

TEST_F(PgPoolTest, ReusesItsConnectionsAndLeasesMove) {
  auto pool = PgPool::Open(server_->Dsn(), 2, Options());
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::set<std::string> pids;
  for (int i = 0; i < 10; ++i) {
    auto lease = (*pool)->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.status();
    pids.insert(Pid(lease->get()));
  }
  // One at a time: the most recently returned connection every time.
  EXPECT_EQ(pids.size(), 1u);
  {
    auto a = (*pool)->Acquire();
    auto b = (*pool)->Acquire();
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_NE(Pid(a->get()), Pid(b->get()));
    pids.insert(Pid(a->get()));
    pids.insert(Pid(b->get()));
    EXPECT_EQ((*pool)->GetStats().leased, 2);

    PgPool::Lease moved = *std::move(a);
    EXPECT_FALSE(*a);  // NOLINT: moved from, empty by contract
    EXPECT_TRUE(moved);
    EXPECT_EQ((*pool)->GetStats().leased, 2);
    moved = *std::move(b);  // gives back what `moved` held
    EXPECT_EQ((*pool)->GetStats().leased, 1);
    EXPECT_TRUE(moved->Exec("SELECT 1").ok());
    moved.Release();
    EXPECT_FALSE(moved);
    EXPECT_EQ((*pool)->GetStats().leased, 0);
  }
  EXPECT_EQ(pids.size(), 2u);
  EXPECT_EQ((*pool)->GetStats().opened, 2);
}

TEST_F(PgPoolTest, ATerminatedBackendIsUnavailableAndTheNextLeaseWorks) {
  PgPoolOptions options = Options();
  // No check before handing out: the holder meets the broken connection.
  options.validate_after_idle = absl::InfiniteDuration();
  auto pool = PgPool::Open(server_->Dsn(), 1, options);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::string killed;
  {
    auto lease = (*pool)->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.status();
    killed = Pid(lease->get());
    Terminate(killed);
    auto r = (*lease)->Exec("SELECT 1");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_FALSE((*lease)->Healthy());
  }
  PgPool::Stats stats = (*pool)->GetStats();
  EXPECT_EQ(stats.replaced, 1);  // closed when given back
  EXPECT_EQ(stats.open, 0);

  auto next = (*pool)->Acquire();
  ASSERT_TRUE(next.ok()) << next.status();
  const std::string pid = Pid(next->get());
  EXPECT_NE(pid, killed);
  EXPECT_TRUE((*next)->Exec("SELECT 1").ok());
  stats = (*pool)->GetStats();
  EXPECT_EQ(stats.opened, 2);
  EXPECT_EQ(stats.open, 1);

  // Broken while idle, with no check: the next holder's first statement
  // fails (retryably) and the one after gets a working connection.
  next->Release();
  Terminate(pid);
  {
    auto lease = (*pool)->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_EQ((*lease)->Exec("SELECT 1").status().code(),
              absl::StatusCode::kUnavailable);
  }
  auto last = (*pool)->Acquire();
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_TRUE((*last)->Exec("SELECT 1").ok());
  EXPECT_EQ((*pool)->GetStats().opened, 3);
}

TEST_F(PgPoolTest, AConnectionBrokenWhileIdleIsReplacedBeforeItIsLent) {
  PgPoolOptions options = Options();
  options.validate_after_idle = absl::ZeroDuration();  // check every time
  auto pool = PgPool::Open(server_->Dsn(), 1, options);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::string killed;
  {
    auto lease = (*pool)->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.status();
    killed = Pid(lease->get());
  }
  Terminate(killed);
  auto lease = (*pool)->Acquire();
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_NE(Pid(lease->get()), killed);  // and no error on the way
  EXPECT_EQ((*pool)->GetStats().replaced, 1);
  EXPECT_EQ(Backends(AppName()), 1);
}

// A server of its own: the test restarts it.
class PgPoolRestartTest : public PgPoolTest {
 protected:
  static void SetUpTestSuite() { StartOwnServer(); }
};

TEST_F(PgPoolRestartTest, SurvivesAServerRestart) {
  const std::string app = AppName();
  PgPoolOptions options = Options();
  options.validate_after_idle = absl::ZeroDuration();
  auto pool = PgPool::Open(server_->Dsn(), 3, options);
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto held = (*pool)->Acquire();
  ASSERT_TRUE(held.ok()) << held.status();
  const std::string before = Pid(held->get());

  admin_.reset();
  ASSERT_TRUE(server_->Restart().ok()) << server_->LogTail();
  auto admin = PgConnection::Connect(server_->Dsn());
  ASSERT_TRUE(admin.ok()) << admin.status();
  admin_ = *std::move(admin);

  // The statement of the connection held across the restart fails with a
  // code the runner retries by.
  EXPECT_EQ((*held)->Exec("SELECT 1").status().code(),
            absl::StatusCode::kUnavailable);
  held->Release();
  // Every connection works again: the idle ones were checked and replaced.
  std::vector<PgPool::Lease> leases;
  for (int i = 0; i < 3; ++i) {
    auto lease = (*pool)->AcquireWithTimeout(absl::Seconds(30));
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_NE(Pid(lease->get()), before);
    auto app_name =
        (*lease)->Exec("SELECT current_setting('application_name')");
    ASSERT_TRUE(app_name.ok()) << app_name.status();
    EXPECT_THAT(app_name->rows[0][0], Optional(app));
    leases.push_back(*std::move(lease));
  }
  EXPECT_EQ(Backends(app), 3);
  const PgPool::Stats stats = (*pool)->GetStats();
  EXPECT_EQ(stats.replaced, 3);
  EXPECT_EQ(stats.opened, 6);
}

TEST_F(PgPoolTest, InterruptAllCancelsTheStatementOfEveryLease) {
  const std::string app = AppName();
  auto pool = PgPool::Open(server_->Dsn(), 3, Options());
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ((*pool)->InterruptAll(), 0);  // nothing leased

  std::vector<absl::Status> results(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      auto lease = (*pool)->Acquire();
      if (!lease.ok()) {
        results[i] = lease.status();
        return;
      }
      results[i] = (*lease)->Exec("SELECT pg_sleep(60)").status();
    });
  }
  // Until all three backends wait inside pg_sleep. A backend shows its
  // statement as 'active' from the moment it parses it, and a cancel that
  // reaches it while it still reads the rest of the statement's messages is
  // dropped by the server (as with any client): only the wait event says
  // the statement runs.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  int sleeping = 0;
  while (absl::Now() < deadline) {
    auto r = admin_->Exec(
        "SELECT count(*)::text FROM pg_stat_activity WHERE application_name "
        "= $1 AND state = 'active' AND wait_event = 'PgSleep'",
        {app});
    ASSERT_TRUE(r.ok()) << r.status();
    sleeping = std::stoi(*r->rows[0][0]);
    if (sleeping == 3) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(sleeping, 3);

  const absl::Time start = absl::Now();
  EXPECT_EQ((*pool)->InterruptAll(), 3);
  for (std::thread& t : threads) t.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  for (const absl::Status& s : results) {
    EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  }
  // The connections were not harmed: all three work and none was replaced.
  std::vector<PgPool::Lease> leases;
  for (int i = 0; i < 3; ++i) {
    auto lease = (*pool)->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_TRUE((*lease)->Exec("SELECT 1").ok());
    leases.push_back(*std::move(lease));
  }
  EXPECT_EQ((*pool)->GetStats().replaced, 0);
}

TEST_F(PgPoolTest, AcquireWaitsAndTimesOut) {
  auto pool = PgPool::Open(server_->Dsn(), 1, Options());
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto held = (*pool)->Acquire();
  ASSERT_TRUE(held.ok()) << held.status();

  absl::Time start = absl::Now();
  auto timed_out = (*pool)->AcquireWithTimeout(absl::Milliseconds(200));
  EXPECT_EQ(timed_out.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(timed_out.status().message(),
              HasSubstr("no PostgreSQL connection came free"));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ((*pool)
                ->AcquireWithDeadline(absl::Now() - absl::Seconds(1))
                .status()
                .code(),
            absl::StatusCode::kDeadlineExceeded);

  // Acquire() waits for as long as it takes.
  start = absl::Now();
  std::thread giver([&] {
    absl::SleepFor(absl::Milliseconds(200));
    held->Release();
  });
  auto waited = (*pool)->Acquire();
  giver.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_TRUE((*waited)->Exec("SELECT 1").ok());
}

TEST_F(PgPoolTest, CloseWaitsForLeasesAndRefusesWaiters) {
  const std::string app = AppName();
  auto pool = PgPool::Open(server_->Dsn(), 1, Options());
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto held = (*pool)->Acquire();
  ASSERT_TRUE(held.ok()) << held.status();

  absl::Status waiter;
  std::thread waiting([&] { waiter = (*pool)->Acquire().status(); });
  absl::SleepFor(absl::Milliseconds(100));  // let it wait
  std::atomic<bool> closed{false};
  std::thread closer([&] {
    (*pool)->Close();
    closed = true;
  });
  waiting.join();  // woken by Close() with an error
  EXPECT_EQ(waiter.code(), absl::StatusCode::kCancelled) << waiter;
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(closed);  // still waiting for `held`
  EXPECT_TRUE((*held)->Exec("SELECT 1").ok());
  held->Release();
  closer.join();
  EXPECT_TRUE(closed);
  EXPECT_EQ(BackendsSettleAt(app, 0), 0);
  EXPECT_EQ((*pool)->Acquire().status().code(), absl::StatusCode::kCancelled);
  (*pool)->Close();  // again: nothing to do
}

TEST_F(PgPoolTest, EveryNewConnectionGetsTheSessionSetup) {
  const std::string app = AppName();
  PgPoolOptions options = Options();
  options.statement_timeout = absl::Milliseconds(300);
  options.validate_after_idle = absl::ZeroDuration();
  auto pool = PgPool::Open(server_->Dsn(), 1, options);
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto check = [&](PgConnection* conn) {
    auto r = conn->Exec(
        "SELECT current_setting('statement_timeout'), "
        "current_setting('application_name'), current_setting('TimeZone')");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(r->rows[0][0], Optional(std::string("300ms")));
    EXPECT_THAT(r->rows[0][1], Optional(app));
    EXPECT_THAT(r->rows[0][2], Optional(std::string("UTC")));
    const absl::Time start = absl::Now();
    EXPECT_EQ(conn->Exec("SELECT pg_sleep(10)").status().code(),
              absl::StatusCode::kDeadlineExceeded);
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  };
  std::string first;
  {
    auto lease = (*pool)->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.status();
    check(lease->get());
    first = Pid(lease->get());
  }
  // A replacement gets the same setup.
  Terminate(first);
  auto lease = (*pool)->Acquire();
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_NE(Pid(lease->get()), first);
  check(lease->get());
  EXPECT_EQ((*pool)->GetStats().opened, 2);
}

TEST_F(PgPoolTest, AGivenBackConnectionIsRolledBackOrDiscarded) {
  auto pool = PgPool::Open(server_->Dsn(), 1, Options());
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::string pid;
  {
    auto lease = (*pool)->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.status();
    pid = Pid(lease->get());
    ASSERT_TRUE((*lease)->Exec("DROP TABLE IF EXISTS pool_left_open").ok());
    ASSERT_TRUE((*lease)->Exec("CREATE TABLE pool_left_open (n int)").ok());
    ASSERT_TRUE((*lease)->Exec("BEGIN").ok());
    ASSERT_TRUE((*lease)->Exec("INSERT INTO pool_left_open VALUES (1)").ok());
  }  // given back inside its transaction
  {
    auto lease = (*pool)->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_EQ(Pid(lease->get()), pid);  // the same connection, reused
    auto n = (*lease)->Exec("SELECT count(*)::text FROM pool_left_open");
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_THAT(n->rows[0][0], Optional(std::string("0")));
    // Not in a transaction any more.
    auto savepoint = (*lease)->Exec("SAVEPOINT s");
    EXPECT_THAT(savepoint.status().message(), HasSubstr("SQLSTATE 25P01"));
    lease->Discard();
  }
  const PgPool::Stats stats = (*pool)->GetStats();
  EXPECT_EQ(stats.replaced, 1);  // discarded: closed, not reused
  EXPECT_EQ(stats.open, 0);
  auto lease = (*pool)->Acquire();
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_NE(Pid(lease->get()), pid);
  EXPECT_TRUE((*lease)->Exec("DROP TABLE pool_left_open").ok());
}

TEST_F(PgPoolTest, NoErrorRepeatsThePassword) {
  struct Case {
    std::string dsn;
    absl::StatusCode code;
    std::string says;
  };
  for (const Case& c : {
           // Nothing listens on port 1.
           Case{"host=127.0.0.1 port=1 dbname=postgres user=postgres "
                "password=secret connect_timeout=2",
                absl::StatusCode::kUnavailable, "connection 1 of 2"},
           Case{"postgresql://postgres:secret@127.0.0.1:1/postgres",
                absl::StatusCode::kUnavailable, "127.0.0.1"},
           // libpq quotes the value it cannot use: here the password's.
           Case{"host=127.0.0.1 port=secret user=postgres password=secret",
                absl::StatusCode::kInvalidArgument, "<password>"},
           // Strings that do not parse: libpq quotes the piece it choked on.
           Case{"postgresql://postgres:se%zzcret@127.0.0.1:1/postgres",
                absl::StatusCode::kInvalidArgument,
                "invalid percent-encoded token"},
           Case{"postgresql://postgres:secret@[::1/postgres",
                absl::StatusCode::kInvalidArgument, "IPv6 host address"},
           Case{"host=127.0.0.1 password=secret secret",
                absl::StatusCode::kInvalidArgument, "missing \"=\""},
           Case{"host=127.0.0.1 password='secret",
                absl::StatusCode::kInvalidArgument, "unterminated"},
       }) {
    SCOPED_TRACE(c.says);
    auto pool = PgPool::Open(c.dsn, 2, Options());
    ASSERT_FALSE(pool.ok());
    EXPECT_EQ(pool.status().code(), c.code) << pool.status();
    EXPECT_THAT(pool.status().message(), HasSubstr(c.says));
    EXPECT_THAT(pool.status().message(), Not(HasSubstr("secret")));
    EXPECT_THAT(pool.status().message(), Not(HasSubstr("zzcret")));
  }
  EXPECT_EQ(PgPool::Open(server_->Dsn(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);

  // A replacement that cannot connect says so, without the password too.
  // (The test server trusts any password.) A database of its own, which
  // stops taking logins for a moment.
  ASSERT_TRUE(
      admin_->Exec("DROP DATABASE IF EXISTS pool_refusing WITH (FORCE)").ok());
  ASSERT_TRUE(admin_->Exec("CREATE DATABASE pool_refusing").ok());
  const std::string dsn =
      absl::StrCat(server_->Dsn("pool_refusing"), " password=secret");
  PgPoolOptions options = Options();
  options.validate_after_idle = absl::ZeroDuration();
  auto pool = PgPool::Open(dsn, 1, options);
  ASSERT_TRUE(pool.ok()) << pool.status();
  {
    auto lease = (*pool)->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.status();
    ASSERT_TRUE((*lease)->Exec("SELECT 1").ok());
    lease->Discard();
  }
  auto allow =
      admin_->Exec("ALTER DATABASE pool_refusing WITH ALLOW_CONNECTIONS false");
  ASSERT_TRUE(allow.ok()) << allow.status();
  auto refused = (*pool)->Acquire();
  allow =
      admin_->Exec("ALTER DATABASE pool_refusing WITH ALLOW_CONNECTIONS true");
  ASSERT_TRUE(allow.ok()) << allow.status();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable)
      << refused.status();
  EXPECT_THAT(
      refused.status().message(),
      AllOf(HasSubstr("cannot open a PostgreSQL connection for the pool"),
            HasSubstr("not currently accepting connections"),
            Not(HasSubstr("secret"))));
  // And the pool recovers once the server takes logins again.
  {
    auto lease = (*pool)->Acquire();
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_TRUE((*lease)->Exec("SELECT 1").ok());
  }
  pool->reset();
  EXPECT_TRUE(admin_->Exec("DROP DATABASE pool_refusing").ok());
}

}  // namespace
}  // namespace storage_postgres_pool_test
}  // namespace backfill::postgres
