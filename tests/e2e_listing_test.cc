// End-to-end: listing large jobs with the real daemon and CLI. Three jobs
// of 70,000 hourly partitions each (a trivial transform over an hourly
// source) are submitted, the first paused and the others waiting for it;
// whole, with every partition list of their plans, they take more than the
// 4 MiB a gRPC client receives by default in one message. The default
// `backfillctl list` still works (the BASIC view: counts without the lists),
// `list --full` follows pages that the server keeps under its page size, and
// `partitions JOB` pages through one job's 70,000 partitions.

#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "backfill/v1/backfill.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_listing_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kPipeline[] =
    R"yaml(warehouse: {engine: sqlite, path: warehouse.db}
datasets:
  - name: events
    kind: source
    table: raw_events
    partition: {column: event_time, grain: hour}
  - name: hourly_events
    kind: derived
    table: hourly_events
    partition: {column: hr, grain: hour}
    upstream:
      - {dataset: events, mapping: identity}
    transform: |
      SELECT :partition AS hr, COUNT(*) AS events
      FROM raw_events
      WHERE event_time >= :partition_start AND event_time < :partition_end
    contract:
      columns: {hr: TEXT, events: INTEGER}
      primary_key: [hr]
)yaml";

constexpr int kJobs = 3;
constexpr int kHours = 70000;  // per job: about 8 years of hours
constexpr int64_t kGrpcDefaultMaxMessage = 4 << 20;

template <typename Message>
Message ParseJson(const RunResult& r) {
  Message message;
  const auto parsed =
      google::protobuf::util::JsonStringToMessage(r.out, &message);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n"
                           << r.command << "\nstderr: " << r.err;
  return message;
}

class ListingTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    Sqlite db(warehouse_);
    ASSERT_TRUE(db.error().empty()) << db.error();
    ASSERT_TRUE(
        db.Exec("CREATE TABLE raw_events (event_time TEXT NOT NULL);"
                "INSERT INTO raw_events VALUES ('2015-01-01 00:10:00'), "
                "('2015-01-01 01:20:00'), ('2016-06-01 12:00:00');"))
        << db.error();
    WriteFile(pipelines_dir_ + "/events.yaml", kPipeline);
  }
};

