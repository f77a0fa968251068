// The StateStore contract suite (tests/testing/state_store_contract.h): a
// job's diff handed to the store a page at a time (ReplaceJobDiff with
// DiffPages) — in any order, across the edges of pages, of several datasets
// with samples, measures and a failed partition — reads back exactly as the
// same diff given whole; pages that fail midway leave the diff stored
// before (or none) exactly as it was.

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/ports/state_store.h"
#include "gtest/gtest.h"
#include "tests/testing/diff_text.h"
#include "tests/testing/state_store_contract.h"

namespace backfill {
namespace storage_state_store_contract_diff_pages_test {
namespace {

using testing::MakeJob;
using testing::StateStoreContractTest;
using testing::T;

// One page: the index of its dataset in the header, and its partitions.
using Page = std::pair<size_t, std::vector<PartitionDiff>>;

// Hands `pages` over in their order; fails with `failure` when asked for
// page `fail_at` (never when it is past the end).
class ListedPages : public DiffPages {
 public:
  explicit ListedPages(std::vector<Page> pages, size_t fail_at = SIZE_MAX,
                       absl::Status failure = absl::OkStatus())
      : pages_(std::move(pages)),
        fail_at_(fail_at),
        failure_(std::move(failure)) {}

  absl::Status Rewind() override {
    at_ = 0;
    ++rewinds_;
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Next(size_t* dataset,
                            std::vector<PartitionDiff>* partitions) override {
    if (at_ == fail_at_) return failure_;
    if (at_ >= pages_.size()) return false;
    *dataset = pages_[at_].first;
    *partitions = pages_[at_].second;
    ++at_;
    return true;
  }

  int rewinds() const { return rewinds_; }

 private:
  const std::vector<Page> pages_;
  const size_t fail_at_;
  const absl::Status failure_;
  size_t at_ = 0;
  int rewinds_ = 0;
};

// Partition `i` of a dataset: names in the order of their numbers.
std::string Part(int i) { return absl::StrFormat("p%05d", i); }

// A diff of three datasets: one with a key and two measures (2,500
// partitions, every tenth with samples), one without a key (1,100
// partitions, one of them failed) and one with no partition. `salt`
// changes every count and total.
JobDiff BigDiff(const std::string& job_id, absl::Time at, int salt) {
  JobDiff diff;
  diff.job_id = job_id;
  diff.computed_at = at;
  DatasetDiff keyed;
  keyed.dataset = "daily_revenue";
  keyed.columns.by_key = true;
  keyed.columns.key = {"ds", "region"};
  keyed.columns.values = {"revenue", "orders", "note"};
  keyed.columns.measures = {"revenue", "orders"};
  for (int i = 0; i < 2500; ++i) {
    PartitionDiff p;
    p.partition = Part(i);
    p.rows_before = (i * 3 + salt) % 11;
    p.rows_after = (i + salt) % 13;
    p.added = std::max<int64_t>(0, p.rows_after - p.rows_before);
    p.removed = std::max<int64_t>(0, p.rows_before - p.rows_after);
    p.changed = i % 3;
    p.unchanged = std::min(p.rows_before, p.rows_after);
    p.measures = {{"revenue", i * 0.1 + salt, i / 3.0},
                  {"orders", static_cast<double>(i), i + 0.5 * salt}};
    if (i % 10 == 0) {
      p.samples = {{DiffChange::kChanged,
                    {absl::StrCat("'", Part(i), "'"), "'north'"},
                    {"12.5", "3", "NULL"},
                    {absl::StrCat(i + salt), "3", "'it''s: 3:1'"}},
                   {DiffChange::kAdded, {"'x'", "'y'"}, {}, {"1", "2", "'z'"}}};
    }
    keyed.partitions.push_back(std::move(p));
  }
  DatasetDiff plain;
  plain.dataset = "monthly_revenue";
  plain.columns.values = {"month", "total"};
  plain.columns.measures = {"total"};
  for (int i = 0; i < 1100; ++i) {
    PartitionDiff p;
    p.partition = Part(i);
    p.rows_before = i % 4;
    p.rows_after = (i + salt) % 4;
    p.unchanged = 1;
    p.measures = {{"total", i * 1.25, i * 1.5 + salt}};
    if (i == 1023) {
      p = PartitionDiff();
      p.partition = Part(i);
      p.error = "no such column: total";
      p.measures = {{"total", 0, 0}};
    }
    plain.partitions.push_back(std::move(p));
  }
  DatasetDiff empty;
  empty.dataset = "weekly_revenue";
  diff.datasets = {keyed, plain, empty};
  return diff;
}

// `diff`'s partitions in pages of `size` (a dataset's last one shorter),
// the pages of each dataset from its last one back, the datasets' pages
// interleaved.
std::vector<Page> PagesOf(const JobDiff& diff, size_t size) {
  std::vector<std::vector<Page>> by_dataset;
  for (size_t d = 0; d < diff.datasets.size(); ++d) {
    const std::vector<PartitionDiff>& all = diff.datasets[d].partitions;
    std::vector<Page> pages;
    for (size_t at = 0; at < all.size(); at += size) {
      pages.push_back({d, std::vector<PartitionDiff>(
                              all.begin() + at,
                              all.begin() + std::min(all.size(), at + size))});
    }
    std::reverse(pages.begin(), pages.end());
    by_dataset.push_back(std::move(pages));
  }
  std::vector<Page> out;
  for (size_t k = 0;; ++k) {
    bool any = false;
    for (const std::vector<Page>& pages : by_dataset) {
      if (k < pages.size()) {
        out.push_back(pages[k]);
        any = true;
      }
    }
    if (!any) return out;
  }
}

std::string Describe(const DiffColumns& c) {
  return absl::StrCat(c.by_key, testing::ValuesText(c.key),
                      testing::ValuesText(c.values),
                      testing::ValuesText(c.measures));
}

// Everything of a stored diff but its job id, one line a partition.
std::string Describe(const std::optional<JobDiff>& diff) {
  if (!diff.has_value()) return "none";
  std::string out = absl::StrCat(absl::FormatTime(diff->computed_at), "\n");
  for (const DatasetDiff& d : diff->datasets) {
    absl::StrAppend(&out, d.dataset, " ", Describe(d.columns), "\n");
    for (const PartitionDiff& p : d.partitions) {
      absl::StrAppend(&out, "  ", testing::PartitionDiffText(p), "\n");
    }
  }
  return out;
}

std::string Describe(const std::optional<std::vector<DiffSummary>>& sums) {
  if (!sums.has_value()) return "none";
  std::string out;
  for (const DiffSummary& s : *sums) {
    absl::StrAppend(&out, s.dataset, " ", Describe(s.columns), " ",
                    s.partitions, " ", s.partitions_changed, " ",
                    s.partitions_failed, " ", s.rows_before, " ", s.rows_after,
                    " ", s.added, " ", s.removed, " ", s.changed, " ",
                    s.unchanged, " ", testing::MeasuresText(s.measures), "\n");
  }
  return out;
}

// What a reader of job `id`'s diff can read, but the job id: the diff
// with and without samples, each dataset's alone, the sums, and the diffs
// of a few partitions (PartitionDiffs, this job's).
std::string ReadDiff(StateStore* store, const std::string& id) {
  std::string out;
  for (bool samples : {true, false}) {
    absl::StatusOr<std::optional<JobDiff>> all =
        store->GetJobDiff(id, "", samples);
    EXPECT_TRUE(all.ok()) << all.status();
    if (!all.ok()) return "";
    absl::StrAppend(&out, "samples=", samples, "\n", Describe(*all));
    for (const char* dataset :
         {"daily_revenue", "monthly_revenue", "weekly_revenue"}) {
      absl::StatusOr<std::optional<JobDiff>> one =
          store->GetJobDiff(id, dataset, samples);
      EXPECT_TRUE(one.ok()) << one.status();
      if (one.ok()) absl::StrAppend(&out, dataset, ":\n", Describe(*one));
    }
  }
  absl::StatusOr<std::optional<std::vector<DiffSummary>>> sums =
      store->GetJobDiffSummary(id);
  EXPECT_TRUE(sums.ok()) << sums.status();
  if (sums.ok()) absl::StrAppend(&out, "sums:\n", Describe(*sums));
  absl::StatusOr<Job> reader = store->GetJobForReader(id, JobView::kBasic);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (reader.ok()) {
    absl::StrAppend(
        &out, "reader:\n",
        Describe(reader->diff.empty() ? std::nullopt
                                      : std::make_optional(reader->diff)));
  }
  for (const char* dataset : {"daily_revenue", "monthly_revenue"}) {
    for (int i : {0, 999, 1000, 1023, 1024, 1099, 2499}) {
      absl::StatusOr<std::map<std::string, PartitionDiff>> of =
          store->PartitionDiffs(dataset, Part(i));
      EXPECT_TRUE(of.ok()) << of.status();
      if (!of.ok()) continue;
      auto it = of->find(id);
      absl::StrAppend(
          &out, dataset, "/", Part(i), ": ",
          it == of->end() ? "none" : testing::PartitionDiffText(it->second),
          "\n");
    }
  }
  return out;
}

TEST_P(StateStoreContractTest, ADiffInPagesReadsBackAsTheSameDiffGivenWhole) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  const JobDiff whole = BigDiff("bf-1", T(5), 0);
  ASSERT_TRUE(store_->ReplaceJobDiff(whole).ok());

