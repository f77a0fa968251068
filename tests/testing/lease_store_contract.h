// The LeaseStore contract suite: what every LeaseStore
// (core/ports/lease_store.h) must do, observed only through the interface:
// claims and their fencing tokens, takeovers of expired leases, renewals
// that tell a replica what it lost, releases, the replicas' records, and
// input refused. Its cases are the TEST_Ps of LeaseStoreContractTest
// below; each runs once per store that instantiates the suite with a
// LeaseStoreFactory:
//
//   INSTANTIATE_TEST_SUITE_P(Memory, LeaseStoreContractTest,
//                            ::testing::Values(MemoryLeases()),
//                            LeaseStoreParamName);
//
// tests/core_lease_store_test.cc instantiates it for the in-memory fake
// (MemoryLeaseStore, on a ManualClock), tests/storage_postgres_lease_store_
// test.cc for PgLeaseStore. The cases are defined here, in the header: a
// test binary includes it from one file only (each of those two is in a
// binary of its own).
//
// Time. A store's clock is its own (PostgreSQL's for PgLeaseStore), so the
// suite lets time pass through the factory's `advance`: a ManualClock moves
// at once, a real clock is waited for. Leases a case lets expire last
// kShortLease and the case advances kPastShortLease; leases that must stay
// live last kLongLease, far longer than any case runs, so that a slow
// machine cannot expire them early.
//
// The fixture makes a fresh, empty store per test (SetUp) and destroys it
// after (TearDown). Not thread-safe beyond what the store allows.

#ifndef BACKFILL_TESTS_TESTING_LEASE_STORE_CONTRACT_H_
#define BACKFILL_TESTS_TESTING_LEASE_STORE_CONTRACT_H_

#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/ports/lease_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill::testing {

// A lease that must stay live for the whole case.
inline constexpr absl::Duration kLongLease = absl::Seconds(60);
// A lease a case lets expire, and how long the case then lets pass.
inline constexpr absl::Duration kShortLease = absl::Milliseconds(300);
inline constexpr absl::Duration kPastShortLease = absl::Milliseconds(400);

// A store for one case, and its clock.
struct LeaseStoreUnderTest {
  // What the store needs to live (a clock, a database), destroyed after
  // it; may be null.
  std::shared_ptr<void> keep;
  std::unique_ptr<LeaseStore> store;
  // Lets `d` of the store's clock pass (a ManualClock advances; a real
  // clock is waited for).
  std::function<void(absl::Duration)> advance;
  // The store's clock, as the test reads it.
  std::function<absl::Time()> now;
};

// How to make one kind of store for the suite.
struct LeaseStoreFactory {
  // The test parameter's name ("Memory", "Postgres").
  std::string name;
  // A new, empty store.
  std::function<absl::StatusOr<LeaseStoreUnderTest>()> open;
};

// GoogleTest prints a factory by its name.
inline void PrintTo(const LeaseStoreFactory& factory, std::ostream* os) {
  *os << factory.name;
}

inline std::string LeaseStoreParamName(
    const ::testing::TestParamInfo<LeaseStoreFactory>& info) {
  return info.param.name;
}

// A replica's record, as it records itself.
inline NodeRecord MakeNode(const std::string& name, const std::string& address,
                           bool draining = false) {
  NodeRecord node;
  node.name = name;
  node.address = address;
  node.version = "backfilld 1.4.0";
  node.started_at = absl::FromUnixMicros(1700000000123456);
  node.draining = draining;
  return node;
}

// `job_id` held by `node` with `token`, as a replica remembers its lease.
inline JobLease Held(const std::string& job_id, const std::string& node,
                     int64_t token) {
  JobLease lease;
  lease.job_id = job_id;
  lease.node = node;
  lease.token = token;
  return lease;
}

