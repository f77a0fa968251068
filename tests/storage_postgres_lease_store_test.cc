// PgLeaseStore (storage/postgres/state/pg_lease_store.h) proven by the
// lease store contract suite (tests/testing/lease_store_contract.h), and
// what only it has: replicas as separate processes would be (each a store
// with connections of its own) claiming the same jobs at once, round after
// round with the leases expiring in between; the rows the state store's
// fencing check reads; a store opened before or after a state store, or on
// a pool of the caller's.

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_pool.h"
#include "storage/postgres/state/pg_lease_store.h"
#include "storage/postgres/state/pg_state_schema.h"
#include "storage/postgres/state/pg_state_store.h"
#include "tests/testing/lease_store_contract.h"
#include "tests/testing/postgres_suite.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill {
namespace storage_postgres_lease_store_test {
namespace {

using postgres::PgConnection;
using postgres::PgPool;
using testing::kLongLease;
using testing::LeaseStoreContractTest;
using testing::LeaseStoreUnderTest;
using testing::PostgresTestServer;

// A database of its own per store of the contract suite, on the ctest
// run's shared server (or one this process starts, stopped at exit),
// dropped when the store is done with it.
class PgLeaseDatabase {
 public:
  static absl::StatusOr<std::shared_ptr<PgLeaseDatabase>> Fresh() {
    // Stopped (or its database dropped) at exit, after the last store.
    static std::unique_ptr<PostgresTestServer> server;
    static int next = 0;
    if (server == nullptr) {
      auto started = PostgresTestServer::StartOrShare();
      if (!started.ok()) return started.status();
      server = *std::move(started);
    }
    auto name = server->CreateDatabase(absl::StrCat("leases_", ++next));
    if (!name.ok()) return name.status();
    return std::shared_ptr<PgLeaseDatabase>(
        new PgLeaseDatabase(server.get(), *std::move(name)));
  }
  ~PgLeaseDatabase() { server_->DropDatabase(name_).IgnoreError(); }

  std::string Dsn() const { return server_->Dsn(name_); }

 private:
  PgLeaseDatabase(PostgresTestServer* server, std::string name)
      : server_(server), name_(std::move(name)) {}

  PostgresTestServer* server_;
  std::string name_;
};

testing::LeaseStoreFactory PostgresLeases() {
  return {"Postgres", []() -> absl::StatusOr<LeaseStoreUnderTest> {
            auto database = PgLeaseDatabase::Fresh();
            if (!database.ok()) return database.status();
            auto store = PgLeaseStore::Open((*database)->Dsn());
            if (!store.ok()) return store.status();
            LeaseStoreUnderTest out;
            out.keep = *database;
            out.store = *std::move(store);
            // The server's clock is this machine's: the test server runs
            // here.
            out.advance = [](absl::Duration d) { absl::SleepFor(d); };
            out.now = [] { return absl::Now(); };
            return out;
          }};
}

INSTANTIATE_TEST_SUITE_P(Postgres, LeaseStoreContractTest,
                         ::testing::Values(PostgresLeases()),
                         testing::LeaseStoreParamName);

class PgLeaseStoreTest : public backfill::testing::PostgresSuite {
 protected:
  // Each test gets a database of its own.
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    static int next = 0;
    auto database = server_->CreateDatabase(absl::StrCat("pglease_", ++next));
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = *database;
  }
  void TearDown() override {
    if (!database_.empty()) server_->DropDatabase(database_).IgnoreError();
  }

  // `n` stores on the test's database, opened at once (each migrates it or
  // finds it migrated), each with connections of its own.
  std::vector<std::unique_ptr<PgLeaseStore>> OpenStores(int n) {
    std::vector<std::unique_ptr<PgLeaseStore>> stores(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        auto store = PgLeaseStore::Open(server_->Dsn(database_));
        EXPECT_TRUE(store.ok()) << store.status();
        if (store.ok()) stores[i] = *std::move(store);
      });
    }
    for (std::thread& t : threads) t.join();
    for (const auto& store : stores) {
      if (store == nullptr) return {};
    }
    return stores;
  }

  std::string database_;
};

