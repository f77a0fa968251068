// Early cutoff: the rules of core/plan/early_cutoff.h on their own, and the job
// runner applying them over the fake engine and the in-memory state store:
// a rerun with unchanged data publishes nothing and runs no dependent, a
// partial change publishes exactly what changed and runs only what reads
// it (an identity dependent, a dependent of two inputs of which one
// changed, a whole-table reader), a dependent whose transform changed is
// not skipped, a restart in the middle keeps the settled tasks, and a
// rollback restores only what the job published.
//
// The fake engine computes nothing from its inputs: rows_for says what a
// partition stages, so a test chooses per (dataset, partition) whether a
// recompute comes out identical.

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/model/pipeline_loader.h"
#include "core/plan/early_cutoff.h"
#include "core/run/backfill_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_early_cutoff_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Call = ::backfill::testing::FakeEngine::Call;

// ---- The rules ------------------------------------------------------------

LineageRecord Record(const std::string& version, const std::string& output,
                     std::vector<InputFingerprint> inputs = {}) {
  LineageRecord r;
  r.dataset = "total";
  r.partition = "2025-01-01";
  r.transform_version = version;
  r.output_fingerprint = output;
  r.inputs = std::move(inputs);
  return r;
}

TEST(EarlyCutoffRulesTest, SameAsPublishedComparesWithTheLatestRecord) {
  const LineageRecord latest = Record("v1", "00ab:3");
  EXPECT_TRUE(SameAsPublished("00ab:3", &latest));
  EXPECT_FALSE(SameAsPublished("00ab:4", &latest));
  // Without lineage the partition changed; an empty fingerprint is no
  // fingerprint.
  EXPECT_FALSE(SameAsPublished("00ab:3", nullptr));
  const LineageRecord blank = Record("v1", "");
  EXPECT_FALSE(SameAsPublished("", &blank));
}

TEST(EarlyCutoffRulesTest, MaySkipNeedsEveryCondition) {
  const InputFingerprint daily{"daily", "2025-01-01", "f1:2", 2};
  const LineageRecord latest = Record("v1", "out:1", {daily});
  EXPECT_TRUE(MaySkip("total", "daily", "v1", &latest, {daily}));
  // Reads only whole tables in the job: nothing partition by partition to
  // compare.
  EXPECT_TRUE(MaySkip("total", "daily", "v1", &latest, {}));
  // The requested dataset always runs.
  EXPECT_FALSE(MaySkip("total", "total", "v1", &latest, {daily}));
  // No lineage: never published, so it runs.
  EXPECT_FALSE(MaySkip("total", "daily", "v1", nullptr, {daily}));
  // Its own logic changed since it was published.
  EXPECT_FALSE(MaySkip("total", "daily", "v2", &latest, {daily}));
  // Published from another version of its input (the input was republished
  // without it): stale, it runs.
  InputFingerprint moved = daily;
  moved.fingerprint = "f9:2";
  EXPECT_FALSE(MaySkip("total", "daily", "v1", &latest, {moved}));
  // An input its lineage did not record: it runs.
  const InputFingerprint other{"other", "2025-01-01", "f1:2", 2};
  EXPECT_FALSE(MaySkip("total", "daily", "v1", &latest, {daily, other}));
  // A rollback to "empty before" has no version.
  const LineageRecord empty = Record("", "0000000000000000:0", {daily});
  EXPECT_FALSE(MaySkip("total", "daily", "", &empty, {daily}));
}