class LeaseStoreContractTest
    : public ::testing::TestWithParam<LeaseStoreFactory> {
 protected:
  void SetUp() override {
    auto opened = GetParam().open();
    ASSERT_TRUE(opened.ok()) << opened.status();
    under_test_ = *std::move(opened);
    store_ = under_test_.store.get();
    ASSERT_NE(store_, nullptr);
  }
  void TearDown() override {
    store_ = nullptr;
    under_test_.store.reset();
    under_test_ = LeaseStoreUnderTest();
  }

  void Advance(absl::Duration d) { under_test_.advance(d); }
  // The store's clock to the microsecond (rounded down, as stored).
  absl::Time Now() {
    return absl::FromUnixMicros(absl::ToUnixMicros(under_test_.now()));
  }

  // A claim that must succeed (the call, not necessarily the claim).
  ClaimResult MustClaim(const std::string& job_id, const std::string& node,
                        const std::string& step, absl::Duration ttl) {
    auto claimed = store_->Claim(job_id, node, step, ttl);
    EXPECT_TRUE(claimed.ok()) << claimed.status();
    return claimed.ok() ? *claimed : ClaimResult();
  }

  // Every lease held, by job id.
  std::map<std::string, JobLease> Leases() {
    auto leases = store_->ListLeases();
    EXPECT_TRUE(leases.ok()) << leases.status();
    std::map<std::string, JobLease> out;
    if (!leases.ok()) return out;
    for (const JobLease& lease : *leases) {
      EXPECT_TRUE(out.emplace(lease.job_id, lease).second)
          << "job " << lease.job_id << " listed twice";
    }
    return out;
  }

  std::vector<NodeRecord> Nodes() {
    auto nodes = store_->ListNodes();
    EXPECT_TRUE(nodes.ok()) << nodes.status();
    return nodes.ok() ? *nodes : std::vector<NodeRecord>();
  }

  LeaseStoreUnderTest under_test_;
  LeaseStore* store_ = nullptr;
};

// ---- claims -----------------------------------------------------------------

TEST_P(LeaseStoreContractTest, AFirstClaimGetsTokenOneAndHoldsTheJob) {
  const absl::Time before = Now();
  ClaimResult a = MustClaim("job-1", "node-a", "run", kLongLease);
  const absl::Time after = Now();
  EXPECT_TRUE(a.claimed);
  EXPECT_EQ(a.taken_from, "");
  EXPECT_EQ(a.lease.job_id, "job-1");
  EXPECT_EQ(a.lease.node, "node-a");
  EXPECT_EQ(a.lease.token, 1);
  EXPECT_EQ(a.lease.step, "run");
  EXPECT_TRUE(a.lease.live);
  // The store's clock: claimed during the call, for the ttl.
  EXPECT_GE(a.lease.claimed_at, before);
  EXPECT_LE(a.lease.claimed_at, after);
  EXPECT_EQ(a.lease.expires_at - a.lease.claimed_at, kLongLease);

  // Another replica is refused and told who holds it.
  ClaimResult b = MustClaim("job-1", "node-b", "validate", kLongLease);
  EXPECT_FALSE(b.claimed);
  EXPECT_EQ(b.taken_from, "");
  EXPECT_EQ(b.lease.job_id, "job-1");
  EXPECT_EQ(b.lease.node, "node-a");
  EXPECT_EQ(b.lease.token, 1);
  EXPECT_EQ(b.lease.step, "run");
  EXPECT_EQ(b.lease.claimed_at, a.lease.claimed_at);
  EXPECT_EQ(b.lease.expires_at, a.lease.expires_at);
  EXPECT_TRUE(b.lease.live);

  // Tokens are per job.
  ClaimResult other = MustClaim("job-2", "node-b", "run", kLongLease);
  EXPECT_TRUE(other.claimed);
  EXPECT_EQ(other.lease.token, 1);

  std::map<std::string, JobLease> leases = Leases();
  ASSERT_EQ(leases.size(), 2u);
  EXPECT_EQ(leases["job-1"].node, "node-a");
  EXPECT_EQ(leases["job-1"].token, 1);
  EXPECT_EQ(leases["job-1"].step, "run");
  EXPECT_EQ(leases["job-1"].claimed_at, a.lease.claimed_at);
  EXPECT_EQ(leases["job-1"].expires_at, a.lease.expires_at);
  EXPECT_TRUE(leases["job-1"].live);
  EXPECT_EQ(leases["job-2"].node, "node-b");
}

TEST_P(LeaseStoreContractTest, TheHolderClaimingAgainExtendsItWithItsToken) {
  ClaimResult first = MustClaim("job-1", "node-a", "run", kLongLease);
  ASSERT_TRUE(first.claimed);
  Advance(absl::Milliseconds(20));
  ClaimResult again = MustClaim("job-1", "node-a", "publish", kLongLease);
  EXPECT_TRUE(again.claimed);
  EXPECT_EQ(again.taken_from, "");
  EXPECT_EQ(again.lease.token, 1);
  EXPECT_EQ(again.lease.step, "publish");
  // Still the claim of the same holder; the expiry moves on.
  EXPECT_EQ(again.lease.claimed_at, first.lease.claimed_at);
  EXPECT_GE(again.lease.expires_at - first.lease.expires_at,
            absl::Milliseconds(20));
  std::map<std::string, JobLease> leases = Leases();
  ASSERT_EQ(leases.count("job-1"), 1u);
  EXPECT_EQ(leases["job-1"].step, "publish");
  EXPECT_EQ(leases["job-1"].token, 1);
  EXPECT_EQ(leases["job-1"].expires_at, again.lease.expires_at);
}