TEST_F(ListingTest, TheDefaultListStaysSmallWhereWholeJobsWouldNotFit) {
  Daemon& daemon = NewDaemon(/*workers=*/1);
  ASSERT_TRUE(daemon.Start());
  const absl::CivilHour from(2015, 1, 1, 0);
  const std::string from_text = absl::FormatCivilTime(from).substr(0, 13);
  const std::string to_text =
      absl::FormatCivilTime(from + kHours).substr(0, 13);
  ASSERT_EQ(from_text, "2015-01-01T00");

  // Three jobs over the same hours: the first is paused at once and the
  // others wait for it, so that they stay as they are while they are listed.
  std::vector<std::string> ids;
  for (int i = 0; i < kJobs; ++i) {
    // The plain output: the JSON of each whole job would be megabytes.
    RunResult r =
        daemon.Ctl({"submit", "hourly_events", "--from", from_text, "--to",
                    to_text, "--reason", absl::StrCat("reload ", i)},
                   seconds(300));
    ASSERT_EQ(r.exit_code, 0) << r;
    std::smatch id;
    ASSERT_TRUE(std::regex_search(r.out, id,
                                  std::regex("submitted backfill (bf-[0-9]+)")))
        << r;
    ids.push_back(id[1]);
    if (i == 0) {
      RunResult paused = daemon.Ctl({"pause", ids[0], "--reason", "listing"});
      ASSERT_EQ(paused.exit_code, 0) << paused;
    }
  }

  // The default list: every job, with counts and without the lists.
  RunResult listed = daemon.CtlJson({"list"});
  ASSERT_EQ(listed.exit_code, 0) << listed;
  EXPECT_LT(listed.out.size(), 64u << 10);
  const auto basic = ParseJson<v1::ListBackfillsResponse>(listed);
  ASSERT_EQ(basic.backfills_size(), kJobs);
  for (int i = 0; i < kJobs; ++i) {
    const v1::Backfill& job = basic.backfills(i);
    EXPECT_EQ(job.id(), ids[kJobs - 1 - i]);  // newest first
    EXPECT_EQ(job.state(), i + 1 < kJobs ? v1::BACKFILL_STATE_QUEUED
                                         : v1::BACKFILL_STATE_PAUSED);
    EXPECT_EQ(job.view(), v1::BACKFILL_VIEW_BASIC);
    EXPECT_EQ(job.partitions().total(), kHours);
    ASSERT_EQ(job.plan_size(), 1);
    EXPECT_THAT(job.plan(0).partitions(), IsEmpty());
    EXPECT_EQ(job.plan(0).partition_count(), kHours);
  }
  RunResult table = daemon.Ctl({"list"});
  ASSERT_EQ(table.exit_code, 0) << table;
  for (const std::string& id : ids) EXPECT_THAT(table.out, HasSubstr(id));
  EXPECT_THAT(table.out, HasSubstr(absl::StrCat("/", kHours)));

  // --full: whole jobs, page after page. Whole, the jobs are more than a
  // gRPC client takes in one message.
  RunResult full = daemon.CtlJson({"list", "--full"}, seconds(300));
  ASSERT_EQ(full.exit_code, 0) << full.command << "\n" << full.err;
  const auto whole = ParseJson<v1::ListBackfillsResponse>(full);
  ASSERT_EQ(whole.backfills_size(), kJobs);
  int64_t full_bytes = 0;
  for (const v1::Backfill& job : whole.backfills()) {
    EXPECT_EQ(job.view(), v1::BACKFILL_VIEW_FULL);
    ASSERT_EQ(job.plan_size(), 1);
    EXPECT_EQ(job.plan(0).partitions_size(), kHours);
    full_bytes += static_cast<int64_t>(job.ByteSizeLong());
  }
  EXPECT_GT(full_bytes, kGrpcDefaultMaxMessage);
  const v1::DatasetPlan& first_plan = whole.backfills(kJobs - 1).plan(0);

  // One job's partitions, page after page, in plan order.
  RunResult partitions = daemon.CtlJson(
      {"partitions", ids[0], "--dataset", "hourly_events"}, seconds(300));
  ASSERT_EQ(partitions.exit_code, 0) << partitions.command << "\n"
                                     << partitions.err;
  const auto all = ParseJson<v1::ListPartitionsResponse>(partitions);
  ASSERT_EQ(all.partitions_size(), kHours);
  for (int i = 0; i < kHours; ++i) {
    ASSERT_EQ(all.partitions(i).partition(), first_plan.partitions(i)) << i;
  }
  EXPECT_EQ(all.partitions(0).partition(), "2015-01-01T00");
  EXPECT_EQ(all.partitions(0).dataset(), "hourly_events");
  EXPECT_EQ(all.partitions(0).reason(), "requested");

  // States filter the list; a state that is none is a usage error.
  RunResult failed = daemon.Ctl({"partitions", ids[0], "--state", "failed"});
  ASSERT_EQ(failed.exit_code, 0) << failed;
  EXPECT_THAT(failed.out, HasSubstr("no partitions"));
  RunResult published =
      daemon.Ctl({"partitions", ids[1], "--state", "published,staged",
                  "--dataset", "hourly_events"});
  ASSERT_EQ(published.exit_code, 0) << published;
  EXPECT_THAT(published.out, HasSubstr("no partitions"));
  RunResult bogus = daemon.Ctl({"partitions", ids[0], "--state", "bogus"});
  EXPECT_EQ(bogus.exit_code, 2) << bogus;
  EXPECT_THAT(bogus.err, HasSubstr("--state"));
}

}  // namespace
}  // namespace e2e_listing_test
}  // namespace backfill
