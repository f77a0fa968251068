// The in-memory LeaseStore of the tests (tests/testing/memory_lease_store.h)
// proven by the lease store contract suite (tests/testing/
// lease_store_contract.h), on a ManualClock; and what only it can show: a
// clock that goes back, and many threads claiming at once.

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/lease_store_contract.h"
#include "tests/testing/memory_lease_store.h"

namespace backfill {
namespace core_lease_store_test {
namespace {

using testing::kLongLease;
using testing::LeaseStoreContractTest;
using testing::LeaseStoreFactory;
using testing::LeaseStoreUnderTest;
using testing::MakeNode;
using testing::MemoryLeaseStore;

constexpr absl::Time kStart = absl::FromUnixSeconds(1750000000);

testing::LeaseStoreFactory MemoryLeases() {
  return {"Memory", []() -> absl::StatusOr<LeaseStoreUnderTest> {
            auto clock = std::make_shared<ManualClock>(kStart);
            LeaseStoreUnderTest out;
            out.keep = clock;
            out.store = std::make_unique<MemoryLeaseStore>(clock.get());
            out.advance = [clock](absl::Duration d) { clock->Advance(d); };
            out.now = [clock] { return clock->Now(); };
            return out;
          }};
}

INSTANTIATE_TEST_SUITE_P(Memory, LeaseStoreContractTest,
                         ::testing::Values(MemoryLeases()),
                         testing::LeaseStoreParamName);

TEST(MemoryLeaseStoreTest, AHeartbeatNeverGoesBackWithTheClock) {
  ManualClock clock(kStart);
  MemoryLeaseStore store(&clock);
  ASSERT_TRUE(store.Heartbeat(MakeNode("node-a", "10.0.0.1:7000")).ok());
  clock.Advance(absl::Seconds(-30));
  ASSERT_TRUE(store.Heartbeat(MakeNode("node-a", "10.0.0.1:7000")).ok());
  ASSERT_TRUE(store.Renew("node-a", {}, kLongLease).ok());
  auto nodes = store.ListNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].last_heartbeat, kStart);
}

TEST(MemoryLeaseStoreTest, TimesAreKeptToTheMicrosecond) {
  ManualClock clock(kStart + absl::Nanoseconds(1999));
  MemoryLeaseStore store(&clock);
  auto claimed = store.Claim("job-1", "node-a", "run", absl::Nanoseconds(2500));
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  EXPECT_EQ(claimed->lease.claimed_at, kStart + absl::Microseconds(1));
  EXPECT_EQ(claimed->lease.expires_at, kStart + absl::Microseconds(3));
}

TEST(MemoryLeaseStoreTest, ThreadsClaimingTheSameJobsGetOneWinnerEach) {
  constexpr int kThreads = 8;
  constexpr int kJobs = 20;
  ManualClock clock(kStart);
  MemoryLeaseStore store(&clock);
  absl::Mutex mu;
  std::map<std::string, std::vector<std::string>> winners;
  absl::Notification go;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string node = absl::StrCat("node-", t);
      go.WaitForNotification();
      for (int j = 0; j < kJobs; ++j) {
        const std::string job = absl::StrCat("job-", (j + t) % kJobs);
        auto claimed = store.Claim(job, node, "run", kLongLease);
        ASSERT_TRUE(claimed.ok()) << claimed.status();
        if (claimed->claimed) {
          absl::MutexLock lock(&mu);
          winners[job].push_back(node);
        }
      }
    });
  }
  go.Notify();
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(winners.size(), static_cast<size_t>(kJobs));
  for (const auto& [job, won] : winners) {
    EXPECT_EQ(won.size(), 1u) << job;
  }
}

}  // namespace
}  // namespace core_lease_store_test
}  // namespace backfill