TEST_P(LeaseStoreContractTest, AnExpiredLeaseIsTakenOverWithTheNextToken) {
  ClaimResult a = MustClaim("job-1", "node-a", "run", kShortLease);
  ASSERT_TRUE(a.claimed);
  ClaimResult kept = MustClaim("job-2", "node-a", "run", kLongLease);
  ASSERT_TRUE(kept.claimed);
  Advance(kPastShortLease);

  // Held still, but expired.
  std::map<std::string, JobLease> leases = Leases();
  ASSERT_EQ(leases.count("job-1"), 1u);
  EXPECT_EQ(leases["job-1"].node, "node-a");
  EXPECT_FALSE(leases["job-1"].live);
  EXPECT_TRUE(leases["job-2"].live);

  ClaimResult b = MustClaim("job-1", "node-b", "validate", kLongLease);
  EXPECT_TRUE(b.claimed);
  EXPECT_EQ(b.taken_from, "node-a");
  EXPECT_EQ(b.lease.node, "node-b");
  EXPECT_EQ(b.lease.token, 2);
  EXPECT_EQ(b.lease.step, "validate");
  EXPECT_GE(b.lease.claimed_at - a.lease.claimed_at, kPastShortLease);

  // The old holder learns it lost job-1 and keeps job-2, renewed.
  auto lost = store_->Renew(
      "node-a", {Held("job-1", "node-a", 1), Held("job-2", "node-a", 1)},
      kLongLease);
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_THAT(*lost, ::testing::ElementsAre("job-1"));
  leases = Leases();
  EXPECT_GE(leases["job-2"].expires_at - kept.lease.expires_at,
            kPastShortLease);
  EXPECT_EQ(leases["job-2"].token, 1);

  // Its release of what it lost changes nothing.
  ASSERT_TRUE(store_->Release(Held("job-1", "node-a", 1)).ok());
  leases = Leases();
  ASSERT_EQ(leases.count("job-1"), 1u);
  EXPECT_EQ(leases["job-1"].node, "node-b");
  EXPECT_EQ(leases["job-1"].token, 2);
  EXPECT_TRUE(leases["job-1"].live);
  // Nor may it claim it back while the new holder's lease lives.
  ClaimResult back = MustClaim("job-1", "node-a", "run", kLongLease);
  EXPECT_FALSE(back.claimed);
  EXPECT_EQ(back.lease.node, "node-b");
  EXPECT_EQ(back.lease.token, 2);
}

TEST_P(LeaseStoreContractTest, AHolderClaimingItsExpiredLeaseGetsANewToken) {
  ASSERT_TRUE(MustClaim("job-1", "node-a", "run", kShortLease).claimed);
  ASSERT_TRUE(MustClaim("job-2", "node-a", "run", kShortLease).claimed);
  Advance(kPastShortLease);
  // A claim after expiry changes hands, even to the same holder: what it
  // wrote under the old token is fenced off.
  ClaimResult again = MustClaim("job-1", "node-a", "run", kLongLease);
  EXPECT_TRUE(again.claimed);
  EXPECT_EQ(again.taken_from, "");
  EXPECT_EQ(again.lease.token, 2);
  // A renewal of an expired lease nobody took keeps it, with its token;
  // one under the old token of a lease claimed again is lost.
  auto lost = store_->Renew(
      "node-a", {Held("job-2", "node-a", 1), Held("job-1", "node-a", 1)},
      kLongLease);
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_THAT(*lost, ::testing::ElementsAre("job-1"));
  std::map<std::string, JobLease> leases = Leases();
  EXPECT_EQ(leases["job-2"].token, 1);
  EXPECT_TRUE(leases["job-2"].live);
  ClaimResult b = MustClaim("job-2", "node-b", "run", kLongLease);
  EXPECT_FALSE(b.claimed);
}

