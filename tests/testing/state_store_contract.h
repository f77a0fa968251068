// The StateStore contract suite: what every StateStore
// (core/ports/state_store.h) must do, observed only through the interface. Its
// cases are the TEST_Ps of StateStoreContractTest in
// tests/storage_state_store_contract_*_test.cc (jobs, moves, tasks, lineage,
// governance, versions); each runs once per store that instantiates the suite
// with a StateStoreFactory, so that a store is proven by one line:
//
//   INSTANTIATE_TEST_SUITE_P(Sqlite, StateStoreContractTest,
//                            ::testing::Values(SqliteStore()),
//                            StateStoreParamName);
//
// (tests/storage_state_store_contract_test.cc instantiates it for
// SqliteStateStore and for the in-memory fake, InMemoryStateStore, which
// the core's tests use.) StateStoreAgreementTest runs a random history on
// a store and on an InMemoryStateStore and compares every answer.
//
// Tests of what one store has of its own (the SQLite file's migrations,
// checksums, integrity checks, caches) are not part of the suite.
//
// The fixture makes a fresh, empty store per test (SetUp), in a temporary
// directory of its own, and destroys both after (TearDown). The helpers
// are plain functions; not thread-safe beyond what the store allows.

#ifndef BACKFILL_TESTS_TESTING_STATE_STORE_CONTRACT_H_
#define BACKFILL_TESTS_TESTING_STATE_STORE_CONTRACT_H_

#include <stdlib.h>

#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/job_state_machine.h"
#include "core/ports/state_store.h"
#include "gtest/gtest.h"

namespace backfill::testing {

// How to make one kind of store for the suite.
struct StateStoreFactory {
  // The test parameter's name ("Sqlite", "InMemory").
  std::string name;
  // A new, empty store, keeping its files (if it has any) in `dir`, an
  // empty directory the test removes once the store is destroyed.
  std::function<absl::StatusOr<std::unique_ptr<StateStore>>(
      const std::string& dir)>
      open;
};

// GoogleTest prints a factory by its name.
inline void PrintTo(const StateStoreFactory& factory, std::ostream* os) {
  *os << factory.name;
}

inline std::string StateStoreParamName(
    const ::testing::TestParamInfo<StateStoreFactory>& info) {
  return info.param.name;
}

// A new empty directory under the test's temporary directory ("" when it
// cannot be made).
inline std::string MakeStateStoreDir() {
  std::string tmpl = ::testing::TempDir() + "/state_store_contract_XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl;
}

// A fixed time `seconds` after a fixed point.
inline absl::Time T(int seconds) {
  return absl::FromUnixSeconds(1700000000 + seconds);
}

// A job of daily_revenue (two partitions) and its dependent
// monthly_revenue (one), with every request field set, lists holding
// the separators of the SQLite store's encoding and SQL quotes.
inline Job MakeJob(const std::string& key = "") {
  Job job;
  job.request.dataset = "daily_revenue";
  job.request.from = "2025-01-01";
  job.request.to = "2025-01-03";
  job.request.partitions = {"a:b", "", "x'y\"z;--", "12:"};
  job.request.reason = "fix refunds";
  job.request.ticket = "DATA-1";
  job.request.requested_by = "alice";
  job.request.exclude_downstream = true;
  job.request.priority = 7;
  job.request.max_parallel = 2;
  job.request.affected_by = "orders: note = 'a:b' -- \"x\"";
  job.idempotency_key = key;
  job.request_fingerprint = "fp-1";
  job.message = "submitted";
  DatasetPlan a;
  a.dataset = "daily_revenue";
  a.partitions = {"2025-01-01", "2025-01-02"};
  a.reason = "requested";
  a.cost = {20, 100};
  a.transform_version = "3f2a9c0d11aa7b42";
  DatasetPlan b;
  b.dataset = "monthly_revenue";
  b.partitions = {"2025-01"};
  b.reason = "downstream of daily_revenue";
  b.cost = {2, 10};
  job.plan.datasets = {a, b};
  job.plan.cost = {22, 110};
  return job;
}

// Moves a job to `target` along the shortest path of legal transitions.
inline void Reach(StateStore* store, const std::string& id, JobState target,
                  absl::Time at) {
  auto job = store->GetJob(id);
  ASSERT_TRUE(job.ok()) << job.status();
  std::map<JobState, JobState> parent;
  std::deque<JobState> queue = {job->state};
  parent[job->state] = job->state;
  while (!queue.empty() && !parent.count(target)) {
    const JobState s = queue.front();
    queue.pop_front();
    for (JobState next : NextStates(s)) {
      if (parent.emplace(next, s).second) queue.push_back(next);
    }
  }
  ASSERT_TRUE(parent.count(target)) << "no path to " << JobStateName(target);
  std::vector<JobState> path;
  for (JobState s = target; s != job->state; s = parent[s]) {
    path.insert(path.begin(), s);
  }
  for (JobState s : path) {
    absl::Status moved = store->TransitionJob(id, std::nullopt, s, "moved", at);
    ASSERT_TRUE(moved.ok()) << moved;
  }
}

// A lineage record of (dataset, partition) read from one input.
inline LineageRecord MakeLineage(const std::string& dataset,
                                 const std::string& partition, absl::Time at) {
  LineageRecord rec;
  rec.dataset = dataset;
  rec.partition = partition;
  rec.transform_version = "v1";
  rec.inputs = {{"orders", partition, "fp", 3}};
  rec.output_fingerprint = "out";
  rec.row_count = 2;
  rec.reason = "fix refunds";
  rec.ticket = "DATA-1";
  rec.requested_by = "alice";
  rec.published_at = at;
  return rec;
}

// What a confirmation found for one consumer.
inline ConsumerFinding Confirmation(const std::string& dataset,
                                    const std::string& consumer, bool healthy,
                                    absl::Time at) {
  ConsumerFinding c;
  c.dataset = dataset;
  c.consumer = consumer;
  c.healthy = healthy;
  c.message = healthy ? "serves the new numbers" : "still serves 1 for x";
  c.latency = absl::Microseconds(1500123);
  c.at = at;
  return c;
}

class StateStoreContractTest
    : public ::testing::TestWithParam<StateStoreFactory> {
 protected:
  void SetUp() override {
    dir_ = MakeStateStoreDir();
    ASSERT_FALSE(dir_.empty());
    auto store = GetParam().open(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  void Reach(const std::string& id, JobState target, absl::Time at) {
    testing::Reach(store_.get(), id, target, at);
  }

  std::string dir_;
  std::unique_ptr<StateStore> store_;
};

// The same fixture, for the random history compared with an
// InMemoryStateStore (storage_state_store_agreement_test.cc); instantiated
// for the durable stores only.
class StateStoreAgreementTest : public StateStoreContractTest {};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_STATE_STORE_CONTRACT_H_
