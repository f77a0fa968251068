// Engine conformance of StagingGroup (core/ports/engine.h), on every
// warehouse of ConformanceWarehouses() whose engine offers groups (an
// engine that answers none stages each partition by itself, which the
// other suites cover). What is staged is checked against the same
// aggregation in plain SQL over the fixture, and each partition's result
// against StagePartition's for the same rows in another job: a group must
// stage exactly what one-by-one staging stages, write nothing before its
// Commit, and leave the rest of its group alone when one partition fails.

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/ports/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_conformance.h"

namespace backfill {
namespace storage_engine_conformance_staging_group_test {
namespace {

using ::testing::HasSubstr;

constexpr char kJob[] = "bf-1";
constexpr char kOther[] = "bf-2";
constexpr int kDays = 30;

std::string Day(int i) { return absl::StrFormat("2025-01-%02d", i + 1); }

class StagingGroupConformanceTest : public testing::ConformanceTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::ConformanceTest::SetUp());
    Exec(
        "CREATE TABLE events (id BIGINT PRIMARY KEY, day TEXT NOT NULL, "
        "v BIGINT NOT NULL)");
    events_.name = "events";
    events_.kind = DatasetKind::kSource;
    events_.table = "events";
    events_.partition = PartitionSpec{"day", Grain::kDay, {}};

    counts_.name = "daily_counts";
    counts_.kind = DatasetKind::kDerived;
    counts_.table = "daily_counts";
    counts_.partition = PartitionSpec{"ds", Grain::kDay, {}};
    counts_.upstream = {{"events", Mapping::kIdentity}};
    counts_.transform =
        "SELECT day AS ds, COUNT(*) AS n, SUM(v) AS total FROM events "
        "WHERE day >= :partition_start AND day < :partition_end GROUP BY day";
    counts_.columns = {{"ds", "TEXT"}, {"n", "BIGINT"}, {"total", "BIGINT"}};
    counts_.primary_key = {"ds"};
    for (int i = 0; i < kDays; ++i) days_.push_back(Day(i));
  }

  void Prepare(const std::string& job, const DatasetSpec* dataset) {
    JobLayout layout;
    layout.job_id = job;
    layout.items = {{dataset, days_}};
    absl::Status s = engine()->PrepareJob(layout);
    ASSERT_TRUE(s.ok()) << s;
  }

  // A group of `dataset` in `job`; null when the engine offers none.
  std::unique_ptr<StagingGroup> Open(const std::string& job,
                                     const DatasetSpec& dataset) {
    absl::StatusOr<std::unique_ptr<StagingGroup>> group =
        engine()->OpenStagingGroup(job, dataset);
    EXPECT_TRUE(group.ok()) << group.status();
    return group.ok() ? *std::move(group) : nullptr;
  }

  std::vector<InputRef> Inputs(const std::string& day) {
    return {{&events_, day}};
  }

  // Staged rows of `job`'s daily_counts on `days`, "ds|n|total" in order.
  std::vector<std::string> Staged(const std::string& job,
                                  const std::set<std::string>& days) {
    std::vector<std::string> out;
    for (const std::string& row : Rows(absl::StrCat(
             "SELECT ds, n, total FROM ",
             warehouse().StagingTable(job, "daily_counts"), " ORDER BY ds"))) {
      if (days.count(row.substr(0, row.find('|'))) > 0) out.push_back(row);
    }
    return out;
  }

  // The same aggregation in plain SQL over `events`.
  std::vector<std::string> Expected(const std::set<std::string>& days) {
    std::vector<std::string> quoted;
    for (const std::string& d : days)
      quoted.push_back(absl::StrCat("'", d, "'"));
    if (quoted.empty()) return {};
    return Rows(absl::StrCat(
        "SELECT day, COUNT(*), SUM(v) FROM events WHERE day IN (",
        absl::StrJoin(quoted, ", "), ") GROUP BY day ORDER BY day"));
  }

  int64_t StagedRows(const std::string& job) {
    return Int(absl::StrCat("SELECT COUNT(*) FROM ",
                            warehouse().StagingTable(job, "daily_counts")));
  }

  DatasetSpec events_;
  DatasetSpec counts_;
  std::vector<std::string> days_;
};

INSTANTIATE_TEST_SUITE_P(Warehouses, StagingGroupConformanceTest,
                         ::testing::ValuesIn(testing::ConformanceWarehouses()),
                         testing::WarehouseParamName);

