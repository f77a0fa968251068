// Page tokens (core/governance/page_token.h) and the paged job and partition
// lists over the in-memory store (core/governance/job_listing.h).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/time/time.h"
#include "core/base/error_details.h"
#include "core/governance/job_listing.h"
#include "core/governance/page_token.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_page_token_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(PageTokenTest, RoundTripsTheListFiltersAndPosition) {
  const uint64_t hash = FilterHash(PageList::kJobs, {"daily", "QUEUED"});
  for (int64_t position :
       {int64_t{0}, int64_t{1}, int64_t{42}, int64_t{1} << 40, INT64_MAX}) {
    const std::string token = EncodePageToken(PageList::kJobs, hash, position);
    EXPECT_LE(token.size(), 32u);
    absl::StatusOr<int64_t> decoded =
        DecodePageToken(PageList::kJobs, token, hash, "states and dataset");
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, position);
  }
}

TEST(PageTokenTest, FilterHashesDifferWithEveryFilter) {
  const uint64_t base = FilterHash(PageList::kJobs, {"a", "b"});
  EXPECT_EQ(base, FilterHash(PageList::kJobs, {"a", "b"}));
  EXPECT_NE(base, FilterHash(PageList::kJobs, {"a", "c"}));
  EXPECT_NE(base, FilterHash(PageList::kJobs, {"ab", ""}));
  EXPECT_NE(base, FilterHash(PageList::kJobs, {"a", "b", ""}));
  EXPECT_NE(base, FilterHash(PageList::kPartitions, {"a", "b"}));
}

TEST(PageTokenTest, OtherFiltersAreRefusedNamingThem) {
  const std::string token = EncodePageToken(
      PageList::kJobs, FilterHash(PageList::kJobs, {"daily"}), 7);
  absl::StatusOr<int64_t> decoded = DecodePageToken(
      PageList::kJobs, token, FilterHash(PageList::kJobs, {"hourly"}),
      "states and dataset");
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded.status().message(),
              HasSubstr("`page_token` was returned for other filters: send "
                        "the same states and dataset"));
  const ErrorDetails details = DetailsOf(decoded.status());
  EXPECT_EQ(details.reason, "PAGE_TOKEN_INVALID");
  ASSERT_EQ(details.field_violations.size(), 1u);
  EXPECT_EQ(details.field_violations[0].field, "page_token");
}

TEST(PageTokenTest, DamagedOrForeignTokensAreRefused) {
  const uint64_t hash = FilterHash(PageList::kJobs, {""});
  const std::string token = EncodePageToken(PageList::kJobs, hash, 5);
  std::vector<std::string> bad = {
      "",
      "=",
      token + "==",
      token.substr(1),
      token + token,
      std::string(1000, 'x'),
      "a b",
      EncodePageToken(PageList::kPartitions, hash, 5),
      EncodePageToken(PageList::kDiff, hash, 5),
      EncodePageToken(PageList::kAudit, hash, 5),
      // The bare numbers DiffBackfill and ListAuditEvents once returned.
      "5",
      "10",
  };
  for (size_t i = 0; i < token.size(); ++i) {
    for (char c : {'A', 'z', '-', '_', '0'}) {
      if (token[i] == c) continue;
      std::string changed = token;
      changed[i] = c;
      bad.push_back(changed);
    }
  }
  // A valid layout with another version byte.
  std::string raw;
  ASSERT_TRUE(absl::WebSafeBase64Unescape(token, &raw));
  raw[0] = 2;
  bad.push_back(absl::WebSafeBase64Escape(raw));
  for (const std::string& t : bad) {
    absl::StatusOr<int64_t> decoded =
        DecodePageToken(PageList::kJobs, t, hash, "states and dataset");
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument)
        << absl::CHexEscape(t);
    EXPECT_THAT(decoded.status().message(),
                HasSubstr("is not a token `ListBackfills` returned"));
    EXPECT_EQ(DetailsOf(decoded.status()).reason, "PAGE_TOKEN_INVALID");
  }
  // Below the least position the list hands out.
  const std::string zero = EncodePageToken(PageList::kJobs, hash, 0);
  EXPECT_FALSE(
      DecodePageToken(PageList::kJobs, zero, hash, "x", /*min_position=*/1)
          .ok());
  EXPECT_FALSE(DecodePageToken(PageList::kJobs,
                               EncodePageToken(PageList::kJobs, hash, -1), hash,
                               "x")
                   .ok());
}

