// Unit tests of client/governance_format.h: `--since` parsing (every
// accepted form and the refused near misses, offsets, month and year ends,
// the range a Timestamp holds), one audit event as a JSON line, and `why`'s
// text, with each version's check results. Expected seconds are worked out by
// hand from the calendar (2025-01-01T00:00:00Z is 1735689600), not by the code
// under test.

#include <cstdint>
#include <string>

#include "backfill/v1/backfill.pb.h"
#include "client/governance_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace cli {
namespace client_governance_format_test {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kJan1st2025 = 1735689600;
constexpr int64_t kDay = 86400;

struct Accepted {
  const char* text;
  int64_t seconds;
  int32_t nanos;
};

TEST(ParseSinceTest, AcceptsEachFormWithItsOffset) {
  const Accepted cases[] = {
      {"2025-01-01", kJan1st2025, 0},
      {"2025-01-01T00:00:00Z", kJan1st2025, 0},
      {"2025-01-01t00:00:00z", kJan1st2025, 0},
      {"2025-01-01T05:30:00+05:30", kJan1st2025, 0},
      {"2024-12-31T19:00:00-05:00", kJan1st2025, 0},
      {"2025-01-01T00:00:00-00:00", kJan1st2025, 0},
      {"2025-01-01T00:00:00+00:00", kJan1st2025, 0},
      // 2025-03-01 is 31 + 28 days after 2025-01-01.
      {"2025-03-01T08:00:00.25Z", kJan1st2025 + 59 * kDay + 8 * 3600,
       250000000},
      {"2025-03-01T08:00:00.1Z", kJan1st2025 + 59 * kDay + 8 * 3600, 100000000},
      // Month and year ends; 2024 is a leap year (366 days).
      {"2024-02-29", kJan1st2025 - 366 * kDay + 59 * kDay, 0},
      {"2025-02-28T23:59:59Z", kJan1st2025 + 59 * kDay - 1, 0},
      {"2025-12-31T23:59:59.123456789Z", kJan1st2025 + 365 * kDay - 1,
       123456789},
      // The ends of what a Timestamp holds.
      {"0001-01-01", -62135596800, 0},
      {"0001-01-01T01:00:00+01:00", -62135596800, 0},
      {"9999-12-31T23:59:59Z", 253402300799, 0},
      {"9999-12-31T23:59:59.999999999Z", 253402300799, 999999999},
  };
  for (const Accepted& c : cases) {
    auto ts = ParseSince(c.text);
    ASSERT_TRUE(ts.ok()) << c.text << ": " << ts.status();
    EXPECT_EQ(ts->seconds(), c.seconds) << c.text;
    EXPECT_EQ(ts->nanos(), c.nanos) << c.text;
  }
}

TEST(ParseSinceTest, RefusesEverythingElseNamingTheFlagAndTheForms) {
  const char* refused[] = {
      "",
      "yesterday",
      // Years outside 0001..9999, and digits where the forms have them.
      "0000-01-01",
      "0000-12-31T23:59:59Z",
      "+025-01-01",
      "2025-1-01",
      "2025-01-1",
      "2025/01/01",
      "2025-13-01",
      "2025-02-29",
      "2025-04-31",
      // Time of day.
      "2025-01-01T",
      "2025-01-01T00:00:00",
      "2025-01-01 00:00:00Z",
      "2025-01-01T0:00:00Z",
      "2025-01-01T+1:00:00Z",
      "2025-01-01T00:+0:00Z",
      "2025-01-01T00:00:-1Z",
      "2025-01-01T00-00-00Z",
      "2025-01-01T24:00:00Z",
      "2025-01-01T00:60:00Z",
      // Fractions of 1 to 9 digits only.
      "2025-01-01T00:00:00.Z",
      "2025-01-01T00:00:00.1234567890Z",
      "2025-01-01T00:00:00.1234567890123Z",
      "2025-01-01T00:00:00,5Z",
      // Zones.
      "2025-01-01Z",
      "2025-01-01T00:00:00ZZ",
      "2025-01-01T00:00:00+5:30",
      "2025-01-01T00:00:00+05:3a",
      "2025-01-01T00:00:00+0530",
      "2025-01-01T00:00:00+05:30:00",
      "2025-01-01T00:00:00 +05:30",
      "2025-01-01T00:00:00UTC",
      // Out of what a Timestamp holds once the offset is applied.
      "0001-01-01T00:00:00+01:00",
      "9999-12-31T23:59:59-01:00",
  };
  for (const char* text : refused) {
    auto ts = ParseSince(text);
    EXPECT_EQ(ts.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(ts.status().message(), HasSubstr("--since")) << text;
    EXPECT_THAT(ts.status().message(), HasSubstr("YYYY-MM-DD")) << text;
  }
}

TEST(AuditEventJsonLineTest, OneLineOfProtoNamesWithEveryField) {
  v1::AuditEvent event;
  event.set_seq(7);
  event.set_backfill_id("bf-2");
  event.set_to_state(v1::BACKFILL_STATE_QUEUED);
  event.set_message("queued: 1 partitions in 1 dataset(s)\nsecond line");
  // 2025-01-02T10:03:57.9Z.
  event.mutable_time()->set_seconds(kJan1st2025 + kDay + 10 * 3600 + 3 * 60 +
                                    57);
  event.mutable_time()->set_nanos(900000000);
  auto line = AuditEventJsonLine(event);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line,
            "{\"seq\":\"7\",\"backfill_id\":\"bf-2\",\"from_state\":"
            "\"BACKFILL_STATE_UNSPECIFIED\",\"to_state\":\"BACKFILL_STATE_"
            "QUEUED\",\"message\":\"queued: 1 partitions in 1 dataset(s)\\n"
            "second "
            "line\",\"subject\":\"\",\"time\":\"2025-01-02T10:03:57.900Z\"}\n");
}

TEST(FormatPartitionHistoryTest, StaleVersionsNewestFirst) {
  v1::ExplainPartitionResponse h;
  h.set_dataset("monthly");
  h.set_partition("2025-01");
  h.set_stale(true);
  // In the API's terms; the CLI shows its flag.
  h.set_stale_reason(
      "input daily/2025-01-15 changed: republished by bf-9 with "
      "`exclude_downstream`");
  v1::PartitionVersion* v = h.add_versions();
  v->mutable_publish_time()->set_seconds(kJan1st2025 + 31 * kDay);
  v->mutable_publish_time()->set_nanos(500000000);
  v->set_backfill_id("bf-8");
  v->set_state(v1::BACKFILL_STATE_SUCCEEDED);
  v->set_kind(v1::VERSION_KIND_BACKFILL);
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
  old->set_kind(v1::VERSION_KIND_ROLLBACK);
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

TEST(FormatPartitionHistoryTest, ChecksOneLinePerResultSamplesEscaped) {
  v1::ExplainPartitionResponse h;
  h.set_dataset("daily");
  h.set_partition("2025-01-06");
  v1::PartitionVersion* v = h.add_versions();
  v->set_backfill_id("bf-4");
  v->set_state(v1::BACKFILL_STATE_SUCCEEDED);
  v->set_kind(v1::VERSION_KIND_BACKFILL);
  v->set_reason("refunds");
  v->set_requested_by("ann");
  v->set_transform_version("t1");
  v->set_rows(2);
  v->set_output_fingerprint("f4");
  // Passed, derived from a complete summary (no observed text).
  v1::CheckResult* c = v->add_checks();
  c->set_name("row_change");
  c->set_severity(v1::CHECK_SEVERITY_ERROR);
  c->set_partition("2025-01-06");
  c->set_passed(true);
  c->set_allowed("a change of at most 20%");
  c->set_message("passed");
  // The partition's own failure, held, with two sample rows (one with an
  // escape sequence and a newline in it).
  c = v->add_checks();
  c->set_name("no_negative");
  c->set_severity(v1::CHECK_SEVERITY_HOLD);
  c->set_partition("2025-01-06");
  c->set_passed(false);
  c->set_observed("3 rows returned");
  c->set_allowed("no row returned");
  c->set_message("the assertion returned 3 rows");
  c->add_sample_rows("(ds='2025-01-06', revenue=-4.5)");
  c->add_sample_rows("(region='\x1b[2Jeu\nx')");
  // Failures were left out: only the summary is known.
  c = v->add_checks();
  c->set_name("measure_change(revenue)");
  c->set_severity(v1::CHECK_SEVERITY_WARN);
  c->set_summary(true);
  c->set_passed(false);
  c->set_partitions_checked(400);
  c->set_partitions_failed(120);
  c->set_observed("120 of 400 partitions failed");
  // About the whole dataset: a pass with what was seen, a failure without
  // an observed text (its message instead) and without an allowed one.
  c = v->add_checks();
  c->set_name("primary_key");
  c->set_passed(true);
  c->set_observed("every staged key is unique and not NULL");
  c = v->add_checks();
  c->set_name("schema");
  c->set_severity(v1::CHECK_SEVERITY_ERROR);
  c->set_passed(false);
  c->set_message("the transform does not compile");
  // A check that looked at no partition.
  c = v->add_checks();
  c->set_name("refs");
  c->set_summary(true);
  c->set_passed(true);
  // A rollback has none: no checks line.
  v1::PartitionVersion* old = h.add_versions();
  old->set_backfill_id("bf-3");
  old->set_state(v1::BACKFILL_STATE_ROLLED_BACK);
  old->set_kind(v1::VERSION_KIND_ROLLBACK);
  old->set_reason("undo");
  old->set_requested_by("erin");
  old->set_rows(1);
  old->set_output_fingerprint("f3");
  EXPECT_EQ(
      FormatPartitionHistory(h),
      "daily 2025-01-06: 2 versions, newest first\n"
      "\n"
      "#1  -  bf-4  SUCCEEDED  backfill  (current)\n"
      "    reason        refunds\n"
      "    requested by  ann\n"
      "    transform     t1\n"
      "    inputs        -\n"
      "    rows          2\n"
      "    fingerprint   f4\n"
      "    checks        row_change: passed\n"
      "                  no_negative (hold): FAILED: observed 3 rows "
      "returned; allowed no row returned\n"
      "                    e.g. (ds='2025-01-06', revenue=-4.5)\n"
      "                    e.g. (region='\\x1b[2Jeu\\nx')\n"
      "                  measure_change(revenue) (warn): 120 of 400 "
      "partitions failed (this partition's outcome not kept)\n"
      "                  primary_key (whole dataset): passed: every staged "
      "key is unique and not NULL\n"
      "                  schema (whole dataset, error): FAILED: the "
      "transform does not compile\n"
      "                  refs: no partition checked\n"
      "\n"
      "#2  -  bf-3  ROLLED_BACK  rollback\n"
      "    reason        undo\n"
      "    rolled back by erin\n"
      "    transform     -\n"
      "    inputs        -\n"
      "    rows          1\n"
      "    fingerprint   f3\n");
}

}  // namespace
}  // namespace client_governance_format_test
}  // namespace cli
}  // namespace backfill