TEST_P(LeaseStoreContractTest, AReleasedLeaseIsClaimedWithALargerToken) {
  ClaimResult a = MustClaim("job-1", "node-a", "run", kLongLease);
  ASSERT_TRUE(a.claimed);
  ASSERT_TRUE(store_->Release(a.lease).ok());
  EXPECT_THAT(Leases(), ::testing::IsEmpty());

  ClaimResult b = MustClaim("job-1", "node-b", "run", kLongLease);
  EXPECT_TRUE(b.claimed);
  EXPECT_EQ(b.taken_from, "");  // released, not taken over
  EXPECT_EQ(b.lease.token, 2);
  ASSERT_TRUE(store_->Release(b.lease).ok());

  ClaimResult a2 = MustClaim("job-1", "node-a", "validate", kLongLease);
  EXPECT_TRUE(a2.claimed);
  EXPECT_EQ(a2.taken_from, "");
  EXPECT_EQ(a2.lease.token, 3);

  // A release with another token, or by another node, does nothing.
  ASSERT_TRUE(store_->Release(Held("job-1", "node-a", 2)).ok());
  ASSERT_TRUE(store_->Release(Held("job-1", "node-b", 3)).ok());
  ASSERT_TRUE(store_->Release(Held("job-9", "node-a", 1)).ok());
  std::map<std::string, JobLease> leases = Leases();
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases["job-1"].node, "node-a");
  EXPECT_EQ(leases["job-1"].token, 3);
  // The released holder's renewal reports the lease lost.
  auto lost = store_->Renew("node-b", {b.lease}, kLongLease);
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_THAT(*lost, ::testing::ElementsAre("job-1"));
}