Job MakeJob(const std::string& dataset, int partitions) {
  Job job;
  job.request.dataset = dataset;
  job.request.reason = "test";
  DatasetPlan plan;
  plan.dataset = dataset;
  for (int i = 0; i < partitions; ++i) {
    plan.partitions.push_back("2025-01-0" + std::to_string(i + 1));
    plan.partition_reasons.push_back("requested");
  }
  job.plan.datasets = {plan};
  return job;
}

std::vector<std::string> Ids(const JobPage& page) {
  std::vector<std::string> ids;
  for (const Job& j : page.jobs) ids.push_back(j.id);
  return ids;
}

TEST(JobListingTest, PagesAreKeyedOnTheLastJob) {
  testing::InMemoryStateStore store;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(
        store.CreateJob(MakeJob(i % 2 ? "b" : "a", 2), absl::Now()).ok());
  }
  JobPageQuery query;
  query.page_size = 2;
  absl::StatusOr<JobPage> page = ReadJobPage(store, query);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(Ids(*page), ElementsAre("bf-5", "bf-4"));
  EXPECT_THAT(page->jobs[0].plan.datasets[0].partitions, IsEmpty());  // basic
  EXPECT_EQ(page->jobs[0].plan.datasets[0].partition_count, 2);
  // A new job does not shift the next page.
  ASSERT_TRUE(store.CreateJob(MakeJob("a", 1), absl::Now()).ok());
  query.page_token = page->next_page_token;
  page = ReadJobPage(store, query);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(Ids(*page), ElementsAre("bf-3", "bf-2"));
  query.page_token = page->next_page_token;
  page = ReadJobPage(store, query);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(Ids(*page), ElementsAre("bf-1"));
  EXPECT_EQ(page->next_page_token, "");

  // The token after a job of a page cut short.
  JobPageQuery full;
  full.view = JobView::kFull;
  full.page_size = 3;
  page = ReadJobPage(store, full);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->jobs[0].plan.datasets[0].partitions.size(), 1u);
  full.page_token = JobPageTokenAfter(full, page->jobs[0]);
  page = ReadJobPage(store, full);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(Ids(*page), ElementsAre("bf-5", "bf-4", "bf-3"));

  JobPageQuery bad;
  bad.page_size = 0;
  EXPECT_EQ(ReadJobPage(store, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(JobListingTest, PartitionPagesInPlanOrder) {
  testing::InMemoryStateStore store;
  ASSERT_TRUE(store.CreateJob(MakeJob("a", 5), absl::Now()).ok());
  PartitionPageQuery query;
  query.job_id = "bf-1";
  query.page_size = 2;
  std::vector<std::string> seen;
  for (int pages = 0; pages < 10; ++pages) {
    absl::StatusOr<PartitionPage> page = ReadPartitionPage(store, query);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const PartitionTask& t : page->partitions) {
      seen.push_back(t.partition + " " + t.reason);
    }
    if (page->next_page_token.empty()) break;
    query.page_token = page->next_page_token;
  }
  EXPECT_THAT(seen, ElementsAre("2025-01-01 requested", "2025-01-02 requested",
                                "2025-01-03 requested", "2025-01-04 requested",
                                "2025-01-05 requested"));

  PartitionPageQuery other = query;
  other.dataset = "b";
  other.page_token.clear();
  absl::Status not_planned = ReadPartitionPage(store, other).status();
  EXPECT_EQ(not_planned.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_planned.message(),
              HasSubstr("dataset: \"b\" is not in the plan of job bf-1 (it "
                        "has: a)"));
  other.job_id = "bf-2";
  other.dataset.clear();
  EXPECT_EQ(ReadPartitionPage(store, other).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace core_page_token_test
}  // namespace backfill