TEST_P(StagingGroupConformanceTest, AGroupStagesWhatPlainSqlComputes) {
  ASSERT_NO_FATAL_FAILURE(Prepare(kJob, &counts_));
  ASSERT_NO_FATAL_FAILURE(Prepare(kOther, &counts_));
  if (Open(kJob, counts_) == nullptr) {
    GTEST_SKIP() << "the engine stages each partition by itself";
  }
  // Rounds of random changes to the input, each followed by a group of a
  // random subset of the days in random order (empty days included): the
  // group's days then hold the plain-SQL aggregation of the input as it is,
  // the other days what earlier rounds staged, and each partition's result
  // equals StagePartition's in the other job.
  std::mt19937 rng(20261208);
  int64_t next_id = 1;
  std::map<std::string, std::string> staged_before;  // day -> row
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    std::vector<std::string> statements;
    const int inserts = std::uniform_int_distribution<int>(0, 40)(rng);
    for (int i = 0; i < inserts; ++i) {
      const int day = std::uniform_int_distribution<int>(0, kDays - 1)(rng);
      const int v = std::uniform_int_distribution<int>(-50, 1000)(rng);
      statements.push_back(absl::StrCat("INSERT INTO events VALUES (",
                                        next_id++, ", '", Day(day), "', ", v,
                                        ")"));
    }
    if (round % 3 == 2) {
      const int day = std::uniform_int_distribution<int>(0, kDays - 1)(rng);
      statements.push_back(
          absl::StrCat("DELETE FROM events WHERE day = '", Day(day), "'"));
    }
    for (const std::string& s : statements) ASSERT_NO_FATAL_FAILURE(Exec(s));

    std::vector<std::string> order = days_;
    std::shuffle(order.begin(), order.end(), rng);
    order.resize(std::uniform_int_distribution<size_t>(1, kDays)(rng));
    const std::set<std::string> chosen(order.begin(), order.end());

    std::unique_ptr<StagingGroup> group = Open(kJob, counts_);
    ASSERT_NE(group, nullptr);
    std::map<std::string, StageResult> results;
    for (const std::string& day : order) {
      absl::StatusOr<StageResult> r = group->Stage(day, Inputs(day));
      ASSERT_TRUE(r.ok()) << day << ": " << r.status();
      EXPECT_EQ(r->timings.stage_write, absl::ZeroDuration());
      results[day] = *std::move(r);
    }
    // Nothing of the group is written before its commit.
    std::set<std::string> all(days_.begin(), days_.end());
    std::vector<std::string> before;
    for (const auto& [day, row] : staged_before) before.push_back(row);
    EXPECT_EQ(Staged(kJob, all), before);

    absl::StatusOr<absl::Duration> wrote = group->Commit();
    ASSERT_TRUE(wrote.ok()) << wrote.status();
    EXPECT_GT(*wrote, absl::ZeroDuration());
    EXPECT_EQ(Staged(kJob, chosen), Expected(chosen));
    for (const std::string& row : Staged(kJob, chosen)) {
      staged_before[row.substr(0, row.find('|'))] = row;
    }
    for (const std::string& row : Staged(kJob, all)) {
      const std::string day = row.substr(0, row.find('|'));
      EXPECT_EQ(staged_before[day], row) << "a day outside the group changed";
    }
    // Days the group staged empty hold no row any more.
    for (const std::string& day : chosen) {
      if (Expected({day}).empty()) staged_before.erase(day);
    }
    EXPECT_EQ(StagedRows(kJob), static_cast<int64_t>(staged_before.size()));

    for (const std::string& day : order) {
      absl::StatusOr<StageResult> one =
          engine()->StagePartition(kOther, counts_, day, Inputs(day));
      ASSERT_TRUE(one.ok()) << one.status();
      const StageResult& grouped = results[day];
      EXPECT_EQ(grouped.rows_written, one->rows_written) << day;
      EXPECT_EQ(grouped.output_fingerprint, one->output_fingerprint) << day;
      ASSERT_EQ(grouped.inputs.size(), one->inputs.size());
      for (size_t i = 0; i < one->inputs.size(); ++i) {
        EXPECT_EQ(grouped.inputs[i].fingerprint, one->inputs[i].fingerprint);
        EXPECT_EQ(grouped.inputs[i].rows, one->inputs[i].rows);
      }
    }
  }
}

