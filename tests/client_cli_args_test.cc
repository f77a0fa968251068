// Unit tests of client/cli_args.h: list flags split item by item without
// trimming or dropping anything, and the UTF-8 check of text arguments.
// Expectations are the messages documented in cli_args.h and docs/cli.md.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/cli_args.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace cli {
namespace {

using ::testing::ElementsAre;

std::string ListError(const std::vector<std::string>& raw) {
  absl::StatusOr<std::vector<std::string>> items =
      SplitListFlag("--partitions", raw);
  EXPECT_FALSE(items.ok());
  if (items.ok()) return "";
  EXPECT_EQ(items.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(items.status().message());
}

TEST(SplitListFlagTest, SplitsOnCommasAcrossOccurrences) {
  absl::StatusOr<std::vector<std::string>> items =
      SplitListFlag("--partitions", {"2025-03-01,2025-03-02", "2025-03-05"});
  ASSERT_TRUE(items.ok()) << items.status();
  EXPECT_THAT(*items, ElementsAre("2025-03-01", "2025-03-02", "2025-03-05"));
}

TEST(SplitListFlagTest, KeepsItemsExactlyAsTyped) {
  // Inner spaces and non-ASCII keys are the user's business (and the
  // server's), not trimmed or changed here.
  absl::StatusOr<std::vector<std::string>> items =
      SplitListFlag("--partitions", {"new york,z\xc3\xbcrich"});
  ASSERT_TRUE(items.ok()) << items.status();
  EXPECT_THAT(*items, ElementsAre("new york", "z\xc3\xbcrich"));
}

TEST(SplitListFlagTest, RefusesEmptyItemsWithTheirPosition) {
  EXPECT_EQ(ListError({"a,,b"}), "--partitions: item 2 is empty (\"a,,b\")");
  EXPECT_EQ(ListError({"a,"}), "--partitions: item 2 is empty (\"a,\")");
  EXPECT_EQ(ListError({",a"}), "--partitions: item 1 is empty (\",a\")");
  EXPECT_EQ(ListError({""}), "--partitions: item 1 is empty (\"\")");
  EXPECT_EQ(ListError({","}), "--partitions: item 1 is empty (\",\")");
  // Counted over every occurrence of the flag.
  EXPECT_EQ(ListError({"a,b", "c,,d"}),
            "--partitions: item 4 is empty (\"c,,d\")");
}

TEST(SplitListFlagTest, RefusesLeadingOrTrailingWhitespace) {
  EXPECT_EQ(ListError({"2025-03-01 "}),
            "--partitions: item 1 \"2025-03-01 \" has leading or trailing "
            "whitespace");
  EXPECT_EQ(ListError({"2025-03-01, 2025-03-02"}),
            "--partitions: item 2 \" 2025-03-02\" has leading or trailing "
            "whitespace");
  EXPECT_EQ(ListError({"a", "b\t"}),
            "--partitions: item 2 \"b\\t\" has leading or trailing "
            "whitespace");
  EXPECT_EQ(ListError({" "}),
            "--partitions: item 1 \" \" has leading or trailing whitespace");
  EXPECT_EQ(ListError({"x\n"}),
            "--partitions: item 1 \"x\\n\" has leading or trailing "
            "whitespace");
}

TEST(CheckUtf8Test, AcceptsUtf8) {
  EXPECT_TRUE(CheckUtf8("--reason", "").ok());
  EXPECT_TRUE(CheckUtf8("--reason", "fix refunds").ok());
  EXPECT_TRUE(
      CheckUtf8("--reason",
                "r\xc3\xa9parer \xe4\xbf\xae\xe6\xad\xa3 \xf0\x9f\x93\x88")
          .ok());
}

TEST(CheckUtf8Test, RefusesInvalidUtf8NamingTheArgument) {
  absl::Status status = CheckUtf8("--reason", "fix\xff");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "--reason is not valid UTF-8 (byte 0xff at offset 3); text "
            "arguments must be UTF-8");
  // Latin-1 "é", a truncated sequence, an overlong form, a surrogate.
  EXPECT_FALSE(CheckUtf8("DATASET", "caf\xe9").ok());
  EXPECT_FALSE(CheckUtf8("DATASET", "\xe4\xbf").ok());
  EXPECT_FALSE(CheckUtf8("DATASET", "\xc0\xaf").ok());
  EXPECT_FALSE(CheckUtf8("DATASET", "\xed\xa0\x80").ok());
  EXPECT_EQ(CheckUtf8("JOB", "bf-\xc3").message(),
            "JOB is not valid UTF-8 (byte 0xc3 at offset 3); text arguments "
            "must be UTF-8");
}

}  // namespace
}  // namespace cli
}  // namespace backfill
