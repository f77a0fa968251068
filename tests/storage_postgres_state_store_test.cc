// What only PgStateStore (storage/postgres/state/pg_state_store.h) has,
// beyond the StateStore contract suite it passes
// (storage_state_store_contract_test.cc): several stores, as several
// processes would open them, on one database at once. Job numbers are
// handed out once each, an idempotency key makes one job however many
// creators race for it, and guarded moves of one job take turns.

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/state/pg_state_store.h"
#include "tests/testing/postgres_suite.h"
#include "tests/testing/state_store_contract.h"

namespace backfill {
namespace storage_postgres_state_store_test {
namespace {

using postgres::PgConnection;
using testing::MakeJob;
using testing::T;

class PgStateStoreTest : public backfill::testing::PostgresSuite {
 protected:
  // Each test gets a database of its own.
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    static int next = 0;
    auto database = server_->CreateDatabase(absl::StrCat("pgstore_", ++next));
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = *database;
  }
  void TearDown() override {
    if (!database_.empty()) server_->DropDatabase(database_).IgnoreError();
  }

  // `n` stores on the test's database, opened at once (each migrates it or
  // finds it migrated).
  std::vector<std::unique_ptr<PgStateStore>> OpenStores(int n) {
    std::vector<std::unique_ptr<PgStateStore>> stores(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        auto store = PgStateStore::Open(server_->Dsn(database_));
        EXPECT_TRUE(store.ok()) << store.status();
        if (store.ok()) stores[i] = *std::move(store);
      });
    }
    for (std::thread& t : threads) t.join();
    return stores;
  }

  std::string database_;
};

TEST_F(PgStateStoreTest, StoresOnOneDatabaseShareItsIdentity) {
  auto stores = OpenStores(3);
  ASSERT_EQ(stores.size(), 3u);
  auto a = stores[0]->Info();
  auto b = stores[2]->Info();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->store_id, b->store_id);
  EXPECT_EQ(a->created_at, b->created_at);
}

TEST_F(PgStateStoreTest, ConcurrentCreatorsNeverShareAJobNumberOrAKey) {
  constexpr int kStores = 3;
  constexpr int kThreadsPerStore = 3;
  constexpr int kJobsPerThread = 6;
  auto stores = OpenStores(kStores);
  ASSERT_EQ(stores.size(), static_cast<size_t>(kStores));
  // Every thread creates jobs of its own and, in between, one job with a
  // key that every thread asks for.
  std::mutex mu;
  std::vector<std::string> created_ids;
  std::set<std::string> keyed_ids;
  int keyed_created = 0;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int s = 0; s < kStores; ++s) {
    for (int t = 0; t < kThreadsPerStore; ++t) {
      threads.emplace_back([&, s] {
        for (int j = 0; j < kJobsPerThread; ++j) {
          const std::string key = j == kJobsPerThread / 2 ? "shared-key" : "";
          auto created = stores[s]->CreateJob(MakeJob(key), T(j));
          if (!created.ok()) {
            ++failures;
            ADD_FAILURE() << created.status();
            continue;
          }
          std::lock_guard<std::mutex> lock(mu);
          if (created->created) created_ids.push_back(created->job.id);
          if (!key.empty()) {
            keyed_ids.insert(created->job.id);
            if (created->created) ++keyed_created;
          }
        }
      });
    }
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  // One job for the key, which every creator was given.
  EXPECT_EQ(keyed_created, 1);
  EXPECT_EQ(keyed_ids.size(), 1u);
  // The numbers handed out are 1..n, each once.
  const int expected =
      kStores * kThreadsPerStore * (kJobsPerThread - 1) + keyed_created;
  ASSERT_EQ(created_ids.size(), static_cast<size_t>(expected));
  std::set<std::string> unique(created_ids.begin(), created_ids.end());
  EXPECT_EQ(unique.size(), created_ids.size());
  for (int n = 1; n <= expected; ++n) {
    EXPECT_EQ(unique.count(absl::StrCat("bf-", n)), 1u) << n;
  }
  auto info = stores[1]->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->last_job_number, expected);
  // Each job has its one creation event.
  AuditQuery everything;
  everything.limit = 1000;
  auto audit = stores[2]->ListAuditLog(everything);
  ASSERT_TRUE(audit.ok()) << audit.status();
  EXPECT_EQ(audit->size(), static_cast<size_t>(expected));
}

TEST_F(PgStateStoreTest, ACreatorThatLosesTheRaceForAKeyReturnsTheWinner) {
  auto stores = OpenStores(1);
  ASSERT_EQ(stores.size(), 1u);
  // Another process's creation of a job with key "k", not committed yet.
  auto other = PgConnection::Connect(server_->Dsn(database_));
  ASSERT_TRUE(other.ok()) << other.status();
  postgres::PgTransaction txn(other->get());
  ASSERT_TRUE(txn.Begin().ok());
  ASSERT_TRUE((*other)
                  ->Exec("INSERT INTO backfill_state.jobs (id, seq, state, "
                         "dataset, idempotency_key) VALUES ('bf-100', 100, "
                         "'QUEUED', 'daily_revenue', 'k')")
                  .ok());
  // This creator does not see it, inserts, and waits for the other.
  absl::StatusOr<CreateJobResult> created;
  std::thread creator(
      [&] { created = stores[0]->CreateJob(MakeJob("k"), T(1)); });
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE(txn.Commit().ok());
  creator.join();
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE(created->created);
  EXPECT_EQ(created->job.id, "bf-100");
  // Nothing of the loser is left: no job, no number used.
  auto info = stores[0]->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->last_job_number, 0);
  auto ids = stores[0]->ListJobIds({JobState::kQueued});
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ::testing::ElementsAre("bf-100"));
}

TEST_F(PgStateStoreTest, RacingGuardedMovesOfOneJobTakeTurns) {
  auto stores = OpenStores(4);
  ASSERT_EQ(stores.size(), 4u);
  ASSERT_TRUE(stores[0]->CreateJob(MakeJob(), T(0)).ok());
  // Four writers try QUEUED -> RUNNING at once: exactly one moves it.
  std::atomic<int> moved{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      absl::Status s = stores[i]->TransitionJob("bf-1", JobState::kQueued,
                                                JobState::kRunning, "go", T(1));
      if (s.ok()) {
        ++moved;
      } else if (s.code() == absl::StatusCode::kFailedPrecondition) {
        ++refused;
      } else {
        ADD_FAILURE() << s;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(moved.load(), 1);
  EXPECT_EQ(refused.load(), 3);
  auto events = stores[3]->ListAuditEvents("bf-1");
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 2u);  // created, then the one move
}

}  // namespace
}  // namespace storage_postgres_state_store_test
}  // namespace backfill