// A random history of claims, renewals, releases and time passing, by three
// replicas over four jobs, checked at every step against a model of what
// the store must hold. Short leases are claimed too; until time passes
// whether one expired is left open (a real clock runs on), so the history
// claims no job whose lease is in that state.
TEST_P(LeaseStoreContractTest, ARandomHistoryKeepsOneHolderAndGrowingTokens) {
  enum class Life { kLive, kUnsure, kExpired };
  struct ModelLease {
    std::string node;  // "" when released
    int64_t token = 0;
    Life life = Life::kLive;
  };
  std::mt19937 gen(20250611);
  auto pick = [&](int n) {
    return std::uniform_int_distribution<int>(0, n - 1)(gen);
  };
  const std::vector<std::string> nodes = {"node-a", "node-b", "node-c"};
  const std::vector<std::string> jobs = {"job-1", "job-2", "job-3", "job-4"};
  std::map<std::string, ModelLease> model;
  // What each replica believes it holds: job -> its lease.
  std::map<std::string, std::map<std::string, JobLease>> believed;
  // Every token handed out, per job.
  std::map<std::string, std::set<int64_t>> tokens;
  std::map<std::string, int> seen;  // how often each outcome happened

  int step = 0;
  for (int tries = 0; step < 200 && tries < 2000; ++tries) {
    const int op = pick(100);
    const std::string node = nodes[pick(3)];
    const bool short_ttl = pick(2) == 0;
    const absl::Duration ttl = short_ttl ? kShortLease : kLongLease;
    const Life life = short_ttl ? Life::kUnsure : Life::kLive;
    SCOPED_TRACE(::testing::Message()
                 << "step " << step << ", op " << op << ", node " << node);
    if (op < 58) {
      const std::string job = jobs[pick(4)];
      auto m = model.find(job);
      if (m != model.end() && !m->second.node.empty() &&
          m->second.life == Life::kUnsure) {
        continue;  // its outcome depends on how fast the machine is
      }
      ClaimResult got = MustClaim(job, node, "run", ttl);
      SCOPED_TRACE(::testing::Message() << "claim of " << job);
      int64_t want_token = 1;
      std::string want_from;
      bool want_claimed = true;
      if (m != model.end()) {
        const ModelLease& was = m->second;
        const bool live = was.life == Life::kLive;
        if (was.node.empty()) {
          want_token = was.token + 1;
          ++seen["claim after release"];
        } else if (was.node == node) {
          want_token = live ? was.token : was.token + 1;
          ++seen[live ? "claim again" : "claim own expired"];
        } else if (live) {
          want_claimed = false;
          want_token = was.token;
          ++seen["refused"];
          EXPECT_EQ(got.lease.node, was.node);
        } else {
          want_token = was.token + 1;
          want_from = was.node;
          ++seen["takeover"];
        }
      } else {
        ++seen["first claim"];
      }
      ASSERT_EQ(got.claimed, want_claimed);
      EXPECT_EQ(got.lease.token, want_token);
      EXPECT_EQ(got.taken_from, want_from);
      EXPECT_TRUE(got.lease.live);
      if (got.claimed) {
        const bool changed_hands =
            m == model.end() || m->second.token != got.lease.token;
        if (changed_hands) {
          // Strictly larger than any before, never reused.
          if (!tokens[job].empty()) {
            EXPECT_GT(got.lease.token, *tokens[job].rbegin());
          }
          EXPECT_TRUE(tokens[job].insert(got.lease.token).second);
        }
        model[job] = {node, got.lease.token, life};
        believed[node][job] = got.lease;
      }
    } else if (op < 82) {
      std::vector<JobLease> held;
      for (const auto& [job, lease] : believed[node]) held.push_back(lease);
      if (pick(4) == 0) {
        // And one made up: any job, any token handed out so far or the
        // next.
        const std::string job = jobs[pick(4)];
        auto m = model.find(job);
        const int top =
            m == model.end() ? 0 : static_cast<int>(m->second.token);
        held.push_back(Held(job, node, 1 + pick(top + 1)));
      }
      std::vector<std::string> want_lost;
      for (const JobLease& lease : held) {
        auto m = model.find(lease.job_id);
        if (m != model.end() && m->second.node == node &&
            m->second.token == lease.token) {
          m->second.life = life;  // renewed
          ++seen["renewed"];
          continue;
        }
        want_lost.push_back(lease.job_id);
        ++seen["lost"];
        auto it = believed[node].find(lease.job_id);
        if (it != believed[node].end() && it->second.token == lease.token) {
          believed[node].erase(it);
        }
      }
      auto lost = store_->Renew(node, held, ttl);
      ASSERT_TRUE(lost.ok()) << lost.status();
      EXPECT_EQ(*lost, want_lost);
    } else if (op < 96) {
      // A lease the replica believes it holds, or one made up: any job,
      // any token handed out so far or the next.
      JobLease lease;
      if (believed[node].empty() || pick(4) == 0) {
        const std::string job = jobs[pick(4)];
        auto m = model.find(job);
        const int top =
            m == model.end() ? 0 : static_cast<int>(m->second.token);
        lease = Held(job, node, 1 + pick(top + 1));
      } else {
        auto it = believed[node].begin();
        std::advance(it, pick(static_cast<int>(believed[node].size())));
        lease = it->second;
      }
      ASSERT_TRUE(store_->Release(lease).ok());
      auto m = model.find(lease.job_id);
      if (m != model.end() && m->second.node == node &&
          m->second.token == lease.token) {
        m->second.node.clear();
        ++seen["released"];
      } else {
        ++seen["stale release"];
      }
      auto it = believed[node].find(lease.job_id);
      if (it != believed[node].end() && it->second.token == lease.token) {
        believed[node].erase(it);
      }
    } else {
      Advance(kPastShortLease);
      for (auto& [job, m] : model) {
        if (m.life == Life::kUnsure) m.life = Life::kExpired;
      }
      ++seen["time passed"];
    }
    ++step;

    // The store holds what the model says: one holder per job at most,
    // with the model's token, live as the model knows it.
    std::map<std::string, JobLease> leases = Leases();
    for (const std::string& job : jobs) {
      auto m = model.find(job);
      const bool held = m != model.end() && !m->second.node.empty();
      ASSERT_EQ(leases.count(job), held ? 1u : 0u) << job;
      if (!held) continue;
      EXPECT_EQ(leases[job].node, m->second.node) << job;
      EXPECT_EQ(leases[job].token, m->second.token) << job;
      if (m->second.life != Life::kUnsure) {
        EXPECT_EQ(leases[job].live, m->second.life == Life::kLive) << job;
      }
    }
    EXPECT_LE(leases.size(), jobs.size());
  }
  EXPECT_EQ(step, 200);
  // The history went through every case.
  for (const char* outcome :
       {"first claim", "claim again", "claim own expired",
        "claim after release", "refused", "takeover", "renewed", "lost",
        "released", "stale release", "time passed"}) {
    EXPECT_GT(seen[outcome], 0) << outcome;
  }
}

// ---- replicas ---------------------------------------------------------------

