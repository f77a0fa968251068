// Engine conformance of StageResult::timings: StagePartition times its own
// phases (transform, fingerprint, stage_write), on every warehouse of
// ConformanceWarehouses(). Two workloads whose costs are known from their
// shape, not from the engine: a transform made slow on purpose (it counts
// the pairs of a cross join of its partition's rows, which it reads few of)
// must report more transform than fingerprint time; a transform that reads
// one row by its key while its input partition holds many rows (each
// hashed for the input's fingerprint) must report the opposite. In both,
// every phase takes some time and the phases add up to no more than the
// call took.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/base/stopwatch.h"
#include "core/ports/engine.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_conformance.h"

namespace backfill {
namespace storage_engine_conformance_stage_timings_test {
namespace {

constexpr char kJob[] = "bf-3";
constexpr char kDay[] = "2025-01-01";

class StageTimingsConformanceTest : public testing::ConformanceTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::ConformanceTest::SetUp());
    events_.name = "events";
    events_.kind = DatasetKind::kSource;
    events_.table = "events";
    events_.partition = PartitionSpec{"day", Grain::kDay, {}};

    out_.name = "event_pairs";
    out_.kind = DatasetKind::kDerived;
    out_.table = "event_pairs";
    out_.partition = PartitionSpec{"ds", Grain::kDay, {}};
    out_.upstream = {{"events", Mapping::kIdentity}};
    out_.columns = {{"ds", "TEXT"}, {"pairs", "BIGINT"}};
    out_.primary_key = {"ds"};
  }

  // `events` with `rows` rows on kDay (ids 1..rows) and 10 on the next
  // day, generated in SQL.
  void CreateEvents(int rows) {
    Exec(
        "CREATE TABLE events (id BIGINT PRIMARY KEY, day TEXT NOT NULL, "
        "v BIGINT NOT NULL)");
    Exec(absl::StrCat(
        "INSERT INTO events (id, day, v) WITH RECURSIVE g(n) AS (SELECT 1 "
        "UNION ALL SELECT n + 1 FROM g WHERE n < ",
        rows + 10, ") SELECT n, CASE WHEN n <= ", rows, " THEN '", kDay,
        "' ELSE '2025-01-02' END, n * 7 FROM g"));
    ASSERT_EQ(Count("events"), rows + 10);
  }

  // Stages kDay of event_pairs with `transform`, reading kDay of events;
  // the call's own wall time in `took`.
  StageResult Stage(const std::string& transform, absl::Duration* took) {
    out_.transform = transform;
    JobLayout layout;
    layout.job_id = kJob;
    layout.items = {{&out_, {kDay}}};
    absl::Status prepared = engine()->PrepareJob(layout);
    EXPECT_TRUE(prepared.ok()) << prepared;
    const Stopwatch call;
    absl::StatusOr<StageResult> staged =
        engine()->StagePartition(kJob, out_, kDay, {{&events_, kDay}});
    *took = call.Elapsed();
    EXPECT_TRUE(staged.ok()) << staged.status();
    return staged.ok() ? *std::move(staged) : StageResult();
  }

  static void ExpectEveryPhaseWithinTheCall(const StageTimings& t,
                                            absl::Duration took) {
    EXPECT_GT(t.transform, absl::ZeroDuration());
    EXPECT_GT(t.fingerprint, absl::ZeroDuration());
    EXPECT_GT(t.stage_write, absl::ZeroDuration());
    EXPECT_LE(t.transform + t.fingerprint + t.stage_write, took);
  }

  DatasetSpec events_;
  DatasetSpec out_;
};

TEST_P(StageTimingsConformanceTest, ASlowTransformIsTransformTime) {
  // 1,200 input rows; the transform compares 1.44 million pairs of them and
  // writes one row.
  constexpr int kRows = 1200;
  ASSERT_NO_FATAL_FAILURE(CreateEvents(kRows));
  absl::Duration took;
  const StageResult r = Stage(
      "SELECT a.day AS ds, COUNT(*) AS pairs FROM events a CROSS JOIN events "
      "b WHERE a.day >= :partition_start AND a.day < :partition_end "
      "AND b.day >= :partition_start AND b.day < :partition_end "
      "AND a.v <> b.v GROUP BY a.day",
      &took);
  ASSERT_EQ(r.rows_written, 1);
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].rows, kRows);
  EXPECT_EQ(Int(absl::StrCat("SELECT pairs FROM ",
                             warehouse().StagingTable(kJob, "event_pairs"))),
            int64_t{kRows} * (kRows - 1));
  const StageTimings& t = r.timings;
  ExpectEveryPhaseWithinTheCall(t, took);
  // The transform reads each of the 1,200 rows 1,200 times, the
  // fingerprints read them once: by far the larger part of the call, even
  // when the machine is busy (a fingerprint then took tens of ms).
  EXPECT_GT(t.transform, 3 * t.fingerprint)
      << "transform " << t.transform << ", fingerprint " << t.fingerprint;
  EXPECT_GT(t.transform, t.stage_write)
      << "transform " << t.transform << ", write " << t.stage_write;
}

TEST_P(StageTimingsConformanceTest, LargeInputsOfATrivialTransformAreHashing) {
  // 100,000 input rows, each hashed for the input's fingerprint; the
  // transform reads one of them by its key.
  constexpr int kRows = 100000;
  ASSERT_NO_FATAL_FAILURE(CreateEvents(kRows));
  absl::Duration took;
  const StageResult r = Stage(
      "SELECT day AS ds, v AS pairs FROM events WHERE id = 1 "
      "AND day >= :partition_start AND day < :partition_end",
      &took);
  ASSERT_EQ(r.rows_written, 1);
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].rows, kRows);
  const StageTimings& t = r.timings;
  ExpectEveryPhaseWithinTheCall(t, took);
  // Hashing 100,000 rows against looking one up.
  EXPECT_GT(t.fingerprint, 2 * t.transform)
      << "transform " << t.transform << ", fingerprint " << t.fingerprint;
}

INSTANTIATE_TEST_SUITE_P(Warehouses, StageTimingsConformanceTest,
                         ::testing::ValuesIn(testing::ConformanceWarehouses()),
                         testing::WarehouseParamName);

}  // namespace
}  // namespace storage_engine_conformance_stage_timings_test
}  // namespace backfill
