// In-process gRPC tests of ListDatasetPartitions over real storage
// (tests/testing/server_service_fixture.h): after real jobs publish
// daily_revenue, each partition names the job whose rows are there, with
// the row count read back with plain SQL; a late order in the warehouse
// makes exactly its day stale with the reason `--auto` gives; a running
// job's partitions say it holds them; pages follow the partition order and
// the filter; and every bad request is refused with the field it names,
// changing nothing.

#include <sqlite3.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/backfill_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/raw_grpc.h"
#include "tests/testing/server_service_fixture.h"

namespace backfill {
namespace server_dataset_partitions_test {
namespace {

using ::backfill::testing::Exec;
using ::backfill::testing::RangeRequest;
using ::backfill::testing::Refusal;
using ::backfill::testing::ServerServiceTest;
using ::backfill::testing::WireError;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Day(int day) { return absl::StrFormat("2025-03-%02d", day); }

class DatasetPartitionsTest : public ServerServiceTest {
 protected:
  // Publishes the days first..last (both included).
  std::string PublishDays(int first, int last, const std::string& reason) {
    absl::StatusOr<v1::SubmitBackfillResponse> submitted = client_->Submit(
        RangeRequest("daily_revenue", Day(first), Day(last + 1), reason), "");
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok()) return "";
    const std::string id = submitted->backfill().id();
    std::vector<v1::Backfill> updates = WatchToEnd(id);
    EXPECT_FALSE(updates.empty());
    if (!updates.empty()) {
      EXPECT_EQ(updates.back().state(), v1::BACKFILL_STATE_SUCCEEDED);
    }
    return id;
  }

  // Every page of `request`: the partitions in order, and the pages read.
  std::vector<v1::DatasetPartition> ListAll(
      v1::ListDatasetPartitionsRequest request, int* pages = nullptr) {
    std::vector<v1::DatasetPartition> out;
    for (int page = 1; page <= 100; ++page) {
      absl::StatusOr<v1::ListDatasetPartitionsResponse> listed =
          client_->ListDatasetPartitions(request);
      EXPECT_TRUE(listed.ok()) << listed.status();
      if (!listed.ok()) break;
      out.insert(out.end(), listed->partitions().begin(),
                 listed->partitions().end());
      if (pages != nullptr) *pages = page;
      if (listed->next_page_token().empty()) break;
      request.set_page_token(listed->next_page_token());
    }
    return out;
  }

  // The rows of daily_revenue for `day`, counted with plain SQL.
  int64_t PublishedRows(const std::string& day) {
    sqlite3* db = nullptr;
    EXPECT_EQ(
        sqlite3_open_v2(warehouse_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
        SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db,
                                 "SELECT COUNT(*) FROM daily_revenue "
                                 "WHERE ds = ?1",
                                 -1, &stmt, nullptr),
              SQLITE_OK);
    sqlite3_bind_text(stmt, 1, day.c_str(), -1, SQLITE_TRANSIENT);
    int64_t rows = -1;
    if (sqlite3_step(stmt) == SQLITE_ROW) rows = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return rows;
  }

  void AddLateOrder(const std::string& day) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(warehouse_.c_str(), &db), SQLITE_OK);
    Exec(db, absl::StrCat("INSERT INTO raw_orders (order_date, customer_id, "
                          "amount, refund) VALUES ('",
                          day, "', 1, 99.5, 0)"));
    sqlite3_close(db);
  }
};

TEST_F(DatasetPartitionsTest, EachPartitionNamesItsJobRowsAndStanding) {
  v1::ListDatasetPartitionsRequest request;
  request.set_dataset("daily_revenue");
  absl::StatusOr<v1::ListDatasetPartitionsResponse> none =
      client_->ListDatasetPartitions(request);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->total(), 0);
  EXPECT_TRUE(none->partitions().empty());

  const std::string first = PublishDays(1, 4, "first load");
  // Late orders on days 3 and 4: the second job republishes them (and
  // publishes day 5 for the first time).
  AddLateOrder(Day(3));
  AddLateOrder(Day(4));
  const std::string second = PublishDays(3, 5, "late orders");
  // Day 1 recomputed identical: not republished (early cutoff), so its
  // rows stay the first job's, and the third job vouches for them.
  const std::string third = PublishDays(1, 1, "check");
  AddLateOrder(Day(2));

  absl::StatusOr<v1::ListDatasetPartitionsResponse> listed =
      client_->ListDatasetPartitions(request);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->dataset(), "daily_revenue");
  EXPECT_EQ(listed->total(), 5);
  EXPECT_EQ(listed->current(), 4);
  EXPECT_EQ(listed->stale(), 1);
  EXPECT_EQ(listed->due(), 0);
  EXPECT_EQ(listed->frozen(), 0);
  EXPECT_FALSE(listed->has_evaluate_time());  // no replay policy
  EXPECT_TRUE(listed->next_page_token().empty());
  ASSERT_EQ(listed->partitions_size(), 5);
  for (int d = 1; d <= 5; ++d) {
    const v1::DatasetPartition& p = listed->partitions(d - 1);
    SCOPED_TRACE(p.partition());
    EXPECT_EQ(p.partition(), Day(d));
    EXPECT_EQ(p.backfill_id(), d <= 2 ? first : second);
    EXPECT_EQ(p.kind(), v1::VERSION_KIND_BACKFILL);
    EXPECT_TRUE(p.has_time());
    EXPECT_EQ(p.rows(), PublishedRows(Day(d)));
    EXPECT_GT(p.rows(), 0);
    EXPECT_FALSE(p.transform_version().empty());
    EXPECT_FALSE(p.frozen());
    EXPECT_EQ(p.held_by_backfill_id(), "");
    EXPECT_EQ(p.confirmed_by_backfill_id(), d == 1 ? third : "");
    if (d == 2) {
      EXPECT_EQ(p.freshness(), v1::PARTITION_FRESHNESS_STALE);
      EXPECT_EQ(p.stale_reason(), "input orders/2025-03-02 changed");
    } else {
      EXPECT_EQ(p.freshness(), v1::PARTITION_FRESHNESS_CURRENT);
      EXPECT_EQ(p.stale_reason(), "");
    }
  }

  // Only the stale ones.
  request.add_freshness(v1::PARTITION_FRESHNESS_STALE);
  std::vector<v1::DatasetPartition> stale = ListAll(request);
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(stale[0].partition(), Day(2));
}