TEST_P(LeaseStoreContractTest, AHeartbeatRecordsTheNodeByTheStoresClock) {
  EXPECT_THAT(Nodes(), ::testing::IsEmpty());
  NodeRecord b = MakeNode("node-b", "10.0.0.2:7000");
  b.last_heartbeat = absl::FromUnixSeconds(5);  // ignored
  const absl::Time before = Now();
  ASSERT_TRUE(store_->Heartbeat(b).ok());
  ASSERT_TRUE(store_->Heartbeat(MakeNode("node-a", "10.0.0.1:7000")).ok());
  const absl::Time after = Now();

  std::vector<NodeRecord> nodes = Nodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].name, "node-a");  // by name
  EXPECT_EQ(nodes[1].name, "node-b");
  EXPECT_EQ(nodes[1].address, "10.0.0.2:7000");
  EXPECT_EQ(nodes[1].version, "backfilld 1.4.0");
  EXPECT_EQ(nodes[1].started_at, absl::FromUnixMicros(1700000000123456));
  EXPECT_FALSE(nodes[1].draining);
  EXPECT_GE(nodes[1].last_heartbeat, before);
  EXPECT_LE(nodes[1].last_heartbeat, after);
  EXPECT_GE(nodes[0].last_heartbeat, nodes[1].last_heartbeat);
  EXPECT_LE(nodes[0].last_heartbeat, after);
  const absl::Time first = nodes[1].last_heartbeat;
  const absl::Time a_heartbeat = nodes[0].last_heartbeat;

  // Again: the record is replaced, the heartbeat moves on.
  Advance(absl::Milliseconds(20));
  NodeRecord changed = MakeNode("node-b", "10.0.0.9:7001", /*draining=*/true);
  changed.version = "backfilld 1.5.0";
  changed.started_at = absl::FromUnixMicros(1700000100000001);
  ASSERT_TRUE(store_->Heartbeat(changed).ok());
  nodes = Nodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[1].address, "10.0.0.9:7001");
  EXPECT_EQ(nodes[1].version, "backfilld 1.5.0");
  EXPECT_EQ(nodes[1].started_at, absl::FromUnixMicros(1700000100000001));
  EXPECT_TRUE(nodes[1].draining);
  EXPECT_GE(nodes[1].last_heartbeat - first, absl::Milliseconds(20));
  const absl::Time second = nodes[1].last_heartbeat;

  // A renewal is a heartbeat too, even with nothing held.
  Advance(absl::Milliseconds(20));
  auto lost = store_->Renew("node-b", {}, kLongLease);
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_THAT(*lost, ::testing::IsEmpty());
  nodes = Nodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_GE(nodes[1].last_heartbeat - second, absl::Milliseconds(20));
  EXPECT_TRUE(nodes[1].draining);                   // nothing else changes
  EXPECT_EQ(nodes[0].last_heartbeat, a_heartbeat);  // the other's stays
}

TEST_P(LeaseStoreContractTest, LeavingRemovesTheNodeAndReleasesItsLeases) {
  ASSERT_TRUE(store_->Heartbeat(MakeNode("node-a", "10.0.0.1:7000")).ok());
  ASSERT_TRUE(store_->Heartbeat(MakeNode("node-b", "10.0.0.2:7000")).ok());
  ASSERT_TRUE(MustClaim("job-1", "node-a", "run", kLongLease).claimed);
  ASSERT_TRUE(MustClaim("job-2", "node-a", "publish", kShortLease).claimed);
  ASSERT_TRUE(MustClaim("job-3", "node-b", "run", kLongLease).claimed);

  ASSERT_TRUE(store_->Leave("node-a").ok());
  std::vector<NodeRecord> nodes = Nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].name, "node-b");
  std::map<std::string, JobLease> leases = Leases();
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases.count("job-3"), 1u);

  // Its leases are free, not taken over, and their tokens stay.
  ClaimResult b = MustClaim("job-1", "node-b", "run", kLongLease);
  EXPECT_TRUE(b.claimed);
  EXPECT_EQ(b.taken_from, "");
  EXPECT_EQ(b.lease.token, 2);
  ClaimResult c = MustClaim("job-2", "node-c", "run", kLongLease);
  EXPECT_TRUE(c.claimed);
  EXPECT_EQ(c.lease.token, 2);
  // Its renewal finds nothing held.
  auto lost = store_->Renew(
      "node-a", {Held("job-1", "node-a", 1), Held("job-2", "node-a", 1)},
      kLongLease);
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_THAT(*lost, ::testing::ElementsAre("job-1", "job-2"));
  // A node nobody knows leaves without error; a renewal does not record
  // a node that left.
  EXPECT_TRUE(store_->Leave("node-z").ok());
  EXPECT_EQ(Nodes().size(), 1u);
}