  JobDiff paged = whole;
  paged.job_id = "bf-2";
  ListedPages pages(PagesOf(paged, 1000));
  // Pages read before the call: the store starts them over.
  size_t dataset = 0;
  std::vector<PartitionDiff> read;
  ASSERT_TRUE(*pages.Next(&dataset, &read));
  absl::Status stored = store_->ReplaceJobDiff(HeaderOf(paged), pages);
  ASSERT_TRUE(stored.ok()) << stored;
  EXPECT_GE(pages.rewinds(), 1);

  const std::string expected = ReadDiff(store_.get(), "bf-1");
  EXPECT_EQ(ReadDiff(store_.get(), "bf-2"), expected);
  // What was read is the diff: every partition, in partition order.
  absl::StatusOr<std::optional<JobDiff>> got =
      store_->GetJobDiff("bf-2", "", true);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  ASSERT_EQ((*got)->datasets.size(), 3u);
  for (size_t d = 0; d < 3; ++d) {
    const std::vector<PartitionDiff>& want = whole.datasets[d].partitions;
    const std::vector<PartitionDiff>& have = (*got)->datasets[d].partitions;
    ASSERT_EQ(have.size(), want.size()) << d;
    for (size_t i = 0; i < want.size(); ++i) {
      PartitionDiff w = want[i];
      w.dataset = whole.datasets[d].dataset;
      ASSERT_EQ(testing::PartitionDiffText(have[i]),
                testing::PartitionDiffText(w));
    }
  }
  absl::StatusOr<std::optional<std::vector<DiffSummary>>> sums =
      store_->GetJobDiffSummary("bf-2");
  ASSERT_TRUE(sums.ok() && sums->has_value()) << sums.status();
  ASSERT_EQ((*sums)->size(), 3u);
  EXPECT_EQ((**sums)[1].partitions_failed, 1);
  EXPECT_EQ((**sums)[2].partitions, 0);
}

TEST_P(StateStoreContractTest, PagesThatFailMidwayLeaveTheDiffThatWasStored) {
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_->CreateJob(MakeJob(), T(0)).ok());
  ASSERT_TRUE(store_->ReplaceJobDiff(BigDiff("bf-1", T(5), 0)).ok());
  const std::string before = ReadDiff(store_.get(), "bf-1");
  const std::string none = ReadDiff(store_.get(), "bf-2");
  ASSERT_NE(before, none);