TEST(EarlyCutoffRulesTest, LayoutWithoutCutOffKeepsWhatIsPublished) {
  DatasetSpec a, b;
  a.name = "a";
  b.name = "b";
  JobLayout layout;
  layout.job_id = "bf-1";
  layout.items = {{&a, {"p1", "p2", "p3"}}, {&b, {"p1", "p2"}}};
  layout.pinned = {&b};
  auto task = [](const std::string& d, const std::string& p, TaskState s) {
    PartitionTask t;
    t.dataset = d;
    t.partition = p;
    t.state = s;
    return t;
  };
  const TaskTable tasks({task("a", "p1", TaskState::kStaged),
                         task("a", "p2", TaskState::kUnchanged),
                         task("a", "p3", TaskState::kPublished),
                         task("b", "p1", TaskState::kSkipped),
                         task("b", "p2", TaskState::kUnchanged)});
  const JobLayout kept = WithoutCutOff(layout, tasks);
  EXPECT_EQ(kept.job_id, "bf-1");
  ASSERT_EQ(kept.items.size(), 1u);  // b has nothing left: dropped
  EXPECT_EQ(kept.items[0].dataset, &a);
  EXPECT_THAT(kept.items[0].partitions, ElementsAre("p1", "p3"));
  EXPECT_THAT(kept.pinned, ElementsAre(&b));

  const auto cut = CutOffPartitions(layout, tasks);
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_EQ(cut[0].first, &a);
  EXPECT_THAT(cut[0].second, ElementsAre("p2"));
  EXPECT_EQ(cut[1].first, &b);
  EXPECT_THAT(cut[1].second, ElementsAre("p1", "p2"));

  const CutoffCounts counts = CountCutOff(tasks);
  EXPECT_EQ(counts.unchanged, 2);
  EXPECT_EQ(counts.skipped, 1);
  EXPECT_EQ(NothingChangedMessage({30, 12}),
            "nothing changed: 30 partitions recomputed identical to the "
            "published ones, 12 dependents skipped; nothing published");
  EXPECT_EQ(CutoffNote({1, 0}),
            "; 1 partition recomputed identical to the published ones was not "
            "republished, 0 dependents skipped");
  EXPECT_EQ(CutoffNote({0, 0}), "");
}

// ---- The runner -----------------------------------------------------------

// daily (requested) -> total (identity), region (unpartitioned, reads daily
// whole), mixed (identity of daily AND of total: two in-job inputs).
constexpr char kPipeline[] = R"yaml(
datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: day, grain: day}
  - name: daily
    kind: derived
    partition: {column: day, grain: day}
    upstream: [{dataset: orders, mapping: identity}]
    transform: "SELECT day, 1 AS n FROM raw_orders WHERE day = :partition"
    contract: {columns: {day: TEXT, n: INTEGER}}
  - name: total
    kind: derived
    partition: {column: day, grain: day}
    upstream: [{dataset: daily, mapping: identity}]
    transform: "SELECT day, n FROM daily WHERE day = :partition"
    contract: {columns: {day: TEXT, n: INTEGER}}
  - name: region
    kind: derived
    upstream: [{dataset: daily, mapping: all}]
    transform: "SELECT COUNT(*) AS n FROM daily"
    contract: {columns: {n: INTEGER}}
  - name: mixed
    kind: derived
    partition: {column: day, grain: day}
    upstream:
      - {dataset: daily, mapping: identity}
      - {dataset: total, mapping: identity}
    transform: "SELECT d.day, d.n + t.n AS n FROM daily d JOIN total t USING (day) WHERE d.day = :partition"
    contract: {columns: {day: TEXT, n: INTEGER}}
)yaml";

constexpr const char* kDays[] = {"2025-01-01", "2025-01-02", "2025-01-03",
                                 "2025-01-04"};
constexpr const char* kDatasets[] = {"daily", "total", "region", "mixed"};

class EarlyCutoffRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Load(kPipeline);
    engine_.SetHook([this](const Call& call) { return OnCall(call); });
    Start();
    // The initial load: every dataset published, 1 row a partition.
    const std::string load = SubmitAndWait();
    ASSERT_EQ(Get(load).state, JobState::kSucceeded);
    ASSERT_EQ(Get(load).counts.published, 13);
  }
  void TearDown() override {
    if (manager_) manager_->Shutdown();
    manager_.reset();
  }

  void Load(const std::string& text) {
    auto catalog = LoadPipelineTexts({{"pipeline.yaml", text}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalogs_.push_back(std::make_unique<Catalog>(*std::move(catalog)));
  }
  void Start() {
    ManagerOptions options;
    options.workers = 2;
    options.retry_backoff = absl::Milliseconds(1);
    manager_ = std::make_unique<BackfillManager>(
        catalogs_.back().get(), &store_, &engine_, &clock_, nullptr, options);
    ASSERT_TRUE(manager_->Start().ok());
  }
  // As a restart of the daemon (with the last catalog loaded).
  void Restart() {
    manager_->Shutdown();
    manager_.reset();
    engine_.Restart();
    Start();
  }

  absl::Status OnCall(const Call& call) {
    absl::MutexLock lock(&mu_);
    calls_.push_back(call);
    if (call.method == "ReleasePartitions" && release_fault_ > 0 &&
        --release_fault_ == 0) {
      release_failing_ = true;
    }
    if (call.method == "ReleasePartitions" && release_failing_) {
      return absl::UnavailableError("the warehouse is busy");
    }
    return absl::OkStatus();
  }
  // Staged partitions of a job: "dataset/partition" per StagePartition.
  std::multiset<std::string> Staged(const std::string& job) {
    absl::MutexLock lock(&mu_);
    std::multiset<std::string> out;
    for (const Call& c : calls_) {
      if (c.method == "StagePartition" && c.job_id == job) {
        out.insert(c.dataset + "/" + c.partition);
      }
    }
    return out;
  }
  int Calls(const std::string& method, const std::string& job) {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const Call& c : calls_) n += c.method == method && c.job_id == job;
    return n;
  }

  // Submits daily over kDays (with its dependents), waits until it ends.
  std::string SubmitAndWait() {
    const std::string id = Submit();
    WaitEnded(id);
    return id;
  }
  std::string Submit() {
    BackfillRequest r;
    r.dataset = "daily";
    r.from = "2025-01-01";
    r.to = "2025-01-05";
    r.reason = "test";
    absl::StatusOr<SubmitResult> s = manager_->Submit(r, SubmitOptions{});
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->job.id : "";
  }
  Job Get(const std::string& id) {
    absl::StatusOr<Job> job = store_.GetJob(id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : Job{};
  }
  Job WaitEnded(const std::string& id) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    Job job;
    while (absl::Now() < deadline) {
      job = Get(id);
      if (IsTerminal(job.state)) return job;
      absl::SleepFor(absl::Milliseconds(2));
    }
    ADD_FAILURE() << id << " did not end: " << JobStateName(job.state);
    return job;
  }
  // Every lineage record of every partition of the pipeline's datasets.
  int64_t LineageRows() {
    int64_t n = 0;
    for (const char* d : kDatasets) {
      std::vector<std::string> parts(std::begin(kDays), std::end(kDays));
      if (std::string(d) == "region") parts = {""};
      for (const std::string& p : parts) {
        absl::StatusOr<std::vector<LineageRecord>> l = store_.GetLineage(d, p);
        EXPECT_TRUE(l.ok());
        if (l.ok()) n += static_cast<int64_t>(l->size());
      }
    }
    return n;
  }
  // dataset -> partition -> published rows, of the whole pipeline.
  std::map<std::string, std::map<std::string, int64_t>> Published() {
    std::map<std::string, std::map<std::string, int64_t>> out;
    for (const char* d : kDatasets) {
      for (const char* p : kDays) {
        out[d][std::string(d) == "region" ? "" : p] =
            engine_.PublishedRows(d, std::string(d) == "region" ? "" : p);
      }
    }
    return out;
  }
  // Each partition's states in the job, "dataset/partition" -> state.
  std::map<std::string, TaskState> States(const std::string& id) {
    std::map<std::string, TaskState> out;
    absl::StatusOr<std::vector<PartitionTask>> tasks = store_.ListTasks(id);
    EXPECT_TRUE(tasks.ok());
    if (!tasks.ok()) return out;
    for (const PartitionTask& t : *tasks) {
      out[t.dataset + "/" + t.partition] = t.state;
    }
    return out;
  }
  void SetRows(std::map<std::string, int64_t> rows) {
    engine_.SetRowsFor([rows](const std::string& d, const std::string& p) {
      auto it = rows.find(d + "/" + p);
      return it == rows.end() ? int64_t{1} : it->second;
    });
  }

  std::vector<std::unique_ptr<Catalog>> catalogs_;
  testing::InMemoryStateStore store_;
  testing::FakeEngine engine_;
  SystemClock clock_;
  std::unique_ptr<BackfillManager> manager_;
  absl::Mutex mu_;
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
  int release_fault_ ABSL_GUARDED_BY(mu_) = 0;  // fail from the n-th on
  bool release_failing_ ABSL_GUARDED_BY(mu_) = false;
};

