// What only PgStateStore (storage/postgres/state/pg_state_store.h) has,
// beyond the StateStore contract suite it passes
// (storage_state_store_contract_test.cc): several stores, as several
// processes would open them, on one database at once. Job numbers are
// handed out once each, an idempotency key makes one job however many
// creators race for it, and guarded moves of one job take turns. And the
// fencing of a group's replicas (SetFence): a store whose lease on a job
// was taken over writes nothing more about it.

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/error_details.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/state/pg_lease_store.h"
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

// The lease tokens one replica holds, as its LeaseKeeper would say them.
class TestFence : public LeaseFence {
 public:
  void Set(const std::string& job, std::optional<int64_t> token) {
    std::lock_guard<std::mutex> lock(mu_);
    tokens_[job] = token;
  }
  std::optional<int64_t> TokenFor(const std::string& job) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tokens_.find(job);
    return it == tokens_.end() ? std::nullopt : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::optional<int64_t>> tokens_;
};

TEST_F(PgStateStoreTest, AReplicaWhoseLeaseWasTakenOverWritesNothingMore) {
  auto stores = OpenStores(2);
  ASSERT_EQ(stores.size(), 2u);
  auto leases = PgLeaseStore::Open(server_->Dsn(database_));
  ASSERT_TRUE(leases.ok()) << leases.status();
  TestFence fence_a, fence_b;
  stores[0]->SetFence(&fence_a);
  stores[1]->SetFence(&fence_b);
  PgStateStore& a = *stores[0];
  PgStateStore& b = *stores[1];

  auto created = a.CreateJob(MakeJob("fenced"), T(0));  // no lease needed
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string id = created->job.id;
  auto claim_a = (*leases)->Claim(id, "a", "run", absl::Milliseconds(200));
  ASSERT_TRUE(claim_a.ok() && claim_a->claimed);
  fence_a.Set(id, claim_a->lease.token);
  ASSERT_TRUE(
      a.TransitionJob(id, JobState::kQueued, JobState::kRunning, "a runs", T(1))
          .ok());
  auto tasks = a.ListTasks(id);
  ASSERT_TRUE(tasks.ok() && !tasks->empty());

  // a stops renewing; b takes the job over once the lease expired.
  absl::SleepFor(absl::Milliseconds(300));
  auto claim_b = (*leases)->Claim(id, "b", "run", absl::Seconds(60));
  ASSERT_TRUE(claim_b.ok() && claim_b->claimed);
  EXPECT_EQ(claim_b->taken_from, "a");
  fence_b.Set(id, claim_b->lease.token);

  // Every write of a's, with its old token, is refused and changes nothing.
  PartitionTask stale = tasks->front();
  stale.state = TaskState::kStaged;
  stale.rows_written = 99;
  std::vector<absl::Status> refused = {
      a.TransitionJob(id, JobState::kRunning, JobState::kValidating, "late",
                      T(2)),
      a.SetJobMessage(id, JobState::kRunning, "late", T(2)),
      a.UpdateTask(stale),
      a.UpdateTasks({stale}),
      a.UpdateTasksInState(id, {TaskState::kPending}, TaskState::kCancelled,
                           T(2))
          .status(),
      a.RetryJob(id, JobState::kRunning, JobState::kRunning, "late", T(2))
          .status(),
      a.ReplaceCheckResults(id, {}),
      a.ReplaceConsumerConfirmations(id, {}),
      a.RecordPublication(id, {}, JobState::kConfirming, "late", T(2)),
  };
  for (const absl::Status& s : refused) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_EQ(DetailsOf(s).reason, "LEASE_LOST") << s;
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("replica b"));
  }
  auto job = b.GetJob(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kRunning);
  EXPECT_EQ(job->message, "a runs");
  auto after = b.ListTasks(id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->front().state, tasks->front().state);
  EXPECT_EQ(after->front().rows_written, tasks->front().rows_written);
  auto events = b.ListAuditEvents(id);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 2u);  // created, QUEUED -> RUNNING

  // A lease this process knows it lost (token 0) passes no write either;
  // b, the holder, writes.
  fence_a.Set(id, 0);
  EXPECT_EQ(a.SetJobMessage(id, JobState::kRunning, "late", T(3)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(b.TransitionJob(id, JobState::kRunning, JobState::kValidating,
                              "b goes on", T(3))
                  .ok());
  // Released, the lease fences its last holder off too.
  ASSERT_TRUE((*leases)->Release(claim_b->lease).ok());
  EXPECT_EQ(b.SetJobMessage(id, JobState::kValidating, "after", T(4)).code(),
            absl::StatusCode::kFailedPrecondition);
  // A write about a job the process holds no lease on is not fenced.
  fence_b.Set(id, std::nullopt);
  EXPECT_TRUE(
      b.SetJobMessage(id, JobState::kValidating, "unfenced", T(5)).ok());
}

}  // namespace
}  // namespace storage_postgres_state_store_test
}  // namespace backfill