  const absl::Status failure = absl::UnavailableError("disk I/O error");
  for (const char* id : {"bf-1", "bf-2"}) {
    SCOPED_TRACE(id);
    const JobDiff next = BigDiff(id, T(9), 1);
    const std::vector<Page> all = PagesOf(next, 700);
    ASSERT_GT(all.size(), 4u);
    // At the first page, midway, at the last.
    for (size_t fail_at : {size_t{0}, all.size() / 2, all.size() - 1}) {
      ListedPages pages(all, fail_at, failure);
      EXPECT_EQ(store_->ReplaceJobDiff(HeaderOf(next), pages), failure);
    }
    // A page of a dataset the header does not list.
    std::vector<Page> stray = all;
    stray.insert(stray.begin() + 2, Page{3, all[0].second});
    ListedPages pages(stray);
    EXPECT_EQ(store_->ReplaceJobDiff(HeaderOf(next), pages).code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(ReadDiff(store_.get(), "bf-1"), before);
  EXPECT_EQ(ReadDiff(store_.get(), "bf-2"), none);
  absl::StatusOr<std::optional<JobDiff>> still =
      store_->GetJobDiff("bf-2", "", true);
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_FALSE(still->has_value());

  // The same pages, not failing, replace it.
  const JobDiff next = BigDiff("bf-1", T(9), 1);
  ListedPages pages(PagesOf(next, 700));
  ASSERT_TRUE(store_->ReplaceJobDiff(HeaderOf(next), pages).ok());
  JobDiff whole = next;
  whole.job_id = "bf-2";
  ASSERT_TRUE(store_->ReplaceJobDiff(whole).ok());
  EXPECT_NE(ReadDiff(store_.get(), "bf-1"), before);
  EXPECT_EQ(ReadDiff(store_.get(), "bf-1"), ReadDiff(store_.get(), "bf-2"));
}

}  // namespace
}  // namespace storage_state_store_contract_diff_pages_test
}  // namespace backfill