TEST_F(EarlyCutoffRunnerTest, ARerunWithNothingChangedPublishesNothing) {
  const auto before = Published();
  const int64_t lineage = LineageRows();
  const std::string id = SubmitAndWait();
  const Job job = Get(id);
  EXPECT_EQ(job.state, JobState::kSucceeded);
  // The requested dataset is recomputed (4), every dependent skipped:
  // total 4, mixed 4, region 1.
  EXPECT_EQ(job.counts.total, 13);
  EXPECT_EQ(job.counts.unchanged, 4);
  EXPECT_EQ(job.counts.skipped, 9);
  EXPECT_EQ(job.counts.published, 0);
  EXPECT_EQ(job.counts.staged, 0);
  EXPECT_EQ(job.message,
            "nothing changed: 4 partitions recomputed identical to the "
            "published ones, 9 dependents skipped; nothing published");
  EXPECT_EQ(Staged(id), (std::multiset<std::string>{
                            "daily/2025-01-01", "daily/2025-01-02",
                            "daily/2025-01-03", "daily/2025-01-04"}));
  EXPECT_EQ(Calls("Publish", id), 0);
  EXPECT_EQ(Published(), before);
  EXPECT_EQ(LineageRows(), lineage);
  // No rollback copy, and nothing to roll back.
  absl::StatusOr<std::vector<RollbackCopy>> copies =
      engine_.ListRollbackCopies();
  ASSERT_TRUE(copies.ok());
  for (const RollbackCopy& c : *copies) EXPECT_NE(c.job_id, id);
  RollbackRequest rollback;
  rollback.reason = "undo";
  absl::StatusOr<Job> refused = manager_->Rollback(id, rollback);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("published nothing"));
  // The diff lists no change.
  absl::StatusOr<std::optional<JobDiff>> diff =
      store_.GetJobDiff(id, "", false);
  ASSERT_TRUE(diff.ok());
  if (diff->has_value()) {
    EXPECT_THAT((*diff)->datasets, IsEmpty());
  }
}