TEST_P(StagingGroupConformanceTest, AFailedPartitionLeavesTheRestOfItsGroup) {
  Exec(
      "INSERT INTO events VALUES (1, '2025-01-04', 4), (2, '2025-01-05', 5), "
      "(3, '2025-01-06', 6)");
  // The transform puts a row outside the partition of the 5th only.
  DatasetSpec bad = counts_;
  bad.transform =
      "SELECT CASE WHEN day = '2025-01-05' THEN '1999-01-01' ELSE day END "
      "AS ds, COUNT(*) AS n, SUM(v) AS total FROM events "
      "WHERE day >= :partition_start AND day < :partition_end GROUP BY day";
  ASSERT_NO_FATAL_FAILURE(Prepare(kJob, &bad));
  std::unique_ptr<StagingGroup> group = Open(kJob, bad);
  if (group == nullptr) {
    GTEST_SKIP() << "the engine stages each partition by itself";
  }
  EXPECT_TRUE(group->Stage("2025-01-04", Inputs("2025-01-04")).ok());
  absl::StatusOr<StageResult> outside =
      group->Stage("2025-01-05", Inputs("2025-01-05"));
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(outside.status().message(), HasSubstr("outside partition"));
  // Not part of the job: refused, and the group goes on.
  absl::StatusOr<StageResult> foreign =
      group->Stage("2026-01-01", Inputs("2026-01-01"));
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(group->Stage("2025-01-06", Inputs("2025-01-06")).ok());
  ASSERT_TRUE(group->Commit().ok());
  EXPECT_EQ(
      Staged(kJob, {"2025-01-04", "2025-01-05", "2025-01-06", "1999-01-01"}),
      Expected({"2025-01-04", "2025-01-06"}));
  EXPECT_EQ(StagedRows(kJob), 2);
}

TEST_P(StagingGroupConformanceTest, AGroupDroppedBeforeItsCommitStagesNothing) {
  Exec(
      "INSERT INTO events VALUES (1, '2025-01-01', 1), (2, '2025-01-02', 2), "
      "(3, '2025-01-03', 3), (4, '2025-01-04', 4)");
  ASSERT_NO_FATAL_FAILURE(Prepare(kJob, &counts_));
  {
    std::unique_ptr<StagingGroup> group = Open(kJob, counts_);
    if (group == nullptr) {
      GTEST_SKIP() << "the engine stages each partition by itself";
    }
    for (const std::string day : {"2025-01-01", "2025-01-02", "2025-01-03"}) {
      ASSERT_TRUE(group->Stage(day, Inputs(day)).ok());
    }
    EXPECT_EQ(StagedRows(kJob), 0);
  }
  EXPECT_EQ(StagedRows(kJob), 0);
  // The next group starts empty: its commit writes its own rows only.
  std::unique_ptr<StagingGroup> group = Open(kJob, counts_);
  ASSERT_TRUE(group->Stage("2025-01-04", Inputs("2025-01-04")).ok());
  ASSERT_TRUE(group->Commit().ok());
  EXPECT_EQ(
      Staged(kJob, {"2025-01-01", "2025-01-02", "2025-01-03", "2025-01-04"}),
      Expected({"2025-01-04"}));
  // A commit of nothing writes nothing.
  absl::StatusOr<absl::Duration> nothing = group->Commit();
  ASSERT_TRUE(nothing.ok());
  EXPECT_EQ(*nothing, absl::ZeroDuration());
}

TEST_P(StagingGroupConformanceTest, OneConnectionServesAGroupAndThenTheRest) {
  Exec("INSERT INTO events VALUES (1, '2025-01-01', 1), (2, '2025-01-02', 2)");
  // A group holds one connection from its first Stage to its Commit and
  // needs no other meanwhile (the triggers of its inputs included).
  ASSERT_NO_FATAL_FAILURE(Restart(1));
  ASSERT_NO_FATAL_FAILURE(Prepare(kJob, &counts_));
  std::unique_ptr<StagingGroup> group = Open(kJob, counts_);
  if (group == nullptr) {
    GTEST_SKIP() << "the engine stages each partition by itself";
  }
  for (int round = 0; round < 2; ++round) {
    for (const std::string day : {"2025-01-01", "2025-01-02"}) {
      ASSERT_TRUE(group->Stage(day, Inputs(day)).ok());
    }
    ASSERT_TRUE(group->Commit().ok());
  }
  // Handed back: other calls get it.
  absl::StatusOr<StageResult> one = engine()->StagePartition(
      kJob, counts_, "2025-01-03", Inputs("2025-01-03"));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(Staged(kJob, {"2025-01-01", "2025-01-02", "2025-01-03"}),
            Expected({"2025-01-01", "2025-01-02"}));
}

}  // namespace
}  // namespace storage_engine_conformance_staging_group_test
}  // namespace backfill