TEST_P(LeaseStoreContractTest, IdsAndNamesAreKeptAsGiven) {
  // Quotes, backslashes, separators of SQL and of array literals, a word
  // that means NULL there: values, never syntax.
  const std::vector<std::string> ids = {"job \"1\", {a\\b}", "NULL",
                                        "x'); DROP TABLE t; --",
                                        "\xc3\xa9t\xc3\xa9"};
  const std::string node = "node 'a', \"b\"";
  std::vector<JobLease> held;
  for (const std::string& id : ids) {
    ClaimResult claimed = MustClaim(id, node, "run \\ 'x'", kLongLease);
    ASSERT_TRUE(claimed.claimed) << id;
    EXPECT_EQ(claimed.lease.job_id, id);
    EXPECT_EQ(claimed.lease.node, node);
    EXPECT_EQ(claimed.lease.step, "run \\ 'x'");
    held.push_back(claimed.lease);
  }
  held.push_back(Held("NULL", node, 7));  // a token it does not hold
  auto lost = store_->Renew(node, held, kLongLease);
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_THAT(*lost, ::testing::ElementsAre("NULL"));
  std::map<std::string, JobLease> leases = Leases();
  ASSERT_EQ(leases.size(), ids.size());
  for (const std::string& id : ids) {
    ASSERT_EQ(leases.count(id), 1u) << id;
    EXPECT_EQ(leases[id].node, node);
  }
  ASSERT_TRUE(store_->Heartbeat(MakeNode(node, "[::1]:7000")).ok());
  std::vector<NodeRecord> nodes = Nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].name, node);
  ASSERT_TRUE(store_->Leave(node).ok());
  EXPECT_THAT(Leases(), ::testing::IsEmpty());
}

// ---- input refused ----------------------------------------------------------

TEST_P(LeaseStoreContractTest, BadInputIsRefusedAndChangesNothing) {
  ASSERT_TRUE(store_->Heartbeat(MakeNode("node-a", "10.0.0.1:7000")).ok());
  ASSERT_TRUE(MustClaim("job-1", "node-a", "run", kLongLease).claimed);
  const std::map<std::string, JobLease> leases = Leases();
  const std::vector<NodeRecord> nodes = Nodes();
  const std::string nul("job\0x", 5);
  // Time passes: a write that went through would show in the expiry.
  Advance(absl::Milliseconds(20));
  auto invalid = [](const absl::Status& s) {
    return s.code() == absl::StatusCode::kInvalidArgument;
  };

  for (const auto& [job, node] :
       std::vector<std::pair<std::string, std::string>>{
           {"", "node-a"}, {"job-1", ""}, {nul, "node-a"}, {"job-1", nul}}) {
    auto claimed = store_->Claim(job, node, "run", kLongLease);
    EXPECT_TRUE(invalid(claimed.status())) << claimed.status();
  }
  for (absl::Duration ttl : {absl::ZeroDuration(), absl::Seconds(-1),
                             absl::Nanoseconds(10), absl::InfiniteDuration()}) {
    auto claimed = store_->Claim("job-2", "node-a", "run", ttl);
    EXPECT_TRUE(invalid(claimed.status())) << ttl;
    EXPECT_THAT(claimed.status().message(), ::testing::HasSubstr("ttl"));
    auto renewed = store_->Renew("node-a", {Held("job-1", "node-a", 1)}, ttl);
    EXPECT_TRUE(invalid(renewed.status())) << ttl;
  }
  EXPECT_TRUE(invalid(
      store_->Renew("", {Held("job-1", "node-a", 1)}, kLongLease).status()));
  EXPECT_TRUE(invalid(
      store_
          ->Renew("node-a", {Held("job-1", "node-a", 1), Held("", "node-a", 1)},
                  kLongLease)
          .status()));
  EXPECT_TRUE(invalid(store_->Release(Held("", "node-a", 1))));
  EXPECT_TRUE(invalid(store_->Release(Held("job-1", "", 1))));
  EXPECT_TRUE(invalid(store_->Leave("")));
  EXPECT_TRUE(invalid(store_->Heartbeat(MakeNode("", "10.0.0.1:7000"))));
  NodeRecord unstarted = MakeNode("node-b", "10.0.0.2:7000");
  unstarted.started_at = absl::InfinitePast();
  EXPECT_TRUE(invalid(store_->Heartbeat(unstarted)));
  auto empty_id = store_->Claim("", "node-a", "run", kLongLease);
  EXPECT_THAT(empty_id.status().message(),
              ::testing::HasSubstr("job id must not be empty"));

  // Nothing changed: not the lease (not even its expiry), not the nodes.
  const std::map<std::string, JobLease> after = Leases();
  ASSERT_EQ(after.size(), leases.size());
  for (const auto& [job, lease] : leases) {
    ASSERT_EQ(after.count(job), 1u);
    EXPECT_EQ(after.at(job).node, lease.node);
    EXPECT_EQ(after.at(job).token, lease.token);
    EXPECT_EQ(after.at(job).expires_at, lease.expires_at);
  }
  const std::vector<NodeRecord> nodes_after = Nodes();
  ASSERT_EQ(nodes_after.size(), nodes.size());
  EXPECT_EQ(nodes_after[0].name, "node-a");
  EXPECT_EQ(nodes_after[0].last_heartbeat, nodes[0].last_heartbeat);
}