TEST_F(EarlyCutoffRunnerTest, OnlyWhatChangedIsPublishedAndOnlyItsReadersRun) {
  // daily 01-02 changes; total 01-03 would stage 2 rows if it ran, but its
  // input does not change, so it is skipped (an unchanged input means an
  // unchanged output).
  SetRows({{"daily/2025-01-02", 3}, {"total/2025-01-03", 2}});
  const auto before = Published();
  const int64_t lineage = LineageRows();
  const std::string id = SubmitAndWait();
  const Job job = Get(id);
  ASSERT_EQ(job.state, JobState::kSucceeded) << job.message;
  const std::map<std::string, TaskState> states = States(id);
  EXPECT_EQ(states.at("daily/2025-01-02"), TaskState::kPublished);
  for (const char* day : {"2025-01-01", "2025-01-03", "2025-01-04"}) {
    EXPECT_EQ(states.at(absl::StrCat("daily/", day)), TaskState::kUnchanged);
    EXPECT_EQ(states.at(absl::StrCat("total/", day)), TaskState::kSkipped);
    EXPECT_EQ(states.at(absl::StrCat("mixed/", day)), TaskState::kSkipped);
  }
  // total 01-02 read a changed input: it ran, and came out identical.
  EXPECT_EQ(states.at("total/2025-01-02"), TaskState::kUnchanged);
  // mixed 01-02 reads daily (changed) and total (unchanged): it runs.
  EXPECT_EQ(states.at("mixed/2025-01-02"), TaskState::kUnchanged);
  // region reads all of daily, one partition of which changed: it runs.
  EXPECT_EQ(states.at("region/"), TaskState::kUnchanged);
  EXPECT_EQ(job.counts.published, 1);
  EXPECT_EQ(job.counts.unchanged, 6);
  EXPECT_EQ(job.counts.skipped, 6);
  EXPECT_THAT(job.message,
              HasSubstr("6 partitions recomputed identical to the published "
                        "ones were not republished, 6 dependents skipped"));
  EXPECT_EQ(Staged(id),
            (std::multiset<std::string>{"daily/2025-01-01", "daily/2025-01-02",
                                        "daily/2025-01-03", "daily/2025-01-04",
                                        "total/2025-01-02", "mixed/2025-01-02",
                                        "region/"}));
  // Exactly one partition replaced, one lineage record more.
  auto expected = before;
  expected["daily"]["2025-01-02"] = 3;
  EXPECT_EQ(Published(), expected);
  EXPECT_EQ(LineageRows(), lineage + 1);
  // The diff lists only the published partition.
  absl::StatusOr<std::optional<JobDiff>> diff =
      store_.GetJobDiff(id, "", false);
  ASSERT_TRUE(diff.ok() && diff->has_value());
  ASSERT_EQ((*diff)->datasets.size(), 1u);
  EXPECT_EQ((*diff)->datasets[0].dataset, "daily");
  ASSERT_EQ((*diff)->datasets[0].partitions.size(), 1u);
  EXPECT_EQ((*diff)->datasets[0].partitions[0].partition, "2025-01-02");

  // The rollback restores that partition only (its rollback copy is the
  // only one), and records lineage for it alone.
  RollbackRequest rollback;
  rollback.reason = "undo";
  rollback.requested_by = "erin";
  absl::StatusOr<Job> rolled = manager_->Rollback(id, rollback);
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  ASSERT_TRUE(rolled->rollback.has_value());
  EXPECT_EQ(rolled->rollback->partitions, 1);
  EXPECT_EQ(Published(), before);
  EXPECT_EQ(LineageRows(), lineage + 2);
}

TEST_F(EarlyCutoffRunnerTest, ConsumersOfWhatWasNotRepublishedAreNamed) {
  // total declares a cache; the job republishes daily 01-02 only, total
  // comes out identical: the cache is not probed, and the job says so
  // rather than that no consumer is declared.
  std::string with_cache = kPipeline;
  const std::string total_contract =
      "transform: \"SELECT day, n FROM daily WHERE day = :partition\"\n"
      "    contract: {columns: {day: TEXT, n: INTEGER}}\n";
  ASSERT_NE(with_cache.find(total_contract), std::string::npos);
  with_cache.insert(with_cache.find(total_contract) + total_contract.size(),
                    "    consumers:\n"
                    "      - name: total_cache\n"
                    "        kind: command\n"
                    "        invalidate: {command: [/bin/true]}\n"
                    "        probe: {command: [/bin/echo, \"{}\"], field: n}\n"
                    "        expect: \"SELECT n FROM total WHERE day = "
                    ":partition\"\n");
  QueryShape shape;
  shape.columns = {"n"};
  shape.read_only = true;
  shape.parameters = {":partition"};
  engine_.SetQueryShape("SELECT n FROM total WHERE day = :partition", shape);
  Load(with_cache);
  Restart();
  SetRows({{"daily/2025-01-02", 3}});
  const std::string id = SubmitAndWait();
  const Job job = Get(id);
  ASSERT_EQ(job.state, JobState::kSucceeded) << job.message;
  EXPECT_EQ(States(id).at("total/2025-01-02"), TaskState::kUnchanged);
  EXPECT_EQ(job.message,
            "published; no consumer was probed; 6 partitions recomputed "
            "identical to the published ones were not republished, 6 "
            "dependents skipped; not probed, as nothing they read was "
            "republished: consumer total_cache of total");
}

