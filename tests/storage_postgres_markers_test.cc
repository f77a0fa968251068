// The warehouse's own records (storage/sql/markers.h) on a real PostgreSQL
// server, through the PostgreSQL dialect: the service schema is created
// once however many daemons start at the same moment,
// claims follow the ownership rules (unnamed markers stamped by the first
// claim only, a take over keeps every marker's store), publication and
// rollback markers are written only by the caller's transaction (a rolled
// back transaction leaves none), and an ownership check holds the owner
// until the caller commits. Every expectation is read back with plain SQL
// on a connection of its own.

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/error_details.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_dialect.h"
#include "storage/postgres/pg_sql_connection.h"
#include "storage/sql/connection.h"
#include "storage/sql/markers.h"
#include "tests/testing/postgres_suite.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill::postgres {
namespace storage_postgres_markers_test {
namespace {

using sql::AdvanceFence;
using sql::CheckFence;
using sql::CheckOwner;
using sql::ClaimWarehouse;
using sql::HasPublication;
using sql::ReadWarehouseInfo;
using sql::RecordPublication;
using sql::RecordRollback;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

class PgMarkersTest : public backfill::testing::PostgresSuite {
 protected:
  // Each test gets a database of its own.
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    static int next = 0;
    database_ = absl::StrCat(server_->database(), "_markers_", ++next);
    auto admin = PgConnection::Connect(server_->Dsn());
    ASSERT_TRUE(admin.ok()) << admin.status();
    ASSERT_TRUE((*admin)
                    ->Exec(absl::StrCat("DROP DATABASE IF EXISTS ", database_))
                    .ok());
    ASSERT_TRUE(
        (*admin)->Exec(absl::StrCat("CREATE DATABASE ", database_)).ok());
    conn_ = Connect();
    ASSERT_NE(conn_, nullptr);
  }

  std::unique_ptr<PgConnection> Connect() {
    auto conn = PgConnection::Connect(server_->Dsn(database_));
    EXPECT_TRUE(conn.ok()) << conn.status();
    return conn.ok() ? *std::move(conn) : nullptr;
  }

  // The rows of `sql`, each as "a|b|...", read on a connection of its own.
  std::vector<std::string> Rows(const std::string& sql) {
    std::unique_ptr<PgConnection> other = Connect();
    if (other == nullptr) return {};
    auto r = other->Exec(sql);
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<std::string> out;
    if (!r.ok()) return out;
    for (const auto& row : r->rows) {
      std::string line;
      for (size_t i = 0; i < row.size(); ++i) {
        absl::StrAppend(&line, i ? "|" : "", row[i].value_or("NULL"));
      }
      out.push_back(line);
    }
    return out;
  }

  // `conn` as the shared units take it (kept until the test ends).
  PgSqlConnection* Sql(PgConnection* conn) {
    std::lock_guard<std::mutex> lock(wrapped_mu_);
    wrapped_.push_back(std::make_unique<PgSqlConnection>(conn, &dialect_));
    return wrapped_.back().get();
  }
  absl::Status CreateServiceSchema(PgConnection* conn) {
    return dialect_.CreateServiceSchema(Sql(conn));
  }