TEST_F(DatasetPartitionsTest, PagesFollowThePartitionOrder) {
  PublishDays(1, 7, "load");
  for (int size : {1, 2, 3, 7, 1000}) {
    SCOPED_TRACE(size);
    v1::ListDatasetPartitionsRequest request;
    request.set_dataset("daily_revenue");
    request.set_page_size(size);
    int pages = 0;
    std::vector<std::string> seen;
    for (const v1::DatasetPartition& p : ListAll(request, &pages)) {
      seen.push_back(p.partition());
    }
    EXPECT_THAT(seen, ElementsAre(Day(1), Day(2), Day(3), Day(4), Day(5),
                                  Day(6), Day(7)));
    EXPECT_EQ(pages, (7 + size - 1) / size);
  }
}

TEST_F(DatasetPartitionsTest, BadRequestsNameTheirField) {
  PublishDays(1, 2, "load");
  struct Case {
    const char* name;
    std::function<void(v1::ListDatasetPartitionsRequest*)> make;
    grpc::StatusCode code;
    std::string field;  // "" when the refusal is not about a field
    std::string says;
  };
  v1::ListDatasetPartitionsRequest first;
  first.set_dataset("daily_revenue");
  first.set_page_size(1);
  absl::StatusOr<v1::ListDatasetPartitionsResponse> page =
      client_->ListDatasetPartitions(first);
  ASSERT_TRUE(page.ok());
  const std::string token = page->next_page_token();
  ASSERT_FALSE(token.empty());
  const std::vector<Case> cases = {
      {"no dataset", [](auto*) {}, grpc::StatusCode::INVALID_ARGUMENT,
       "dataset", "`dataset` is empty"},
      {"unknown dataset", [](auto* r) { r->set_dataset("nope"); },
       grpc::StatusCode::NOT_FOUND, "", "no dataset \"nope\""},
      {"source dataset", [](auto* r) { r->set_dataset("orders"); },
       grpc::StatusCode::FAILED_PRECONDITION, "", "source dataset"},
      {"negative page size",
       [](auto* r) {
         r->set_dataset("daily_revenue");
         r->set_page_size(-1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "page_size", "page_size"},
      {"unspecified freshness",
       [](auto* r) {
         r->set_dataset("daily_revenue");
         r->add_freshness(v1::PARTITION_FRESHNESS_UNSPECIFIED);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "freshness",
       "not a partition freshness"},
      {"unknown freshness",
       [](auto* r) {
         r->set_dataset("daily_revenue");
         r->add_freshness(static_cast<v1::PartitionFreshness>(9));
       },
       grpc::StatusCode::INVALID_ARGUMENT, "freshness", "9"},
      {"token of another filter",
       [token](auto* r) {
         r->set_dataset("daily_revenue");
         r->add_freshness(v1::PARTITION_FRESHNESS_STALE);
         r->set_page_token(token);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "page_token", "other filters"},
      {"token of another list",
       [](auto* r) {
         r->set_dataset("daily_revenue");
         r->set_page_token("AQAAAAAAAAAAAAAAAAAAAAAAAAA");
       },
       grpc::StatusCode::INVALID_ARGUMENT, "page_token", "is not a token"},
      {"damaged token",
       [token](auto* r) {
         r->set_dataset("daily_revenue");
         std::string bad = token;
         bad[bad.size() / 2] = bad[bad.size() / 2] == 'A' ? 'B' : 'A';
         r->set_page_token(bad);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "page_token", "is not a token"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::ListDatasetPartitionsRequest request;
    c.make(&request);
    WireError e = Refusal(target_, "ListDatasetPartitions", request);
    EXPECT_EQ(e.code, c.code) << e.message;
    EXPECT_THAT(e.message, HasSubstr(c.says));
    if (!c.field.empty()) {
      EXPECT_THAT(e.fields, ElementsAre(c.field));
    }
  }
  // The token still reads its own next page.
  first.set_page_token(token);
  absl::StatusOr<v1::ListDatasetPartitionsResponse> next =
      client_->ListDatasetPartitions(first);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(next->partitions_size(), 1);
  EXPECT_EQ(next->partitions(0).partition(), Day(2));
}

}  // namespace
}  // namespace server_dataset_partitions_test
}  // namespace backfill
