// Unit tests of client/governance_format.h: `--since` parsing (every
// accepted form and the refused near misses, offsets, month and year ends,
// the range a Timestamp holds), one audit event as a JSON line, and `why`'s
// text. Expected seconds are worked out by hand from the calendar
// (2025-01-01T00:00:00Z is 1735689600), not by the code under test.

#include <cstdint>
#include <string>

#include "backfill/v1/backfill.pb.h"
#include "client/governance_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace cli {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kJan1st2025 = 1735689600;
constexpr int64_t kDay = 86400;

TEST(FormatPartitionHistoryTest, StaleVersionsNewestFirst) {
  v1::ExplainPartitionResponse h;
  h.set_dataset("monthly");
  h.set_partition("2025-01");
  h.set_stale(true);
  h.set_stale_reason(
      "input daily/2025-01-15 changed: republished by bf-9 with "
      "--no-downstream");
  v1::PartitionVersion* v = h.add_versions();
  v->mutable_publish_time()->set_seconds(kJan1st2025 + 31 * kDay);
  v->mutable_publish_time()->set_nanos(500000000);
  v->set_backfill_id("bf-8");
  v->set_state(v1::BACKFILL_STATE_SUCCEEDED);
  v->set_kind("backfill");
  v->set_reason("late orders");
  v->set_ticket("T-9");
  v->set_requested_by("frank");
  v->mutable_approval()->set_approved_by("dana");
  v->mutable_approval()->set_reason("checked");
  v->set_transform_version("3f1c");
  v1::InputVersion* in = v->add_inputs();
  in->set_dataset("daily");
  in->set_partition("2025-01-15");
  in->set_fingerprint("9399ff");
  in->set_rows(4);
  v->set_rows(1);
  v->set_output_fingerprint("aa01");
  v1::PartitionVersion* old = h.add_versions();
  old->set_backfill_id("bf-1");
  old->set_state(v1::BACKFILL_STATE_ROLLED_BACK);
  old->set_kind("rollback");
  old->set_reason("wrong");
  old->set_requested_by("erin");
  old->set_rows(0);
  old->set_output_fingerprint("e0");
  EXPECT_EQ(FormatPartitionHistory(h),
            "monthly 2025-01: 2 versions, newest first\n"
            "STALE: input daily/2025-01-15 changed: republished by bf-9 with "
            "--no-downstream; recompute it with backfillctl submit monthly "
            "--auto --reason \"...\"\n"
            "\n"
            "#1  2025-02-01T00:00:00.5Z  bf-8  SUCCEEDED  backfill  (current)\n"
            "    reason        late orders\n"
            "    ticket        T-9\n"
            "    requested by  frank\n"
            "    approved by   dana: checked\n"
            "    transform     3f1c\n"
            "    inputs        daily/2025-01-15  9399ff  (4 rows)\n"
            "    rows          1\n"
            "    fingerprint   aa01\n"
            "\n"
            "#2  -  bf-1  ROLLED_BACK  rollback\n"
            "    reason        wrong\n"
            "    rolled back by erin\n"
            "    transform     -\n"
            "    inputs        -\n"
            "    rows          0\n"
            "    fingerprint   e0\n");

  v1::ExplainPartitionResponse never;
  never.set_dataset("monthly");
  never.set_partition("2025-02");
  EXPECT_EQ(FormatPartitionHistory(never),
            "monthly 2025-02: never published by backfilld (no lineage "
            "recorded)\n");
}

}  // namespace
}  // namespace cli
}  // namespace backfill