  std::string database_;
  std::unique_ptr<PgConnection> conn_;
  PgDialect dialect_{"public", false};
  std::mutex wrapped_mu_;
  std::vector<std::unique_ptr<PgSqlConnection>> wrapped_;
};

TEST_F(PgMarkersTest, TheServiceSchemaIsCreatedOnceByConcurrentStarts) {
  constexpr int kStarts = 6;
  std::vector<std::unique_ptr<PgConnection>> conns;
  for (int i = 0; i < kStarts; ++i) {
    conns.push_back(Connect());
    ASSERT_NE(conns.back(), nullptr);
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kStarts; ++i) {
    threads.emplace_back([&, i] {
      absl::Status s = CreateServiceSchema(conns[i].get());
      if (!s.ok()) {
        ++failures;
        ADD_FAILURE() << s;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_THAT(Rows("SELECT table_name FROM information_schema.tables WHERE "
                   "table_schema = '_bf' ORDER BY 1"),
              ElementsAre("change_counts", "change_tables", "fingerprints",
                          "meta", "publications", "rollbacks"));
  // Again on an existing schema: nothing changes, nothing fails.
  ASSERT_TRUE(CreateServiceSchema(conn_.get()).ok());
  auto info = ReadWarehouseInfo(Sql(conn_.get()));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->owner_store_id, "");
  EXPECT_THAT(info->publications, IsEmpty());
  EXPECT_THAT(info->rollbacks, IsEmpty());
}

TEST_F(PgMarkersTest, ClaimFollowsTheOwnershipRules) {
  ASSERT_TRUE(CreateServiceSchema(conn_.get()).ok());
  // Markers written before any store claimed the warehouse.
  ASSERT_TRUE(conn_
                  ->Exec("INSERT INTO _bf.publications VALUES ('', 'bf-1', "
                         "now()), ('', 'bf-2', now())")
                  .ok());
  ASSERT_TRUE(ClaimWarehouse(Sql(conn_.get()), "store-a", false).ok());
  EXPECT_THAT(Rows("SELECT value FROM _bf.meta WHERE key = 'owner_store_id'"),
              ElementsAre("store-a"));
  EXPECT_THAT(Rows("SELECT store_id, job_id FROM _bf.publications ORDER BY 2"),
              ElementsAre("store-a|bf-1", "store-a|bf-2"));

  // Claiming again is a no-op; another store is refused without take over
  // and changes nothing.
  ASSERT_TRUE(ClaimWarehouse(Sql(conn_.get()), "store-a", false).ok());
  absl::Status refused = ClaimWarehouse(Sql(conn_.get()), "store-b", false);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("belongs to state store store-a"));
  EXPECT_THAT(Rows("SELECT value FROM _bf.meta"), ElementsAre("store-a"));

  // A take over keeps every marker's store, and a new unnamed marker is
  // not stamped by it (only the first claim does that).
  ASSERT_TRUE(conn_
                  ->Exec("INSERT INTO _bf.publications VALUES ('', 'bf-9', "
                         "now())")
                  .ok());
  ASSERT_TRUE(ClaimWarehouse(Sql(conn_.get()), "store-b", true).ok());
  EXPECT_THAT(Rows("SELECT value FROM _bf.meta"), ElementsAre("store-b"));
  EXPECT_THAT(Rows("SELECT store_id, job_id FROM _bf.publications ORDER BY 2"),
              ElementsAre("store-a|bf-1", "store-a|bf-2", "|bf-9"));
  EXPECT_EQ(ClaimWarehouse(Sql(conn_.get()), "", false).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PgMarkersTest, TheFirstClaimKeepsAMarkerTheStoreAlreadyWrote) {
  ASSERT_TRUE(CreateServiceSchema(conn_.get()).ok());
  ASSERT_TRUE(conn_
                  ->Exec("INSERT INTO _bf.publications VALUES ('', 'bf-1', "
                         "'2025-01-01 00:00:00+00'), ('store-a', 'bf-1', "
                         "'2025-02-01 00:00:00+00')")
                  .ok());
  ASSERT_TRUE(ClaimWarehouse(Sql(conn_.get()), "store-a", false).ok());
  EXPECT_THAT(Rows("SELECT store_id, job_id, published_at FROM "
                   "_bf.publications"),
              ElementsAre("store-a|bf-1|2025-02-01 00:00:00+00"));
}

TEST_F(PgMarkersTest, MarkersAreWrittenOnlyByTheCallersTransaction) {
  ASSERT_TRUE(CreateServiceSchema(conn_.get()).ok());
  ASSERT_TRUE(ClaimWarehouse(Sql(conn_.get()), "store-a", false).ok());
  const absl::Time when = absl::FromUnixSeconds(1735689600);  // 2025-01-01
  RollbackMarker marker;
  marker.requested_by = "erin";
  marker.reason = "bad data, 'quoted'; -- and more";
  marker.forced = true;
  marker.with_jobs = {"bf-5", "bf-4"};
  {
    PgTransaction txn(conn_.get());
    ASSERT_TRUE(txn.Begin().ok());
    ASSERT_TRUE(CheckOwner(Sql(conn_.get()), "store-a", "publish of job bf-3",
                           "written")
                    .ok());
    ASSERT_TRUE(
        RecordPublication(Sql(conn_.get()), "store-a", "bf-3", when).ok());
    ASSERT_TRUE(
        RecordRollback(Sql(conn_.get()), "store-a", "bf-2", marker, when).ok());
    // Rolled back on scope exit.
  }
  EXPECT_THAT(Rows("SELECT count(*) FROM _bf.publications"), ElementsAre("0"));
  EXPECT_THAT(Rows("SELECT count(*) FROM _bf.rollbacks"), ElementsAre("0"));
  {
    PgTransaction txn(conn_.get());
    ASSERT_TRUE(txn.Begin().ok());
    ASSERT_TRUE(
        RecordPublication(Sql(conn_.get()), "store-a", "bf-3", when).ok());
    ASSERT_TRUE(
        RecordRollback(Sql(conn_.get()), "store-a", "bf-2", marker, when).ok());
    ASSERT_TRUE(txn.Commit().ok());
  }
  // Writing them again changes nothing.
  ASSERT_TRUE(RecordPublication(Sql(conn_.get()), "store-a", "bf-3",
                                when + absl::Hours(1))
                  .ok());
  EXPECT_THAT(Rows("SELECT store_id, job_id, published_at FROM "
                   "_bf.publications"),
              ElementsAre("store-a|bf-3|2025-01-01 00:00:00+00"));
  auto published = HasPublication(Sql(conn_.get()), "store-a", "bf-3");
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_TRUE(*published);
  auto other = HasPublication(Sql(conn_.get()), "store-b", "bf-3");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_FALSE(*other);

  auto info = ReadWarehouseInfo(Sql(conn_.get()));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->owner_store_id, "store-a");
  EXPECT_THAT(info->publications, ElementsAre(Pair("bf-3", "store-a")));
  ASSERT_EQ(info->rollbacks.count("bf-2"), 1u);
  const RollbackMarker& read = info->rollbacks.at("bf-2");
  EXPECT_EQ(read.store_id, "store-a");
  EXPECT_EQ(read.requested_by, "erin");
  EXPECT_EQ(read.reason, marker.reason);
  EXPECT_TRUE(read.forced);
  EXPECT_THAT(read.with_jobs, ElementsAre("bf-5", "bf-4"));
}

TEST_F(PgMarkersTest, AnOwnershipCheckHoldsTheOwnerUntilTheCallerCommits) {
  ASSERT_TRUE(CreateServiceSchema(conn_.get()).ok());
  ASSERT_TRUE(ClaimWarehouse(Sql(conn_.get()), "store-a", false).ok());
  std::unique_ptr<PgConnection> taker = Connect();
  ASSERT_NE(taker, nullptr);

  PgTransaction txn(conn_.get());
  ASSERT_TRUE(txn.Begin().ok());
  ASSERT_TRUE(
      CheckOwner(Sql(conn_.get()), "store-a", "publish of job bf-1", "written")
          .ok());
  std::atomic<bool> taken{false};
  std::thread take_over([&] {
    EXPECT_TRUE(ClaimWarehouse(Sql(taker.get()), "store-b", true).ok());
    taken = true;
  });
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(taken.load()) << "the take over did not wait for the publish";
  ASSERT_TRUE(
      RecordPublication(Sql(conn_.get()), "store-a", "bf-1", absl::Now()).ok());
  ASSERT_TRUE(txn.Commit().ok());
  take_over.join();
  EXPECT_TRUE(taken.load());

  // From now on a check of store-a refuses, naming both stores.
  PgTransaction late(conn_.get());
  ASSERT_TRUE(late.Begin().ok());
  absl::Status refused =
      CheckOwner(Sql(conn_.get()), "store-a", "publish of job bf-2", "written");
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("publish of job bf-2: the warehouse no longer belongs "
                        "to this state store (store-a) but to store-b"));
}

TEST_F(PgMarkersTest, ReadingBeforeTheSchemaExistsIsTheServersError) {
  auto info = ReadWarehouseInfo(Sql(conn_.get()));
  EXPECT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(info.status().message()), HasSubstr("_bf.meta"));
}

// The fences of a group's replicas (markers.h AdvanceFence, CheckFence):
// only ever raised, and a check in a transaction keeps a claim from
// raising the fence until the transaction ends.
TEST_F(PgMarkersTest, AJobsFenceOnlyRises) {
  ASSERT_TRUE(CreateServiceSchema(conn_.get()).ok());
  PgSqlConnection* c = Sql(conn_.get());
  ASSERT_TRUE(AdvanceFence(c, "bf-1", 1).ok());
  ASSERT_TRUE(AdvanceFence(c, "bf-1", 1).ok());  // again: nothing changes
  ASSERT_TRUE(AdvanceFence(c, "bf-1", 3).ok());
  absl::Status lower = AdvanceFence(c, "bf-1", 2);
  EXPECT_EQ(lower.code(), absl::StatusCode::kFailedPrecondition) << lower;
  EXPECT_EQ(DetailsOf(lower).reason, "LEASE_LOST");
  ASSERT_TRUE(AdvanceFence(c, "bf-2", 7).ok());
  EXPECT_THAT(
      Rows("SELECT key, value FROM _bf.meta WHERE key LIKE 'fence:%' ORDER "
           "BY 1"),
      ElementsAre("fence:bf-1|3", "fence:bf-2|7"));
  // A check passes for the fence's own token only: an older one, a newer
  // one (not claimed yet) and a job without a fence are refused.
  for (const auto& [job, token, ok] :
       std::vector<std::tuple<std::string, int64_t, bool>>{
           {"bf-1", 3, true},
           {"bf-1", 2, false},
           {"bf-1", 4, false},
           {"bf-2", 7, true},
           {"bf-3", 1, false}}) {
    PgTransaction txn(conn_.get());
    ASSERT_TRUE(txn.Begin().ok());
    absl::Status s =
        CheckFence(c, job, token, "publish of job " + job, "published");
    EXPECT_EQ(s.ok(), ok) << job << " " << token << ": " << s;
    if (!ok) {
      EXPECT_EQ(DetailsOf(s).reason, "LEASE_LOST");
      EXPECT_THAT(std::string(s.message()),
                  ::testing::StartsWith("publish of job " + job));
      EXPECT_THAT(std::string(s.message()),
                  ::testing::EndsWith("nothing was published"));
    }
  }
}

TEST_F(PgMarkersTest, AFenceCheckHoldsOffAClaimUntilItsTransactionEnds) {
  ASSERT_TRUE(CreateServiceSchema(conn_.get()).ok());
  ASSERT_TRUE(AdvanceFence(Sql(conn_.get()), "bf-1", 1).ok());
  std::unique_ptr<PgConnection> claimer = Connect();
  ASSERT_NE(claimer, nullptr);
  PgTransaction txn(conn_.get());
  ASSERT_TRUE(txn.Begin().ok());
  ASSERT_TRUE(CheckFence(Sql(conn_.get()), "bf-1", 1, "publish of job bf-1",
                         "published")
                  .ok());
  absl::Notification raised;
  absl::Status claim;
  std::thread taking([&] {
    claim = AdvanceFence(Sql(claimer.get()), "bf-1", 2);
    raised.Notify();
  });
  // The publish's transaction holds the fence: the claim waits for it.
  EXPECT_FALSE(raised.WaitForNotificationWithTimeout(absl::Milliseconds(300)));
  ASSERT_TRUE(txn.Commit().ok());
  taking.join();
  EXPECT_TRUE(claim.ok()) << claim;
  EXPECT_THAT(Rows("SELECT value FROM _bf.meta WHERE key = 'fence:bf-1'"),
              ElementsAre("2"));
  // The replica that checked token 1 is fenced off from now on.
  PgTransaction again(conn_.get());
  ASSERT_TRUE(again.Begin().ok());
  EXPECT_EQ(CheckFence(Sql(conn_.get()), "bf-1", 1, "publish of job bf-1",
                       "published")
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(PgMarkersTest, ConcurrentClaimsLeaveTheHighestFence) {
  ASSERT_TRUE(CreateServiceSchema(conn_.get()).ok());
  constexpr int kClaims = 8;
  std::vector<std::unique_ptr<PgConnection>> conns;
  for (int i = 0; i < kClaims; ++i) {
    conns.push_back(Connect());
    ASSERT_NE(conns.back(), nullptr);
  }
  std::vector<absl::Status> results(kClaims);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClaims; ++i) {
    threads.emplace_back([&, i] {
      // A claim that loses the race to create the row fails on its key and
      // is tried again, as a replica claims again at its next scan.
      for (int attempt = 0; attempt < 3; ++attempt) {
        results[i] = AdvanceFence(Sql(conns[i].get()), "bf-1", i + 1);
        if (results[i].ok() || DetailsOf(results[i]).reason == "LEASE_LOST") {
          break;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_THAT(Rows("SELECT value FROM _bf.meta WHERE key = 'fence:bf-1'"),
              ElementsAre(absl::StrCat(kClaims)));
  EXPECT_TRUE(results[kClaims - 1].ok()) << results[kClaims - 1];
  for (const absl::Status& s : results) {
    EXPECT_TRUE(s.ok() || DetailsOf(s).reason == "LEASE_LOST") << s;
  }
}

// Replicas of a group start at once and each claims the warehouse for the
// state store they share: every claim succeeds, and the owner is that store.
// A claim for another store, racing them, is refused or wins alone.
TEST_F(PgMarkersTest, ReplicasOfOneStoreClaimTheWarehouseAtOnce) {
  ASSERT_TRUE(CreateServiceSchema(conn_.get()).ok());
  ASSERT_TRUE(conn_
                  ->Exec("INSERT INTO _bf.publications VALUES ('', 'bf-1', "
                         "now())")
                  .ok());
  constexpr int kReplicas = 6;
  std::vector<std::unique_ptr<PgConnection>> conns;
  for (int i = 0; i < kReplicas + 1; ++i) {
    conns.push_back(Connect());
    ASSERT_NE(conns.back(), nullptr);
  }
  std::vector<absl::Status> results(kReplicas + 1);
  std::vector<std::thread> threads;
  for (int i = 0; i <= kReplicas; ++i) {
    threads.emplace_back([&, i] {
      results[i] = ClaimWarehouse(Sql(conns[i].get()),
                                  i < kReplicas ? "store-a" : "store-b",
                                  /*take_over=*/false);
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<std::string> owner =
      Rows("SELECT value FROM _bf.meta WHERE key = 'owner_store_id'");
  ASSERT_EQ(owner.size(), 1u);
  if (owner[0] == "store-a") {
    for (int i = 0; i < kReplicas; ++i)
      EXPECT_TRUE(results[i].ok()) << results[i];
    EXPECT_EQ(results[kReplicas].code(), absl::StatusCode::kFailedPrecondition);
  } else {
    EXPECT_EQ(owner[0], "store-b");
    EXPECT_TRUE(results[kReplicas].ok());
    for (int i = 0; i < kReplicas; ++i) {
      EXPECT_EQ(results[i].code(), absl::StatusCode::kFailedPrecondition)
          << results[i];
    }
  }
  // The unnamed marker was stamped once, by the winner.
  EXPECT_THAT(Rows("SELECT store_id, job_id FROM _bf.publications"),
              ElementsAre(owner[0] + "|bf-1"));
}

}  // namespace
}  // namespace storage_postgres_markers_test
}  // namespace backfill::postgres