// ---- requests between replicas -------------------------------------------

TEST_P(LeaseStoreContractTest, ARequestIsTakenOnceByItsNodeAndAnsweredOnce) {
  NodeRequest request;
  request.node = "node-b";
  request.job_id = "bf-7";
  request.kind = "cancel";
  request.body = R"({"reason": "it's wrong; -- \"quoted\"", "actor": "erin"})";
  auto first = store_->SendRequest(request);
  ASSERT_TRUE(first.ok()) << first.status();
  request.kind = "pause";
  auto second = store_->SendRequest(request);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_LT(*first, *second);
  request.node = "node-c";
  ASSERT_TRUE(store_->SendRequest(request).ok());

  // Unanswered: no answer yet, for the sender.
  auto none = store_->ReadAnswer(*first, /*withdraw=*/false);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());

  auto taken = store_->TakeRequests("node-b");
  ASSERT_TRUE(taken.ok()) << taken.status();
  ASSERT_EQ(taken->size(), 2u);
  EXPECT_EQ((*taken)[0].id, *first);
  EXPECT_EQ((*taken)[0].kind, "cancel");
  EXPECT_EQ((*taken)[0].job_id, "bf-7");
  EXPECT_EQ((*taken)[0].body,
            R"({"reason": "it's wrong; -- \"quoted\"", "actor": "erin"})");
  EXPECT_EQ((*taken)[1].id, *second);
  EXPECT_EQ((*taken)[1].kind, "pause");
  // Taken once: a second look finds nothing more for node-b.
  auto again = store_->TakeRequests("node-b");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());

  // A taken request is not withdrawn: its answer still comes.
  auto kept = store_->ReadAnswer(*first, /*withdraw=*/true);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(kept->has_value());
  NodeAnswer answer;
  answer.code = absl::StatusCode::kFailedPrecondition;
  answer.message = "job bf-7 is PUBLISHING; it can no longer be cancelled";
  ASSERT_TRUE(store_->AnswerRequest(*first, answer).ok());
  // A second answer does not replace the first.
  ASSERT_TRUE(store_->AnswerRequest(*first, NodeAnswer{}).ok());
  auto read = store_->ReadAnswer(*first, /*withdraw=*/false);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->code, absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*read)->message, answer.message);
  // Read once: then forgotten.
  EXPECT_EQ(store_->ReadAnswer(*first, false).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(LeaseStoreContractTest, ARequestNobodyTookIsWithdrawnAndNeverTaken) {
  NodeRequest request;
  request.node = "node-b";
  request.job_id = "bf-1";
  request.kind = "resume";
  auto id = store_->SendRequest(request);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(store_->ReadAnswer(*id, /*withdraw=*/true).status().code(),
            absl::StatusCode::kNotFound);
  auto taken = store_->TakeRequests("node-b");
  ASSERT_TRUE(taken.ok());
  EXPECT_TRUE(taken->empty());
  // Bad requests are refused and queue nothing.
  for (NodeRequest bad : {NodeRequest{0, "", "bf-1", "cancel", ""},
                          NodeRequest{0, "node-b", "", "cancel", ""},
                          NodeRequest{0, "node-b", "bf-1", "", ""}}) {
    EXPECT_EQ(store_->SendRequest(bad).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  taken = store_->TakeRequests("node-b");
  ASSERT_TRUE(taken.ok());
  EXPECT_TRUE(taken->empty());
}

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_LEASE_STORE_CONTRACT_H_