TEST_F(PgLeaseStoreTest, ReplicasClaimingTheSameJobsAtOnceGetOneWinnerEach) {
  constexpr int kReplicas = 8;
  constexpr int kJobs = 20;
  constexpr int kRounds = 4;
  std::vector<std::unique_ptr<PgLeaseStore>> stores = OpenStores(kReplicas);
  ASSERT_EQ(stores.size(), static_cast<size_t>(kReplicas));
  auto node_of = [](int r) { return absl::StrCat("node-", r); };
  auto job_of = [](int j) { return absl::StrCat("job-", j); };

  std::map<std::string, std::string> previous_winner;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    // Every replica claims every job, all at once, each in its own order.
    std::vector<std::map<std::string, ClaimResult>> results(kReplicas);
    absl::Notification go;
    std::vector<std::thread> threads;
    for (int r = 0; r < kReplicas; ++r) {
      threads.emplace_back([&, r] {
        go.WaitForNotification();
        for (int j = 0; j < kJobs; ++j) {
          const std::string job = job_of((j + 3 * r) % kJobs);
          auto claimed = stores[r]->Claim(job, node_of(r), "run", kLongLease);
          EXPECT_TRUE(claimed.ok()) << claimed.status();
          if (claimed.ok()) results[r][job] = *claimed;
        }
      });
    }
    go.Notify();
    for (std::thread& t : threads) t.join();

    std::map<int, std::vector<JobLease>> won;  // by replica
    for (int j = 0; j < kJobs; ++j) {
      const std::string job = job_of(j);
      std::vector<int> winners;
      for (int r = 0; r < kReplicas; ++r) {
        ASSERT_EQ(results[r].count(job), 1u) << job;
        if (results[r][job].claimed) winners.push_back(r);
      }
      ASSERT_EQ(winners.size(), 1u) << job;
      const ClaimResult& win = results[winners[0]][job];
      const std::string winner = node_of(winners[0]);
      // One change of hands a round: the token grows by one each.
      EXPECT_EQ(win.lease.token, round + 1) << job;
      EXPECT_EQ(win.lease.node, winner);
      // Over the previous round's expired lease: a takeover, unless the
      // same replica won again.
      const std::string& before = previous_winner[job];
      EXPECT_EQ(win.taken_from, before == winner ? "" : before) << job;
      // Every other replica was told who won.
      for (int r = 0; r < kReplicas; ++r) {
        if (r == winners[0]) continue;
        EXPECT_EQ(results[r][job].lease.node, winner) << job;
        EXPECT_EQ(results[r][job].lease.token, win.lease.token) << job;
        EXPECT_EQ(results[r][job].taken_from, "") << job;
      }
      previous_winner[job] = winner;
      won[winners[0]].push_back(win.lease);
    }

    // The leases expire: each winner renews what it won for a
    // millisecond, and time passes.
    for (const auto& [r, leases] : won) {
      auto lost = stores[r]->Renew(node_of(r), leases, absl::Milliseconds(1));
      ASSERT_TRUE(lost.ok()) << lost.status();
      EXPECT_THAT(*lost, ::testing::IsEmpty());
    }
    absl::SleepFor(absl::Milliseconds(50));
    auto leases = stores[0]->ListLeases();
    ASSERT_TRUE(leases.ok()) << leases.status();
    ASSERT_EQ(leases->size(), static_cast<size_t>(kJobs));
    for (const JobLease& lease : *leases) {
      EXPECT_FALSE(lease.live) << lease.job_id;
      EXPECT_EQ(lease.token, round + 1) << lease.job_id;
      EXPECT_EQ(lease.node, previous_winner[lease.job_id]);
    }
  }
}

TEST_F(PgLeaseStoreTest, TheStateStoresFencingCheckReadsTheLeaseRow) {
  auto stores = OpenStores(1);
  ASSERT_EQ(stores.size(), 1u);
  auto conn = PgConnection::Connect(server_->Dsn(database_));
  ASSERT_TRUE(conn.ok()) << conn.status();
  // The state store's check, in a transaction of its own.
  auto fence = [&](const std::string& job) {
    postgres::PgTransaction txn(conn->get());
    EXPECT_TRUE(txn.Begin().ok());
    auto r = (*conn)->Exec(
        "SELECT node, token FROM backfill_state.job_leases WHERE job_id = $1 "
        "FOR SHARE",
        {job});
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(txn.Commit().ok());
    if (!r.ok() || r->rows.empty()) return std::string("none");
    return absl::StrCat(r->rows[0][0].value_or("NULL"), "|",
                        r->rows[0][1].value_or("NULL"));
  };
  EXPECT_EQ(fence("job-1"), "none");
  auto a = stores[0]->Claim("job-1", "node-a", "run", kLongLease);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(fence("job-1"), "node-a|1");
  ASSERT_TRUE(stores[0]->Release(a->lease).ok());
  EXPECT_EQ(fence("job-1"), "|1");  // released: no holder, the token stays
  auto b = stores[0]->Claim("job-1", "node-b", "run", kLongLease);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(fence("job-1"), "node-b|2");
}

TEST_F(PgLeaseStoreTest, OpensBeforeOrAfterAStateStoreOnOneDatabase) {
  // The lease store first: the state store finds the schema migrated.
  auto leases = PgLeaseStore::Open(server_->Dsn(database_));
  ASSERT_TRUE(leases.ok()) << leases.status();
  auto state = PgStateStore::Open(server_->Dsn(database_));
  ASSERT_TRUE(state.ok()) << state.status();
  auto again = PgLeaseStore::Open(server_->Dsn(database_));
  ASSERT_TRUE(again.ok()) << again.status();
  auto claimed = (*leases)->Claim("job-1", "node-a", "run", kLongLease);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  auto refused = (*again)->Claim("job-1", "node-b", "run", kLongLease);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_FALSE(refused->claimed);
  EXPECT_EQ(refused->lease.node, "node-a");
}

TEST_F(PgLeaseStoreTest, RunsOnAPoolOfTheCallers) {
  auto pool = PgPool::Open(server_->Dsn(database_), 1);
  ASSERT_TRUE(pool.ok()) << pool.status();
  {
    auto conn = (*pool)->Acquire();
    ASSERT_TRUE(conn.ok()) << conn.status();
    ASSERT_TRUE(postgres::MigrateStateSchema(conn->get()).ok());
  }
  PgLeaseStore store(pool->get());
  ASSERT_TRUE(
      store.Heartbeat(testing::MakeNode("node-a", "10.0.0.1:7000")).ok());
  auto claimed = store.Claim("job-1", "node-a", "run", kLongLease);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  EXPECT_EQ(claimed->lease.token, 1);
  auto nodes = store.ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].address, "10.0.0.1:7000");
}

}  // namespace
}  // namespace storage_postgres_lease_store_test
}  // namespace backfill
