// The governance reads over the real SQLite state store: a partition's
// history (ExplainPartition: ordering, rollback versions, approvals, keyed
// jobs, time x key partitions, validation), stale dependents and their
// cached counts, and the append-only audit log (paging, and the triggers
// that refuse UPDATE and DELETE). Jobs are recorded through the store's
// own calls; expectations are read back with plain SQL from state.db.

#include <sqlite3.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/governance/audit_log.h"
#include "core/governance/partition_history.h"
#include "core/model/pipeline_loader.h"
#include "core/plan/stale_dependents.h"
#include "core/plan/stale_partition_counts.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/state/sqlite_state_store.h"

namespace backfill {
namespace storage_partition_history_test {
namespace {

using ::testing::HasSubstr;

constexpr char kPipeline[] = R"yaml(datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: order_date, grain: day}
  - name: daily
    kind: derived
    table: daily
    partition: {column: ds, grain: day}
    entity_key: customer_id
    upstream:
      - {dataset: orders, mapping: identity}
    transform: |
      SELECT order_date AS ds, customer_id, TOTAL(amount) AS amount
      FROM raw_orders
      WHERE order_date >= :partition_start AND order_date < :partition_end
      GROUP BY 1, 2
    contract:
      columns: {ds: TEXT, customer_id: INTEGER, amount: REAL}
      primary_key: [ds, customer_id]
  - name: daily_total
    kind: derived
    table: daily_total
    partition: {column: ds, grain: day}
    upstream:
      - {dataset: daily, mapping: identity}
    transform: |
      SELECT ds, TOTAL(amount) AS amount FROM daily
      WHERE ds >= :partition_start AND ds < :partition_end GROUP BY ds
    contract:
      columns: {ds: TEXT, amount: REAL}
      primary_key: [ds]
  - name: segments
    kind: derived
    table: segments
    partition: {column: ds, grain: day, key_column: segment, keys: [eu, us]}
    upstream:
      - {dataset: orders, mapping: all}
    transform: |
      SELECT order_date AS ds, 'eu' AS segment, TOTAL(amount) AS amount
      FROM raw_orders
      WHERE order_date >= :partition_start AND order_date < :partition_end
      GROUP BY 1
    contract:
      columns: {ds: TEXT, segment: TEXT, amount: REAL}
      primary_key: [ds, segment]
  - name: by_region
    kind: derived
    table: by_region
    partition: {column: region, grain: key, keys: [eu, us west]}
    upstream:
      - {dataset: orders, mapping: all}
    transform: |
      SELECT 'eu' AS region, TOTAL(amount) AS amount FROM raw_orders
    contract:
      columns: {region: TEXT, amount: REAL}
      primary_key: [region]
  - name: grand
    kind: derived
    table: grand
    partition: {column: scope, grain: key, keys: [all]}
    upstream:
      - {dataset: daily, mapping: all}
    transform: |
      SELECT 'all' AS scope, TOTAL(amount) AS amount FROM daily
    contract:
      columns: {scope: TEXT, amount: REAL}
      primary_key: [scope]
)yaml";

// One partition a job publishes.
struct Pub {
  std::string dataset;
  std::string partition;
  std::string fingerprint;
  std::vector<InputFingerprint> inputs;
  int64_t rows = 1;
};

class PartitionHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat(
               "bf_history_test_", getpid(), "_",
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto catalog = LoadPipelineTexts({{"test.yaml", kPipeline}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    auto store = SqliteStateStore::Open(db_path());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string db_path() const { return (dir_ / "state.db").string(); }

  absl::Time At(int minutes) {
    return absl::FromUnixSeconds(1767225600) + absl::Minutes(minutes);
  }

  // Records a job that publishes `pubs` at `at`, through the store's own
  // calls: created, run, validated, approved when `approver` is set,
  // published with its diff (when given), succeeded.
  std::string RunJob(BackfillRequest request, const std::vector<Pub>& pubs,
                     absl::Time at, const std::string& approver = "",
                     const JobDiff* diff = nullptr) {
    Job job;
    job.request = std::move(request);
    for (const Pub& p : pubs) {
      if (job.plan.datasets.empty() ||
          job.plan.datasets.back().dataset != p.dataset) {
        DatasetPlan dp;
        dp.dataset = p.dataset;
        dp.transform_version = "v-" + p.dataset;
        job.plan.datasets.push_back(dp);
      }
      job.plan.datasets.back().partitions.push_back(p.partition);
    }
    auto created = store_->CreateJob(job, at);
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return "";
    const std::string id = created->job.id;
    for (JobState s : {JobState::kRunning, JobState::kValidating}) {
      EXPECT_TRUE(store_->TransitionJob(id, std::nullopt, s, "", at).ok());
    }
    std::optional<Approval> approval;
    if (!approver.empty()) {
      EXPECT_TRUE(store_
                      ->TransitionJob(id, JobState::kValidating,
                                      JobState::kAwaitingApproval, "held", at)
                      .ok());
      Approval a;
      a.approved_by = approver;
      a.reason = "numbers checked";
      a.approved_at = at;
      EXPECT_TRUE(store_
                      ->ApproveJob(id, JobState::kAwaitingApproval,
                                   JobState::kPublishing, a, "approved", at)
                      .ok());
      approval = a;
    } else {
      EXPECT_TRUE(store_
                      ->TransitionJob(id, JobState::kValidating,
                                      JobState::kPublishing, "valid", at)
                      .ok());
    }
    if (diff != nullptr) {
      JobDiff d = *diff;
      d.job_id = id;
      EXPECT_TRUE(store_->ReplaceJobDiff(d).ok());
    }
    std::vector<LineageRecord> lineage;
    for (const Pub& p : pubs) {
      LineageRecord r;
      r.dataset = p.dataset;
      r.partition = p.partition;
      r.job_id = id;
      r.transform_version = "v-" + p.dataset;
      r.inputs = p.inputs;
      r.output_fingerprint = p.fingerprint;
      r.row_count = p.rows;
      r.reason = job.request.reason;
      r.ticket = job.request.ticket;
      r.requested_by = job.request.requested_by;
      r.published_at = at;
      r.approval = approval;
      lineage.push_back(r);
    }
    EXPECT_TRUE(store_
                    ->RecordPublication(id, lineage, JobState::kConfirming,
                                        "published", at)
                    .ok());
    EXPECT_TRUE(store_
                    ->TransitionJob(id, JobState::kConfirming,
                                    JobState::kSucceeded, "confirmed", at)
                    .ok());
    return id;
  }

  BackfillRequest Request(const std::string& dataset, const std::string& reason,
                          const std::string& who) {
    BackfillRequest r;
    r.dataset = dataset;
    r.reason = reason;
    r.ticket = "T-" + reason;
    r.requested_by = who;
    return r;
  }

  // Rolls `id` back, restoring `restored` fingerprints per pub.
  void Rollback(const std::string& id, const std::vector<Pub>& restored,
                absl::Time at) {
    RollbackInfo info;
    info.requested_by = "erin";
    info.reason = "undo";
    info.at = at;
    std::vector<LineageRecord> lineage;
    for (const Pub& p : restored) {
      LineageRecord r;
      r.dataset = p.dataset;
      r.partition = p.partition;
      r.job_id = id;
      r.action = LineageAction::kRollback;
      r.transform_version = "v-" + p.dataset;
      r.inputs = p.inputs;
      r.output_fingerprint = p.fingerprint;
      r.row_count = p.rows;
      r.reason = info.reason;
      r.requested_by = info.requested_by;
      r.published_at = at;
      lineage.push_back(r);
    }
    ASSERT_TRUE(
        store_->RecordRollback(id, info, lineage, "rolled back", "", at).ok());
  }

  // Rows of `sql` on state.db as "a|b|c", read without the store.
  std::vector<std::string> Sql(const std::string& sql,
                               const std::vector<std::string>& params = {}) {
    sqlite3* db = nullptr;
    EXPECT_EQ(
        sqlite3_open_v2(db_path().c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
        SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    for (size_t i = 0; i < params.size(); ++i) {
      sqlite3_bind_text(st, static_cast<int>(i + 1), params[i].c_str(), -1,
                        SQLITE_TRANSIENT);
    }
    std::vector<std::string> out;
    while (st != nullptr && sqlite3_step(st) == SQLITE_ROW) {
      std::vector<std::string> cols;
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        const unsigned char* t = sqlite3_column_text(st, c);
        cols.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
      }
      out.push_back(absl::StrJoin(cols, "|"));
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
  }

  // The history's versions in the shape of ExpectedVersions' rows.
  std::vector<std::string> Got(const PartitionHistory& h) {
    std::vector<std::string> out;
    for (const PartitionVersion& v : h.versions) {
      const LineageRecord& r = v.record;
      out.push_back(absl::StrJoin(
          {r.job_id, std::string(LineageActionName(r.action)),
           std::string(JobStateName(v.job_state)), r.reason, r.ticket,
           r.requested_by,
           r.approval ? r.approval->approved_by : std::string("NULL"),
           r.approval ? r.approval->reason : std::string(""),
           r.transform_version, r.output_fingerprint, absl::StrCat(r.row_count),
           absl::StrJoin(v.keys, ","),
           v.diff ? absl::StrCat(v.diff->added, "/", v.diff->removed, "/",
                                 v.diff->changed)
                  : std::string("NULL")},
          "|"));
    }
    return out;
  }

  std::vector<std::string> ExpectedVersions(const std::string& dataset,
                                            const std::string& partition) {
    return Sql(
        "SELECT l.job_id, l.action, j.state, l.reason, l.ticket, "
        "l.requested_by, CASE WHEN l.approved_from IS NULL THEN 'NULL' ELSE "
        "l.approved_by END, l.approval_reason, l.transform_version, "
        "l.output_fingerprint, l.row_count, CASE WHEN j.dataset = l.dataset "
        "THEN COALESCE((SELECT group_concat(key, ',') FROM (SELECT key FROM "
        "job_keys k WHERE k.job_id = l.job_id ORDER BY ordinal)), '') ELSE '' "
        "END, CASE WHEN l.action = 'publish' THEN COALESCE((SELECT added || "
        "'/' || removed || '/' || changed FROM job_diff_partitions d WHERE "
        "d.job_id = l.job_id AND d.dataset = l.dataset AND d.\"partition\" = "
        "l.\"partition\"), 'NULL') ELSE 'NULL' END FROM lineage l JOIN jobs "
        "j ON j.id = l.job_id WHERE l.dataset = ?1 AND l.\"partition\" = ?2 "
        "ORDER BY l.published_at DESC, l.id DESC",
        {dataset, partition});
  }

  std::filesystem::path dir_;
  Catalog catalog_;
  std::unique_ptr<SqliteStateStore> store_;
};

TEST_F(PartitionHistoryTest, VersionsNewestFirstWithApprovalsKeysDiffs) {
  const std::string first = RunJob(
      Request("daily", "load", "alice"),
      {{"daily", "2025-01-01", "a1", {{"orders", "2025-01-01", "o1", 4}}},
       {"daily", "2025-01-02", "a2", {{"orders", "2025-01-02", "o2", 5}}}},
      At(1));
  JobDiff diff;
  DatasetDiff dd;
  dd.dataset = "daily";
  dd.columns.by_key = true;
  dd.columns.key = {"ds", "customer_id"};
  dd.columns.measures = {"amount"};
  PartitionDiff pd;
  pd.partition = "2025-01-01";
  pd.rows_before = 4;
  pd.rows_after = 5;
  pd.added = 1;
  pd.changed = 2;
  pd.unchanged = 2;
  pd.measures = {{"amount", 100, 130}};
  dd.partitions = {pd};
  diff.datasets = {dd};
  const std::string approved = RunJob(
      Request("daily", "fix", "bob"),
      {{"daily", "2025-01-01", "b1", {{"orders", "2025-01-01", "o1", 4}}}},
      At(2), "dana", &diff);
  BackfillRequest keyed = Request("daily", "keys", "carol");
  keyed.keys = {"7", "9"};
  // Same time as the approved job: the later record is newer.
  const std::string keyed_id = RunJob(
      keyed,
      {{"daily", "2025-01-01", "c1", {{"orders", "2025-01-01", "o1", 4}}}},
      At(2));
  Rollback(keyed_id,
           {{"daily", "2025-01-01", "b1", {{"orders", "2025-01-01", "o1", 4}}}},
           At(3));

  auto history = ExplainPartition(catalog_, *store_, "daily", "2025-01-01");
  ASSERT_TRUE(history.ok()) << history.status();
  const std::vector<std::string> expected =
      ExpectedVersions("daily", "2025-01-01");
  ASSERT_EQ(expected.size(), 4u);
  EXPECT_EQ(Got(*history), expected);
  // What the test ran, in the order it ran it, newest first.
  ASSERT_EQ(history->versions.size(), 4u);
  EXPECT_EQ(history->versions[0].record.job_id, keyed_id);
  EXPECT_EQ(history->versions[0].record.action, LineageAction::kRollback);
  EXPECT_EQ(history->versions[1].record.job_id, keyed_id);
  EXPECT_EQ(history->versions[1].keys, std::vector<std::string>({"7", "9"}));
  EXPECT_EQ(history->versions[1].job_state, JobState::kRolledBack);
  EXPECT_EQ(history->versions[2].record.job_id, approved);
  ASSERT_TRUE(history->versions[2].record.approval.has_value());
  EXPECT_EQ(history->versions[2].record.approval->approved_by, "dana");
  ASSERT_TRUE(history->versions[2].diff.has_value());
  ASSERT_EQ(history->versions[2].diff->measures.size(), 1u);
  EXPECT_EQ(history->versions[2].diff->measures[0].after, 130);
  EXPECT_EQ(history->versions[3].record.job_id, first);
  ASSERT_EQ(history->versions[3].record.inputs.size(), 1u);
  EXPECT_EQ(history->versions[3].record.inputs[0].fingerprint, "o1");
  EXPECT_FALSE(history->stale.has_value());

  // The other partition has the first job's version only.
  auto other = ExplainPartition(catalog_, *store_, "daily", "2025-01-02");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(Got(*other), ExpectedVersions("daily", "2025-01-02"));
  EXPECT_EQ(other->versions.size(), 1u);
  // Never published: no versions.
  auto never = ExplainPartition(catalog_, *store_, "daily", "2025-02-01");
  ASSERT_TRUE(never.ok());
  EXPECT_TRUE(never->versions.empty());
}

TEST_F(PartitionHistoryTest, TimeByKeyPartitionsAndValidation) {
  const std::string id =
      RunJob(Request("segments", "segments", "alice"),
             {{"segments", "2025-03-01|eu", "s1", {{"orders", "", "all", 20}}},
              {"segments", "2025-03-01|us", "s2", {{"orders", "", "all", 20}}}},
             At(1));
  auto eu = ExplainPartition(catalog_, *store_, "segments", "2025-03-01|eu");
  ASSERT_TRUE(eu.ok()) << eu.status();
  EXPECT_EQ(Got(*eu), ExpectedVersions("segments", "2025-03-01|eu"));
  ASSERT_EQ(eu->versions.size(), 1u);
  EXPECT_EQ(eu->versions[0].record.job_id, id);
  EXPECT_EQ(eu->versions[0].record.output_fingerprint, "s1");

  auto undeclared =
      ExplainPartition(catalog_, *store_, "segments", "2025-03-01|xx");
  EXPECT_EQ(undeclared.status().code(), absl::StatusCode::kInvalidArgument);
  auto no_key = ExplainPartition(catalog_, *store_, "segments", "2025-03-01");
  EXPECT_EQ(no_key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_key.status().message(), HasSubstr("segments"));
  auto bad_day = ExplainPartition(catalog_, *store_, "daily", "2025-02-30");
  EXPECT_EQ(bad_day.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_day.status().message(), HasSubstr("YYYY-MM-DD"));
  // A key-grain dataset: only its declared keys, as the planner takes them.
  auto declared = ExplainPartition(catalog_, *store_, "by_region", "us west");
  ASSERT_TRUE(declared.ok()) << declared.status();
  EXPECT_TRUE(declared->versions.empty());
  auto undeclared_key =
      ExplainPartition(catalog_, *store_, "by_region", "nope");
  EXPECT_EQ(undeclared_key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(undeclared_key.status().message(),
              HasSubstr("\"nope\" is not a key of dataset \"by_region\"; "
                        "declared keys: eu, us west"));
  // A source dataset has no versions to explain: it is never published.
  auto source = ExplainPartition(catalog_, *store_, "orders", "2025-01-01");
  EXPECT_EQ(source.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(source.status().message(),
              HasSubstr("orders is a source dataset: backfilld reads it and "
                        "never publishes it"));
  auto unknown = ExplainPartition(catalog_, *store_, "nope", "2025-01-01");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("nope"));
}

TEST_F(PartitionHistoryTest, NoDownstreamPublishLeavesDependentsStale) {
  StalePartitionCounts counts(&catalog_, store_.get());
  RunJob(
      Request("daily", "load", "alice"),
      {{"daily", "2025-01-01", "a1", {{"orders", "2025-01-01", "o1", 4}}},
       {"daily", "2025-01-02", "a2", {{"orders", "2025-01-02", "o2", 4}}},
       {"daily_total", "2025-01-01", "t1", {{"daily", "2025-01-01", "a1", 2}}},
       {"daily_total", "2025-01-02", "t2", {{"daily", "2025-01-02", "a2", 2}}}},
      At(1));
  auto before = counts.Get();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(*before, (std::map<std::string, int64_t>{{"by_region", 0},
                                                     {"daily", 0},
                                                     {"daily_total", 0},
                                                     {"grand", 0},
                                                     {"segments", 0}}));
  EXPECT_EQ(counts.computations(), 1);
  ASSERT_TRUE(counts.Get().ok());
  EXPECT_EQ(counts.computations(), 1);  // nothing changed: cached
  // A state change that writes no lineage and leaves the number of
  // SUCCEEDED jobs as it was is a change of history all the same (e.g. a
  // job leaving SUCCEEDED as another reaches it): counted again.
  Job queued;
  queued.request = Request("daily", "queued", "dave");
  DatasetPlan dp;
  dp.dataset = "daily";
  dp.partitions = {"2025-01-09"};
  queued.plan.datasets = {dp};
  ASSERT_TRUE(store_->CreateJob(queued, At(1)).ok());
  ASSERT_TRUE(counts.Get().ok());
  EXPECT_EQ(counts.computations(), 2);

  BackfillRequest narrow = Request("daily", "narrow", "bob");
  narrow.exclude_downstream = true;
  const std::string id = RunJob(
      narrow,
      {{"daily", "2025-01-02", "b2", {{"orders", "2025-01-02", "o2x", 4}}}},
      At(2));
  auto stale =
      FindStaleDependents(catalog_, *store_, *catalog_.Find("daily_total"), {});
  ASSERT_TRUE(stale.ok()) << stale.status();
  ASSERT_EQ(stale->size(), 1u);
  EXPECT_EQ((*stale)[0].partition, "2025-01-02");
  ASSERT_EQ((*stale)[0].inputs.size(), 1u);
  EXPECT_EQ((*stale)[0].inputs[0].job_id, id);
  EXPECT_TRUE((*stale)[0].inputs[0].excluded_downstream);
  EXPECT_EQ((*stale)[0].inputs[0].read_fingerprint, "a2");
  EXPECT_EQ((*stale)[0].inputs[0].now_fingerprint, "b2");
  EXPECT_EQ((*stale)[0].reason,
            absl::StrCat("input daily/2025-01-02 changed: republished by ", id,
                         " with `exclude_downstream`"));
  auto after = counts.Get();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->at("daily_total"), 1);
  EXPECT_EQ(after->at("daily"), 0);
  EXPECT_EQ(counts.computations(), 3);
  auto why = ExplainPartition(catalog_, *store_, "daily_total", "2025-01-02");
  ASSERT_TRUE(why.ok());
  ASSERT_TRUE(why->stale.has_value());
  EXPECT_EQ(why->stale->reason, (*stale)[0].reason);

  // Rolling the narrow job back restores what the dependent read.
  Rollback(id,
           {{"daily", "2025-01-02", "a2", {{"orders", "2025-01-02", "o2", 4}}}},
           At(3));
  auto restored = counts.Get();
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(restored->at("daily_total"), 0);
  EXPECT_EQ(counts.computations(), 4);
}

// A dependent's version is stale when the rows it read were replaced,
// whenever it was published: here bf-3 computed daily_total from daily as
// bf-1 left it, and published after bf-2 had replaced daily (e.g. held
// for approval meanwhile).
TEST_F(PartitionHistoryTest, DependentPublishedAfterReplacementOfItsInput) {
  StalePartitionCounts counts(&catalog_, store_.get());
  const std::string first = RunJob(
      Request("daily", "load", "alice"),
      {{"daily", "2025-01-01", "a1", {{"orders", "2025-01-01", "o1", 4}}},
       {"daily", "2025-01-02", "a2", {{"orders", "2025-01-02", "o2", 4}}},
       {"daily", "2025-01-04", "a4", {{"orders", "2025-01-04", "o4", 4}}},
       // daily/2025-01-03 as loaded outside backfilld.
       {"daily_total",
        "2025-01-03",
        "t3",
        {{"daily", "2025-01-03", "ext3", 2}}}},
      At(1));
  BackfillRequest narrow = Request("daily", "narrow", "bob");
  narrow.exclude_downstream = true;
  const std::string replacing = RunJob(
      narrow,
      {{"daily", "2025-01-01", "b1", {{"orders", "2025-01-01", "o1x", 4}}},
       {"daily", "2025-01-03", "b3", {{"orders", "2025-01-03", "o3", 4}}}},
      At(2));
  const std::string late = RunJob(
      Request("daily_total", "late", "carol"),
      {// Read before bf-2 replaced daily/2025-01-01.
       {"daily_total", "2025-01-01", "t1", {{"daily", "2025-01-01", "a1", 2}}},
       // Read what bf-1 published, still current.
       {"daily_total", "2025-01-02", "t2", {{"daily", "2025-01-02", "a2", 2}}},
       // Read daily/2025-01-04 as changed outside backfilld after bf-1:
       // lineage cannot say that it was replaced since.
       {"daily_total",
        "2025-01-04",
        "t4",
        {{"daily", "2025-01-04", "ext4", 2}}}},
      At(3));
  ASSERT_EQ(first, "bf-1");
  ASSERT_EQ(replacing, "bf-2");
  ASSERT_EQ(late, "bf-3");

  auto stale =
      FindStaleDependents(catalog_, *store_, *catalog_.Find("daily_total"), {});
  ASSERT_TRUE(stale.ok()) << stale.status();
  ASSERT_EQ(stale->size(), 2u);
  EXPECT_EQ((*stale)[0].partition, "2025-01-01");
  EXPECT_EQ((*stale)[0].version_job, "bf-3");
  ASSERT_EQ((*stale)[0].inputs.size(), 1u);
  EXPECT_EQ((*stale)[0].inputs[0].read_fingerprint, "a1");
  EXPECT_EQ((*stale)[0].inputs[0].now_fingerprint, "b1");
  EXPECT_EQ((*stale)[0].reason,
            "input daily/2025-01-01 changed: republished by bf-2 with "
            "`exclude_downstream`");
  // Read rows lineage does not know, replaced by a publish recorded after
  // the dependent's.
  EXPECT_EQ((*stale)[1].partition, "2025-01-03");
  EXPECT_EQ((*stale)[1].version_job, "bf-1");
  EXPECT_EQ((*stale)[1].reason,
            "input daily/2025-01-03 changed: republished by bf-2 with "
            "`exclude_downstream`");

  auto gauge = counts.Get();
  ASSERT_TRUE(gauge.ok()) << gauge.status();
  EXPECT_EQ(gauge->at("daily_total"), 2);
  auto why = ExplainPartition(catalog_, *store_, "daily_total", "2025-01-01");
  ASSERT_TRUE(why.ok()) << why.status();
  ASSERT_TRUE(why->stale.has_value());
  EXPECT_EQ(why->stale->version_job, "bf-3");
  auto fresh = ExplainPartition(catalog_, *store_, "daily_total", "2025-01-04");
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_FALSE(fresh->stale.has_value());
}

// A dependent that reads a partitioned derived dataset whole (mapping
// `all`) is stale once any partition of it is republished after it.
TEST_F(PartitionHistoryTest, DependentReadingAWholeDatasetIsStaleAfterAnyPart) {
  RunJob(Request("daily", "load", "alice"),
         {{"daily", "2025-01-01", "a1", {{"orders", "2025-01-01", "o1", 4}}},
          {"daily", "2025-01-02", "a2", {{"orders", "2025-01-02", "o2", 4}}},
          {"grand", "all", "g1", {{"daily", "", "whole-a", 8}}}},
         At(1));
  auto fresh =
      FindStaleDependents(catalog_, *store_, *catalog_.Find("grand"), {});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_TRUE(fresh->empty());

  BackfillRequest narrow = Request("daily", "narrow", "bob");
  narrow.exclude_downstream = true;
  RunJob(narrow,
         {{"daily", "2025-01-02", "b2", {{"orders", "2025-01-02", "o2x", 4}}}},
         At(2));
  auto stale =
      FindStaleDependents(catalog_, *store_, *catalog_.Find("grand"), {});
  ASSERT_TRUE(stale.ok()) << stale.status();
  ASSERT_EQ(stale->size(), 1u);
  EXPECT_EQ((*stale)[0].partition, "all");
  EXPECT_EQ((*stale)[0].version_job, "bf-1");
  ASSERT_EQ((*stale)[0].inputs.size(), 1u);
  EXPECT_EQ((*stale)[0].inputs[0].read_fingerprint, "whole-a");
  EXPECT_EQ((*stale)[0].inputs[0].now_fingerprint, "");
  EXPECT_EQ((*stale)[0].reason,
            "input daily changed: republished by bf-2 with "
            "`exclude_downstream`");
  StalePartitionCounts counts(&catalog_, store_.get());
  auto gauge = counts.Get();
  ASSERT_TRUE(gauge.ok()) << gauge.status();
  EXPECT_EQ(gauge->at("grand"), 1);

  // Recomputed after the narrow job: current again.
  RunJob(Request("grand", "again", "carol"),
         {{"grand", "all", "g2", {{"daily", "", "whole-b", 8}}}}, At(3));
  auto again =
      FindStaleDependents(catalog_, *store_, *catalog_.Find("grand"), {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->empty());
}

TEST_F(PartitionHistoryTest, AuditLogPagesOldestFirstAndRefusesChanges) {
  RunJob(Request("daily", "one", "alice"), {{"daily", "2025-01-01", "a1", {}}},
         At(1));
  const std::string second = RunJob(Request("daily", "two", "bob"),
                                    {{"daily", "2025-01-02", "a2", {}}}, At(5));
  const std::vector<std::string> all =
      Sql("SELECT seq, job_id, from_state, to_state, message FROM audit_events "
          "ORDER BY seq");
  ASSERT_GE(all.size(), 10u);
  // Pages of 3, all of them, in order.
  std::vector<std::string> paged;
  AuditQuery query;
  query.limit = 3;
  int pages = 0;
  while (true) {
    auto page = ReadAuditPage(*store_, query);
    ASSERT_TRUE(page.ok()) << page.status();
    ++pages;
    for (const AuditEvent& e : page->events) {
      paged.push_back(absl::StrJoin(
          {absl::StrCat(e.seq), e.job_id, e.from_state, e.to_state, e.message},
          "|"));
    }
    if (page->next_after_seq == 0) break;
    query.after_seq = page->next_after_seq;
  }
  EXPECT_EQ(paged, all);
  EXPECT_EQ(pages, static_cast<int>((all.size() + 2) / 3));

  // By job, and since a time.
  AuditQuery of_second;
  of_second.job_id = second;
  of_second.limit = 100;
  auto page = ReadAuditPage(*store_, of_second);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(
      page->events.size(),
      Sql("SELECT seq FROM audit_events WHERE job_id = ?1", {second}).size());
  AuditQuery since;
  since.since = At(3);
  since.limit = 100;
  page = ReadAuditPage(*store_, since);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->events.size(),
            Sql("SELECT seq FROM audit_events WHERE at >= ?1",
                {absl::StrCat(absl::ToUnixMicros(At(3)))})
                .size());
  AuditQuery unknown;
  unknown.job_id = "bf-99";
  EXPECT_EQ(ReadAuditPage(*store_, unknown).status().code(),
            absl::StatusCode::kNotFound);

  // The database itself refuses to change or remove an event.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path().c_str(), &db), SQLITE_OK);
  for (const char* sql : {
           // append-only-check: allowed
           "UPDATE audit_events SET message = 'x'",
           // append-only-check: allowed
           "DELETE FROM audit_events",
           // A rewrite of an existing event, and an insert on its seq.
           // append-only-check: allowed
           "INSERT OR REPLACE INTO audit_events (seq, job_id, from_state, "
           "to_state, message, at) VALUES (1, 'bf-1', '', 'QUEUED', "
           "'forged', 0)",
           // append-only-check: allowed
           "REPLACE INTO audit_events (seq, job_id, from_state, to_state, "
           "message, at) VALUES (2, 'bf-1', '', 'QUEUED', 'forged', 0)",
           "INSERT OR IGNORE INTO audit_events (seq, job_id, from_state, "
           "to_state, message, at) VALUES (3, 'bf-1', '', 'QUEUED', "
           "'forged', 0)",
       }) {
    char* err = nullptr;
    EXPECT_NE(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << sql;
    EXPECT_THAT(err ? err : "", HasSubstr("append-only")) << sql;
    sqlite3_free(err);
  }
  sqlite3_close(db);
  EXPECT_EQ(Sql("SELECT seq, job_id, from_state, to_state, message FROM "
                "audit_events ORDER BY seq"),
            all);
}

}  // namespace
}  // namespace storage_partition_history_test
}  // namespace backfill