TEST_F(EarlyCutoffRunnerTest, ADependentWhoseTransformChangedIsNotSkipped) {
  std::string changed = kPipeline;
  const std::string old_transform =
      "transform: \"SELECT day, n FROM daily WHERE day = :partition\"";
  ASSERT_NE(changed.find(old_transform), std::string::npos);
  changed.replace(changed.find(old_transform), old_transform.size(),
                  "transform: \"SELECT day, n * 1 AS n FROM daily WHERE day = "
                  ":partition\"");
  Load(changed);
  Restart();
  const std::string id = SubmitAndWait();
  const Job job = Get(id);
  ASSERT_EQ(job.state, JobState::kSucceeded) << job.message;
  const std::map<std::string, TaskState> states = States(id);
  for (const char* day : kDays) {
    EXPECT_EQ(states.at(absl::StrCat("daily/", day)), TaskState::kUnchanged);
    // The fake's fingerprint covers the version: a new version is new rows.
    EXPECT_EQ(states.at(absl::StrCat("total/", day)), TaskState::kPublished);
    // One of its inputs changed: it runs (and comes out identical).
    EXPECT_EQ(states.at(absl::StrCat("mixed/", day)), TaskState::kUnchanged);
  }
  // region reads daily only, which did not change.
  EXPECT_EQ(states.at("region/"), TaskState::kSkipped);
  EXPECT_EQ(job.counts.published, 4);
  EXPECT_EQ(job.counts.unchanged, 8);
  EXPECT_EQ(job.counts.skipped, 1);
}

TEST_F(EarlyCutoffRunnerTest, ARestartInTheMiddleKeepsTheSettledTasks) {
  SetRows({{"daily/2025-01-02", 3}});
  const auto before = Published();
  const int64_t lineage = LineageRows();
  {
    // The third release (of three unchanged days of daily) keeps failing
    // as a busy warehouse would: the job waits there.
    absl::MutexLock lock(&mu_);
    release_fault_ = 3;
  }
  const std::string id = Submit();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    {
      absl::MutexLock lock(&mu_);
      if (release_failing_) break;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  absl::SleepFor(absl::Milliseconds(20));  // let it retry a few times
  EXPECT_GE(Get(id).counts.unchanged, 2);
  EXPECT_EQ(Get(id).counts.published, 0);
  {
    absl::MutexLock lock(&mu_);
    release_failing_ = false;
  }
  Restart();
  const Job job = WaitEnded(id);
  ASSERT_EQ(job.state, JobState::kSucceeded) << job.message;
  EXPECT_EQ(job.counts.published, 1);
  EXPECT_EQ(job.counts.unchanged, 6);
  EXPECT_EQ(job.counts.skipped, 6);
  auto expected = before;
  expected["daily"]["2025-01-02"] = 3;
  EXPECT_EQ(Published(), expected);
  EXPECT_EQ(LineageRows(), lineage + 1);
  // No partition recorded unchanged before the restart was recomputed
  // after it; no dependent of an unchanged day ever ran.
  const std::multiset<std::string> staged = Staged(id);
  for (const char* day : {"2025-01-01", "2025-01-03", "2025-01-04"}) {
    EXPECT_EQ(staged.count(absl::StrCat("total/", day)), 0u) << day;
    EXPECT_EQ(staged.count(absl::StrCat("mixed/", day)), 0u) << day;
    EXPECT_LE(staged.count(absl::StrCat("daily/", day)), 2u) << day;
  }
}

}  // namespace
}  // namespace core_early_cutoff_test
}  // namespace backfill
