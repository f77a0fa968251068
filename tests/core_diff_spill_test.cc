// Tests of DiffSpill (core/run/diff_spill.h): pages set aside from several
// threads in any order read back by index, each exactly as it was put
// (every field, doubles to the bit), as often as rewound; the file has no
// name from the start; a directory that cannot hold it is refused with its
// name.

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/run/diff_spill.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/diff_text.h"

namespace backfill {
namespace core_diff_spill_test {
namespace {

using ::testing::HasSubstr;

std::string Describe(size_t dataset, const std::vector<PartitionDiff>& page) {
  std::string out = absl::StrCat("dataset ", dataset, "\n");
  for (const PartitionDiff& p : page)
    absl::StrAppend(&out, testing::PartitionDiffText(p), "\n");
  return out;
}

// Page `index`: 1 + index % 50 partitions of dataset index % 3, with
// every kind of value.
std::vector<PartitionDiff> PageOf(size_t index) {
  std::vector<PartitionDiff> out;
  for (size_t i = 0; i <= index % 50; ++i) {
    PartitionDiff p;
    p.dataset = absl::StrCat("dataset_", index % 3);
    p.partition = absl::StrFormat("%04d-%03d", index, i);
    p.rows_before = static_cast<int64_t>(index * 1000 + i);
    p.rows_after = -static_cast<int64_t>(i);  // never so, but kept
    p.added = int64_t{1} << 40;
    p.removed = i;
    p.changed = INT64_MAX;
    p.unchanged = INT64_MIN;
    p.measures = {{"revenue", 0.1 + 0.2 * i, -1e-300},
                  {"", 1.0 / 3, static_cast<double>(index)}};
    if (i % 7 == 0) {
      p.samples = {{DiffChange::kChanged,
                    {"'k'", absl::StrCat(i)},
                    {"12.5", "NULL", ""},
                    {"'it''s'", "\xc3\xa9t\xc3\xa9", std::string("a\0b", 3)}},
                   {DiffChange::kAdded, {}, {}, {"1"}},
                   {DiffChange::kRemoved, {"x"}, {"2"}, {}}};
    }
    if (i == 3) p.error = "no such column: total";
    out.push_back(std::move(p));
  }
  return out;
}

class DiffSpillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/diff_spill_XXXXXX";
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
};

TEST_F(DiffSpillTest, PagesPutInAnyOrderReadBackByIndexAsPut) {
  absl::StatusOr<std::unique_ptr<DiffSpill>> spill = DiffSpill::Create(dir_);
  ASSERT_TRUE(spill.ok()) << spill.status();
  // Unnamed from the start.
  EXPECT_TRUE(std::filesystem::is_empty(dir_));

  // Pages 0..199 but 17, from four threads, each from its end backwards.
  constexpr size_t kPages = 200;
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = kPages; i-- > 0;) {
        if (i % 4 != t || i == 17) continue;
        absl::Status put = (*spill)->Put(i, i % 3, PageOf(i));
        EXPECT_TRUE(put.ok()) << put;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_GT((*spill)->bytes(), 0);
  EXPECT_EQ((*spill)->Put(5, 0, PageOf(5)).code(),
            absl::StatusCode::kFailedPrecondition);

  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    ASSERT_TRUE((*spill)->Rewind().ok());
    for (size_t i = 0; i < kPages; ++i) {
      if (i == 17) continue;  // never put: skipped
      size_t dataset = 99;
      std::vector<PartitionDiff> page;
      absl::StatusOr<bool> next = (*spill)->Next(&dataset, &page);
      ASSERT_TRUE(next.ok()) << next.status();
      ASSERT_TRUE(*next) << i;
      ASSERT_EQ(Describe(dataset, page), Describe(i % 3, PageOf(i))) << i;
    }
    size_t dataset = 0;
    std::vector<PartitionDiff> page;
    absl::StatusOr<bool> end = (*spill)->Next(&dataset, &page);
    ASSERT_TRUE(end.ok()) << end.status();
    EXPECT_FALSE(*end);
  }
  spill->reset();
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

TEST_F(DiffSpillTest, AnEmptySpillHasNoPage) {
  absl::StatusOr<std::unique_ptr<DiffSpill>> spill = DiffSpill::Create(dir_);
  ASSERT_TRUE(spill.ok()) << spill.status();
  ASSERT_TRUE((*spill)->Rewind().ok());
  size_t dataset = 0;
  std::vector<PartitionDiff> page;
  absl::StatusOr<bool> next = (*spill)->Next(&dataset, &page);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(*next);
  // An empty page is a page.
  ASSERT_TRUE((*spill)->Put(0, 2, {}).ok());
  ASSERT_TRUE((*spill)->Rewind().ok());
  next = (*spill)->Next(&dataset, &page);
  ASSERT_TRUE(next.ok() && *next);
  EXPECT_EQ(dataset, 2u);
  EXPECT_TRUE(page.empty());
}

TEST_F(DiffSpillTest, ADirectoryThatCannotHoldItIsNamed) {
  const std::string missing = dir_ + "/missing";
  absl::StatusOr<std::unique_ptr<DiffSpill>> spill = DiffSpill::Create(missing);
  ASSERT_FALSE(spill.ok());
  EXPECT_EQ(spill.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(spill.status().message(), HasSubstr(missing));
}

}  // namespace
}  // namespace core_diff_spill_test
}  // namespace backfill
