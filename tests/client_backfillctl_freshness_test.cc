// Runs the real backfillctl binary's `freshness` against the in-process
// fake BackfillService (tests/testing/backfillctl_fixture.h), which answers
// ListDatasetPartitions in two pages: every page is read and printed, --only
// sends the freshness asked for, a bad --only is a usage error that sends
// nothing, --json prints one document with every partition, and RPC errors
// are reported like the other commands'.

#include <string>
#include <vector>

#include "backfill/v1/backfill.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/testing/backfillctl_fixture.h"

namespace backfill {
namespace client_backfillctl_freshness_test {
namespace {

using testing::BackfillctlTest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Lines;
using testing::RunResult;
using ::testing::StartsWith;

TEST_F(BackfillctlTest, FreshnessReadsEveryPage) {
  RunResult run = Run({"freshness", "daily_revenue"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, IsEmpty());
  const std::vector<v1::ListDatasetPartitionsRequest> lists =
      service_.dataset_partition_lists();
  ASSERT_EQ(lists.size(), 2u);
  for (const v1::ListDatasetPartitionsRequest& r : lists) {
    EXPECT_EQ(r.dataset(), "daily_revenue");
    EXPECT_EQ(r.page_size(), 1000);
    EXPECT_THAT(r.freshness(), IsEmpty());
  }
  EXPECT_EQ(lists[0].page_token(), "");
  EXPECT_EQ(lists[1].page_token(), "p2");

  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_EQ(lines.size(), 2u + 1 + 4) << run.out;
  EXPECT_EQ(lines[0],
            "daily_revenue: 4 published partitions: 1 current, 1 stale, 1 due "
            "for a replay, 1 frozen (frozen rule: frozen.before 2025-06-04)");
  EXPECT_EQ(lines[1],
            "due for a replay as of the replay policy's evaluation at "
            "2025-01-01T00:00:00Z");
  EXPECT_THAT(lines[2], StartsWith("PARTITION   FRESHNESS  VERSION"));
  // Both pages, in order.
  EXPECT_THAT(lines[3], StartsWith("2025-06-01  current    bf-3 "));
  EXPECT_THAT(lines[4], StartsWith("2025-06-02  stale      bf-3 "));
  EXPECT_THAT(lines[4], HasSubstr("input orders/2025-06-02 changed\\x1b[2J"));
  EXPECT_THAT(lines[5],
              StartsWith("2025-06-03  due        bf-5 (rollback) confirmed by "
                         "bf-7  2025-01-01T00:00:00Z  4     -"));
  EXPECT_THAT(lines[6], StartsWith("2025-06-04  frozen     bf-1 "));
  EXPECT_THAT(lines[6],
              HasSubstr("  bf-9     input orders/2025-06-04 changed"));
  EXPECT_THAT(run.out, ::testing::Not(HasSubstr("\x1b")));
}

TEST_F(BackfillctlTest, FreshnessOnlySendsEveryFreshnessAskedFor) {
  RunResult run = Run({"freshness", "daily_revenue", "--only", "stale,due"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::vector<v1::ListDatasetPartitionsRequest> lists =
      service_.dataset_partition_lists();
  ASSERT_EQ(lists.size(), 2u);
  for (const v1::ListDatasetPartitionsRequest& r : lists) {
    EXPECT_THAT(r.freshness(), ElementsAre(v1::PARTITION_FRESHNESS_STALE,
                                           v1::PARTITION_FRESHNESS_DUE));
  }
  EXPECT_EQ(lists[1].page_token(), "p2");
  std::vector<std::string> lines = Lines(run.out);
  ASSERT_EQ(lines.size(), 2u + 1 + 2) << run.out;
  EXPECT_THAT(lines[3], StartsWith("2025-06-02  stale "));
  EXPECT_THAT(lines[4], StartsWith("2025-06-03  due "));

  // Repeated, any case, the enum's full names.
  run = Run({"freshness", "daily_revenue", "--only", "Current", "--only",
             "PARTITION_FRESHNESS_FROZEN"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  lists = service_.dataset_partition_lists();
  ASSERT_EQ(lists.size(), 4u);
  EXPECT_THAT(lists[2].freshness(),
              ElementsAre(v1::PARTITION_FRESHNESS_CURRENT,
                          v1::PARTITION_FRESHNESS_FROZEN));
  lines = Lines(run.out);
  ASSERT_EQ(lines.size(), 2u + 1 + 2) << run.out;
  EXPECT_THAT(lines[3], StartsWith("2025-06-01  current "));
  EXPECT_THAT(lines[4], StartsWith("2025-06-04  frozen "));
}

TEST_F(BackfillctlTest, FreshnessBadOnlyIsAUsageErrorThatSendsNothing) {
  RunResult run = Run({"freshness", "daily_revenue", "--only", "stale,fresh"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "backfillctl: --only: unknown freshness \"fresh\"; use current, "
            "stale, due, frozen (any case, or the full name, e.g. "
            "PARTITION_FRESHNESS_STALE)\n");
  EXPECT_THAT(run.out, IsEmpty());
  run = Run({"freshness", "daily_revenue", "--only",
             "PARTITION_FRESHNESS_"
             "UNSPECIFIED"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--only: unknown freshness"));
  run = Run({"freshness", "daily_revenue", "--only", "stale,,due"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--only: item 2 is empty"));
  run = Run({"freshness", "daily_revenue", "--only", "stale "});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("has leading or trailing whitespace"));
  run = Run({"freshness", "daily_revenue", "--only", "st\xff"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--only is not valid UTF-8"));
  run = Run({"freshness", "daily\xff"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("DATASET is not valid UTF-8"));
  run = Run({"freshness"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("DATASET"));
  EXPECT_THAT(service_.dataset_partition_lists(), IsEmpty());
}

TEST_F(BackfillctlTest, FreshnessJsonIsOneDocumentWithEveryPartition) {
  RunResult run = Run({"--json", "freshness", "daily_revenue"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  v1::ListDatasetPartitionsResponse all;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &all).ok())
      << run.out;
  ASSERT_EQ(all.partitions_size(), 4);
  EXPECT_EQ(all.partitions(0).partition(), "2025-06-01");
  EXPECT_EQ(all.partitions(1).stale_reason(),
            "input orders/2025-06-02 changed\x1b[2J");  // exact
  EXPECT_EQ(all.partitions(2).kind(), v1::VERSION_KIND_ROLLBACK);
  EXPECT_EQ(all.partitions(2).confirmed_by_backfill_id(), "bf-7");
  EXPECT_EQ(all.partitions(3).freshness(), v1::PARTITION_FRESHNESS_FROZEN);
  EXPECT_EQ(all.partitions(3).held_by_backfill_id(), "bf-9");
  EXPECT_EQ(all.dataset(), "daily_revenue");
  EXPECT_EQ(all.total(), 4);
  EXPECT_EQ(all.frozen_rule(), "frozen.before 2025-06-04");
  EXPECT_EQ(all.next_page_token(), "");
  // Proto field names, enums by name, int64 as strings.
  EXPECT_THAT(run.out, HasSubstr("\"held_by_backfill_id\""));
  EXPECT_THAT(run.out, HasSubstr("\"PARTITION_FRESHNESS_DUE\""));
  EXPECT_THAT(run.out, HasSubstr("\"total\": \"4\""));
  EXPECT_EQ(service_.dataset_partition_lists().size(), 2u);
}

TEST_F(BackfillctlTest, FreshnessReportsRpcErrors) {
  RunResult run = Run({"freshness", "weekly_revenue"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err,
            "backfillctl: NOT_FOUND: unknown dataset \"weekly_revenue\"\n");
  EXPECT_THAT(run.out, IsEmpty());
  run = Run({"--json", "freshness", "orders"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, StartsWith("backfillctl: FAILED_PRECONDITION: orders "
                                  "is a source dataset"));
  EXPECT_THAT(run.out, IsEmpty());
}

}  // namespace
}  // namespace client_backfillctl_freshness_test
}  // namespace backfill
