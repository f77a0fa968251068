// In-process gRPC tests of the paged lists and of the views of a job:
// ListBackfills (pages keyed on the last job, stable while jobs are
// submitted between pages; filters; tokens refused with other filters or
// when tampered with; page size bounds; a cap on a page's bytes), the
// BASIC and FULL views of GetBackfill, ListBackfills and WatchBackfill
// (and their defaults), and ListPartitions. A real SqliteStateStore and
// SqliteEngine on a temporary directory, a real BackfillManager, the
// service on a gRPC server at 127.0.0.1:0, and the real BackfillClient.

#include <sqlite3.h>
#include <stdlib.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "client/backfill_client.h"
#include "core/base/clock.h"
#include "core/model/pipeline_loader.h"
#include "core/run/backfill_manager.h"
#include "core/run/job_observer.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/backfill_service_impl.h"
#include "storage/sqlite/sqlite_engine.h"
#include "storage/sqlite/state/sqlite_state_store.h"
#include "tests/testing/revenue_pipeline.h"

namespace backfill {
namespace server_listing_test {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int kDays = 7;  // 2025-03-01 .. 2025-03-07

std::string Day(int day) { return absl::StrFormat("2025-03-%02d", day); }

void Exec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << sql << ": " << (error ? error : "");
  sqlite3_free(error);
}

// Orders on every day, six customers in three regions.
void CreateWarehouse(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::string sql =
      "CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date "
      "TEXT NOT NULL, customer_id INTEGER NOT NULL, amount REAL NOT NULL, "
      "refund REAL NOT NULL);"
      "CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY, region "
      "TEXT NOT NULL);"
      "BEGIN;";
  for (int c = 0; c < 6; ++c) {
    absl::StrAppend(&sql, "INSERT INTO dim_customers VALUES (", c, ", '",
                    c % 3 == 0 ? "emea" : (c % 3 == 1 ? "amer" : "apac"),
                    "');");
  }
  for (int day = 1; day <= kDays; ++day) {
    for (int i = 0; i < 3 + day; ++i) {
      absl::StrAppendFormat(&sql,
                            "INSERT INTO raw_orders (order_date, customer_id, "
                            "amount, refund) VALUES ('%s', %d, %d, 0);",
                            Day(day), (day + i) % 6, 10 * (i + 1) + day);
    }
  }
  absl::StrAppend(&sql, "COMMIT;");
  Exec(db, sql);
  sqlite3_close(db);
}

class ServerListingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl =
        (fs::temp_directory_path() / "backfill-listing-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    const std::string warehouse = (fs::path(dir_) / "warehouse.db").string();
    ASSERT_NO_FATAL_FAILURE(CreateWarehouse(warehouse));

    // daily_revenue with two dependents (daily_total by day, region_totals
    // unpartitioned), and bad_daily, whose jobs fail.
    absl::StatusOr<Catalog> catalog = LoadPipelineTexts(
        {{"pipeline.yaml",
          fixtures::RevenuePipelineYaml(
              "", fixtures::RevenueDependentsYaml() +
                      fixtures::OutOfPartitionDatasetYaml("bad_daily"))}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::make_unique<Catalog>(*std::move(catalog));
    auto store = SqliteStateStore::Open((fs::path(dir_) / "state.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto engine = SqliteEngine::Open(warehouse, 4);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);

    ManagerOptions options;
    options.workers = 2;
    options.max_attempts = 1;
    options.retry_backoff = absl::Milliseconds(10);
    manager_ = std::make_unique<BackfillManager>(catalog_.get(), store_.get(),
                                                 engine_.get(), &clock_,
                                                 &observer_, options);
    ASSERT_TRUE(manager_->Start().ok());
    api_ = std::make_unique<BackfillApi>(
        manager_.get(), absl::Milliseconds(200), max_page_bytes_, limits_);
    service_ = std::make_unique<BackfillServiceImpl>(api_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    client_ = BackfillClient::Connect(absl::StrCat("127.0.0.1:", port));
    client_->set_rpc_timeout(absl::Seconds(30));
    ASSERT_TRUE(client_->WaitForReady(absl::Seconds(10)).ok());
  }

  void TearDown() override {
    if (server_) {
      api_->BeginShutdown();
      server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
      server_->Wait();
    }
    if (manager_) manager_->Shutdown();
    client_.reset();
    server_.reset();
    service_.reset();
    manager_.reset();
    engine_.reset();
    store_.reset();
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // Submits a job of `dataset` over the given days; its id.
  std::string Submit(const std::string& dataset, int first_day, int days = 1) {
    v1::BackfillRequest request;
    request.set_dataset(dataset);
    for (int d = first_day; d < first_day + days; ++d) {
      request.add_partitions(Day(d));
    }
    request.set_reason("listing test");
    absl::StatusOr<v1::SubmitBackfillResponse> submitted =
        client_->Submit(request, "");
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    return submitted.ok() ? submitted->backfill().id() : "";
  }

  // Waits until the job is terminal; its final state.
  v1::BackfillState WaitTerminal(const std::string& id) {
    v1::BackfillState state = v1::BACKFILL_STATE_UNSPECIFIED;
    absl::Status watched = client_->Watch(id, [&](const v1::Backfill& b) {
      state = b.state();
      return true;
    });
    EXPECT_TRUE(watched.ok()) << watched;
    return state;
  }

  // Every page of `request` from its page_token on; the ids in order.
  std::vector<std::string> ListIds(v1::ListBackfillsRequest request,
                                   int* pages = nullptr) {
    std::vector<std::string> ids;
    for (int page = 1; page <= 1000; ++page) {
      absl::StatusOr<v1::ListBackfillsResponse> listed = client_->List(request);
      EXPECT_TRUE(listed.ok()) << listed.status();
      if (!listed.ok()) break;
      for (const v1::Backfill& b : listed->backfills()) ids.push_back(b.id());
      if (pages != nullptr) *pages = page;
      if (listed->next_page_token().empty()) break;
      request.set_page_token(listed->next_page_token());
    }
    return ids;
  }

  // The ids of the store's jobs, newest first, that `keep` accepts.
  std::vector<std::string> StoredIds(
      const std::function<bool(const Job&)>& keep = nullptr) {
    JobFilter all;
    all.limit = 0;
    all.view = JobView::kBasic;
    absl::StatusOr<std::vector<Job>> jobs = store_->ListJobs(all);
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    std::vector<std::string> ids;
    for (const Job& job : jobs.value_or(std::vector<Job>())) {
      if (!keep || keep(job)) ids.push_back(job.id);
    }
    return ids;
  }

  // A first page's next_page_token for `request` (which must have one).
  std::string FirstToken(const v1::ListBackfillsRequest& request) {
    absl::StatusOr<v1::ListBackfillsResponse> listed = client_->List(request);
    EXPECT_TRUE(listed.ok()) << listed.status();
    EXPECT_FALSE(listed.ok() && listed->next_page_token().empty());
    return listed.ok() ? listed->next_page_token() : "";
  }

  size_t max_page_bytes_ = kMaxListPageBytes;
  ServiceLimits limits_;
  std::string dir_;
  SystemClock clock_;
  JobObserver observer_;  // no-op
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<BackfillManager> manager_;
  std::unique_ptr<BackfillApi> api_;
  std::unique_ptr<BackfillServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<BackfillClient> client_;
};

TEST_F(ServerListingTest, EveryJobOnceNewestFirstWhileJobsAreSubmitted) {
  for (int i = 0; i < 12; ++i) Submit("daily_revenue", 1 + i % kDays);
  for (int page_size : {1, 2, 5, 7, 11, 12, 13, 50}) {
    const std::vector<std::string> before = StoredIds();
    v1::ListBackfillsRequest request;
    request.set_page_size(page_size);
    std::vector<std::string> seen;
    int pages = 0;
    while (true) {
      absl::StatusOr<v1::ListBackfillsResponse> listed = client_->List(request);
      ASSERT_TRUE(listed.ok()) << listed.status();
      ++pages;
      EXPECT_LE(listed->backfills_size(), page_size);
      for (const v1::Backfill& b : listed->backfills()) seen.push_back(b.id());
      if (listed->next_page_token().empty()) break;
      EXPECT_EQ(listed->backfills_size(), page_size);
      // A job submitted between pages must not shift them.
      Submit("daily_revenue", 1 + pages % kDays);
      request.set_page_token(listed->next_page_token());
    }
    EXPECT_THAT(seen, ElementsAreArray(before)) << "page_size " << page_size;
    EXPECT_EQ(pages,
              (static_cast<int>(before.size()) + page_size - 1) / page_size)
        << "page_size " << page_size;
  }
}

TEST_F(ServerListingTest, FiltersPageTheSameWayAndStatesAnyOrder) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(Submit("daily_revenue", 1 + i));
  for (int i = 0; i < 4; ++i) ids.push_back(Submit("bad_daily", 1 + i));
  std::map<std::string, v1::BackfillState> states;
  for (const std::string& id : ids) states[id] = WaitTerminal(id);
  const v1::BackfillState bad_state = states[ids.back()];
  ASSERT_NE(bad_state, v1::BACKFILL_STATE_SUCCEEDED);

  v1::ListBackfillsRequest by_dataset;
  by_dataset.set_dataset("bad_daily");
  by_dataset.set_page_size(1);
  EXPECT_THAT(ListIds(by_dataset), ElementsAreArray(StoredIds([](const Job& j) {
                return j.request.dataset == "bad_daily";
              })));
  // daily_total is in the plan of every daily_revenue job (a dependent).
  v1::ListBackfillsRequest by_dependent;
  by_dependent.set_dataset("daily_total");
  by_dependent.set_page_size(2);
  int pages = 0;
  EXPECT_THAT(ListIds(by_dependent, &pages),
              ElementsAreArray(StoredIds([](const Job& j) {
                return j.request.dataset == "daily_revenue";
              })));
  EXPECT_EQ(pages, 3);

  v1::ListBackfillsRequest by_state;
  by_state.add_states(bad_state);
  by_state.set_page_size(3);
  EXPECT_THAT(ListIds(by_state), ElementsAreArray(StoredIds([&](const Job& j) {
                return states[j.id] == bad_state;
              })));

  // Two states: the token of one order is good for the other.
  v1::ListBackfillsRequest both;
  both.add_states(v1::BACKFILL_STATE_SUCCEEDED);
  both.add_states(bad_state);
  both.set_page_size(4);
  const std::string token = FirstToken(both);
  v1::ListBackfillsRequest swapped;
  swapped.add_states(bad_state);
  swapped.add_states(v1::BACKFILL_STATE_SUCCEEDED);
  swapped.add_states(bad_state);  // repeated: the same set
  swapped.set_page_size(4);
  swapped.set_page_token(token);
  std::vector<std::string> rest = ListIds(swapped);
  const std::vector<std::string> stored = StoredIds();
  EXPECT_THAT(rest, ElementsAreArray(stored.begin() + 4, stored.end()));

  // Nothing matches: one empty page without a token.
  v1::ListBackfillsRequest none;
  none.set_dataset("no_such_dataset");
  absl::StatusOr<v1::ListBackfillsResponse> empty = client_->List(none);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->backfills_size(), 0);
  EXPECT_EQ(empty->next_page_token(), "");
}

TEST_F(ServerListingTest, ATokenWithOtherFiltersIsRefused) {
  for (int i = 0; i < 4; ++i) Submit("daily_revenue", 1 + i);
  v1::ListBackfillsRequest first;
  first.set_dataset("daily_revenue");
  first.set_page_size(1);
  const std::string token = FirstToken(first);

  v1::ListBackfillsRequest other_dataset = first;
  other_dataset.set_dataset("daily_total");
  other_dataset.set_page_token(token);
  absl::Status refused = client_->List(other_dataset).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("page_token"));
  EXPECT_THAT(refused.message(), HasSubstr("other filters"));
  EXPECT_THAT(refused.message(), HasSubstr("states and dataset"));

  v1::ListBackfillsRequest no_dataset = first;
  no_dataset.clear_dataset();
  no_dataset.set_page_token(token);
  EXPECT_EQ(client_->List(no_dataset).status().code(),
            absl::StatusCode::kInvalidArgument);

  v1::ListBackfillsRequest other_states = first;
  other_states.add_states(v1::BACKFILL_STATE_QUEUED);
  other_states.set_page_token(token);
  EXPECT_EQ(client_->List(other_states).status().code(),
            absl::StatusCode::kInvalidArgument);

  // page_size and view may change between pages.
  v1::ListBackfillsRequest same = first;
  same.set_page_size(2);
  same.set_view(v1::BACKFILL_VIEW_FULL);
  same.set_page_token(token);
  absl::StatusOr<v1::ListBackfillsResponse> next = client_->List(same);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->backfills_size(), 2);
  EXPECT_EQ(next->backfills(0).view(), v1::BACKFILL_VIEW_FULL);
}

TEST_F(ServerListingTest, TamperedTokensAreRefusedAndChangeNothing) {
  for (int i = 0; i < 3; ++i) Submit("daily_revenue", 1 + i);
  v1::ListBackfillsRequest first;
  first.set_page_size(1);
  const std::string token = FirstToken(first);
  ASSERT_FALSE(token.empty());
  const std::vector<std::string> before = StoredIds();

  std::vector<std::string> bad = {
      "x",
      "not a token",
      token.substr(0, token.size() - 1),
      token + "A",
      token + "=",
      " " + token,
      std::string(10000, 'A'),
      std::string("\0\xff\x80", 3),
      "42",  // the kind of token DiffBackfill and ListAuditEvents use
      absl::WebSafeBase64Escape(std::string(22, '\0')),
  };
  // Every single character changed.
  for (size_t i = 0; i < token.size(); ++i) {
    std::string changed = token;
    changed[i] = changed[i] == 'A' ? 'B' : 'A';
    bad.push_back(changed);
  }
  // A ListPartitions token.
  {
    v1::ListPartitionsRequest partitions;
    partitions.set_backfill_id(Submit("daily_revenue", 1, 3));
    partitions.set_page_size(1);
    absl::StatusOr<v1::ListPartitionsResponse> page =
        client_->ListPartitions(partitions);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_FALSE(page->next_page_token().empty());
    bad.push_back(page->next_page_token());
  }
  for (const std::string& t : bad) {
    v1::ListBackfillsRequest request = first;
    request.set_page_token(t);
    absl::Status status = client_->List(request).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << absl::CHexEscape(t) << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr("page_token"))
        << absl::CHexEscape(t);
  }
  // The service still answers, and the good token still works.
  v1::ListBackfillsRequest good = first;
  good.set_page_token(token);
  EXPECT_TRUE(client_->List(good).ok());
  EXPECT_EQ(StoredIds().size(), before.size() + 1);
}

TEST_F(ServerListingTest, PageSizeBounds) {
  for (int i = 0; i < 52; ++i) Submit("daily_revenue", 1 + i % kDays);
  v1::ListBackfillsRequest request;
  for (int bad : {-1, std::numeric_limits<int32_t>::min()}) {
    request.set_page_size(bad);
    absl::Status status = client_->List(request).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(status.message(),
                HasSubstr(absl::StrCat("`page_size` ", bad, " is negative")));
    EXPECT_THAT(status.message(), HasSubstr("1..1000 (0 means 50"));
  }
  // Over the maximum: served as the maximum (AIP-158), so every job.
  for (int over : {1001, 1 << 30, std::numeric_limits<int32_t>::max()}) {
    request.set_page_size(over);
    absl::StatusOr<v1::ListBackfillsResponse> all = client_->List(request);
    ASSERT_TRUE(all.ok()) << over << ": " << all.status();
    EXPECT_EQ(all->backfills_size(), 52) << over;
    EXPECT_EQ(all->next_page_token(), "") << over;
  }
  request.set_page_size(0);  // the default, 50
  absl::StatusOr<v1::ListBackfillsResponse> page = client_->List(request);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->backfills_size(), 50);
  EXPECT_FALSE(page->next_page_token().empty());
  request.set_page_token(page->next_page_token());
  page = client_->List(request);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->backfills_size(), 2);
  EXPECT_EQ(page->next_page_token(), "");

  v1::ListBackfillsRequest max;
  max.set_page_size(1000);
  page = client_->List(max);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->backfills_size(), 52);
  EXPECT_EQ(page->next_page_token(), "");

  // A full last page says there is no next one.
  v1::ListBackfillsRequest exact;
  exact.set_page_size(52);
  page = client_->List(exact);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->backfills_size(), 52);
  EXPECT_EQ(page->next_page_token(), "");

  v1::ListBackfillsRequest bad_state;
  bad_state.add_states(v1::BACKFILL_STATE_UNSPECIFIED);
  EXPECT_EQ(client_->List(bad_state).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad_state.set_states(0, static_cast<v1::BackfillState>(99));
  EXPECT_EQ(client_->List(bad_state).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// What a BASIC job must leave out, and the counts it must keep, against the
// FULL message of the same job.
void ExpectBasicOf(const v1::Backfill& basic, const v1::Backfill& full) {
  EXPECT_EQ(basic.view(), v1::BACKFILL_VIEW_BASIC);
  EXPECT_EQ(full.view(), v1::BACKFILL_VIEW_FULL);
  EXPECT_EQ(basic.id(), full.id());
  EXPECT_EQ(basic.state(), full.state());
  EXPECT_THAT(basic.request().partitions(), IsEmpty());
  EXPECT_THAT(basic.request().keys(), IsEmpty());
  EXPECT_EQ(basic.requested_partition_count(),
            full.request().partitions_size());
  EXPECT_EQ(full.requested_partition_count(), full.request().partitions_size());
  EXPECT_EQ(basic.request().reason(), full.request().reason());
  EXPECT_EQ(basic.partitions().total(), full.partitions().total());
  EXPECT_GT(basic.partitions().total(), 0);
  ASSERT_EQ(basic.plan_size(), full.plan_size());
  int64_t planned = 0;
  for (int i = 0; i < basic.plan_size(); ++i) {
    const v1::DatasetPlan& b = basic.plan(i);
    const v1::DatasetPlan& f = full.plan(i);
    EXPECT_EQ(b.dataset(), f.dataset());
    EXPECT_EQ(b.grain(), f.grain());
    EXPECT_EQ(b.reason(), f.reason());
    EXPECT_THAT(b.partitions(), IsEmpty()) << b.dataset();
    EXPECT_THAT(b.partition_reasons(), IsEmpty()) << b.dataset();
    EXPECT_THAT(b.keys(), IsEmpty()) << b.dataset();
    EXPECT_FALSE(f.partitions().empty()) << f.dataset();
    EXPECT_EQ(f.partition_reasons_size(), f.partitions_size()) << f.dataset();
    EXPECT_EQ(b.partition_count(), f.partitions_size()) << b.dataset();
    EXPECT_EQ(f.partition_count(), f.partitions_size()) << f.dataset();
    EXPECT_EQ(b.key_count(), f.keys_size());
    planned += b.partition_count();
  }
  EXPECT_EQ(planned, basic.partitions().total());
  EXPECT_EQ(basic.dataset_costs_size(), full.dataset_costs_size());
  EXPECT_EQ(basic.cost_estimate().backfill(), full.cost_estimate().backfill());
}

TEST_F(ServerListingTest, BasicLeavesOutTheListsAndKeepsTheCounts) {
  const std::string id = Submit("daily_revenue", 2, 3);
  ASSERT_EQ(WaitTerminal(id), v1::BACKFILL_STATE_SUCCEEDED);

  // GetBackfill: FULL by default.
  absl::StatusOr<v1::Backfill> full = client_->Get(id);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->view(), v1::BACKFILL_VIEW_FULL);
  EXPECT_EQ(full->request().partitions_size(), 3);
  ASSERT_EQ(full->plan_size(), 3);  // daily_revenue, daily_total, totals
  EXPECT_EQ(full->partitions().total(), 3 + 3 + 1);
  absl::StatusOr<v1::Backfill> explicit_full =
      client_->Get(id, v1::BACKFILL_VIEW_FULL);
  ASSERT_TRUE(explicit_full.ok());
  EXPECT_EQ(explicit_full->SerializeAsString(), full->SerializeAsString());
  absl::StatusOr<v1::Backfill> basic =
      client_->Get(id, v1::BACKFILL_VIEW_BASIC);
  ASSERT_TRUE(basic.ok()) << basic.status();
  ExpectBasicOf(*basic, *full);
  EXPECT_EQ(basic->checks_size(), full->checks_size());
  EXPECT_EQ(basic->diff_size(), full->diff_size());

  // ListBackfills: BASIC by default.
  v1::ListBackfillsRequest list;
  absl::StatusOr<v1::ListBackfillsResponse> listed = client_->List(list);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->backfills_size(), 1);
  ExpectBasicOf(listed->backfills(0), *full);
  list.set_view(v1::BACKFILL_VIEW_BASIC);
  listed = client_->List(list);
  ASSERT_TRUE(listed.ok());
  ExpectBasicOf(listed->backfills(0), *full);
  list.set_view(v1::BACKFILL_VIEW_FULL);
  listed = client_->List(list);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->backfills_size(), 1);
  const v1::Backfill& listed_full = listed->backfills(0);
  EXPECT_EQ(listed_full.view(), v1::BACKFILL_VIEW_FULL);
  ASSERT_EQ(listed_full.plan_size(), full->plan_size());
  for (int i = 0; i < full->plan_size(); ++i) {
    EXPECT_THAT(listed_full.plan(i).partitions(),
                ElementsAreArray(full->plan(i).partitions()));
    EXPECT_THAT(listed_full.plan(i).partition_reasons(),
                ElementsAreArray(full->plan(i).partition_reasons()));
  }
  EXPECT_THAT(listed_full.request().partitions(),
              ElementsAreArray(full->request().partitions()));

  // WatchBackfill: BASIC by default; FULL sends the whole job first.
  std::vector<v1::Backfill> updates;
  ASSERT_TRUE(client_
                  ->Watch(id,
                          [&](const v1::Backfill& b) {
                            updates.push_back(b);
                            return true;
                          })
                  .ok());
  ASSERT_EQ(updates.size(), 1u);
  ExpectBasicOf(updates[0], *full);
  updates.clear();
  ASSERT_TRUE(client_
                  ->Watch(
                      id,
                      [&](const v1::Backfill& b) {
                        updates.push_back(b);
                        return true;
                      },
                      v1::BACKFILL_VIEW_FULL)
                  .ok());
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].view(), v1::BACKFILL_VIEW_FULL);
  ASSERT_EQ(updates[0].plan_size(), full->plan_size());
  EXPECT_THAT(updates[0].plan(0).partitions(),
              ElementsAreArray(full->plan(0).partitions()));
}

TEST_F(ServerListingTest, WatchUpdatesAfterTheFirstAreBasic) {
  const std::string first = Submit("daily_revenue", 1, kDays);
  // Queued behind `first` until it ends: its watch sees several messages.
  const std::string second = Submit("daily_revenue", 1, kDays);
  std::vector<v1::Backfill> updates;
  ASSERT_TRUE(client_
                  ->Watch(
                      second,
                      [&](const v1::Backfill& b) {
                        updates.push_back(b);
                        return true;
                      },
                      v1::BACKFILL_VIEW_FULL)
                  .ok());
  ASSERT_GE(updates.size(), 2u);
  EXPECT_EQ(updates[0].view(), v1::BACKFILL_VIEW_FULL);
  EXPECT_EQ(updates[0].plan(0).partitions_size(), kDays);
  for (size_t i = 1; i < updates.size(); ++i) {
    EXPECT_EQ(updates[i].view(), v1::BACKFILL_VIEW_BASIC) << i;
    EXPECT_THAT(updates[i].plan(0).partitions(), IsEmpty()) << i;
    EXPECT_EQ(updates[i].plan(0).partition_count(), kDays) << i;
  }
  WaitTerminal(first);
}

TEST_F(ServerListingTest, AViewThatIsNoBackfillViewIsRefused) {
  const std::string id = Submit("daily_revenue", 1);
  const auto bad = static_cast<v1::BackfillView>(7);
  absl::Status get = client_->Get(id, bad).status();
  EXPECT_EQ(get.code(), absl::StatusCode::kInvalidArgument) << get;
  EXPECT_THAT(get.message(), HasSubstr("view"));
  v1::ListBackfillsRequest list;
  list.set_view(bad);
  EXPECT_EQ(client_->List(list).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status watch = client_->Watch(
      id, [](const v1::Backfill&) { return true; }, bad);
  EXPECT_EQ(watch.code(), absl::StatusCode::kInvalidArgument) << watch;
  WaitTerminal(id);
}

// A small cap on a page's bytes: whole jobs come fewer per page, with a
// token, and every job still comes exactly once.
class SmallPagesTest : public ServerListingTest {
 protected:
  // A job of kDays days takes about 1.2 kB whole and 0.7 kB in the basic
  // view; a partition that ran about 170 bytes.
  SmallPagesTest() { max_page_bytes_ = 1500; }
};

TEST_F(SmallPagesTest, PagesOverTheByteCapAreCutShortAndContinue) {
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(Submit("daily_revenue", 1, kDays));
  for (const std::string& id : ids) WaitTerminal(id);
  v1::ListBackfillsRequest request;
  request.set_view(v1::BACKFILL_VIEW_FULL);
  request.set_page_size(50);
  absl::StatusOr<v1::ListBackfillsResponse> first = client_->List(request);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_GE(first->backfills_size(), 1);
  EXPECT_LT(first->backfills_size(), 6);
  EXPECT_FALSE(first->next_page_token().empty());
  int pages = 0;
  EXPECT_THAT(ListIds(request, &pages), ElementsAreArray(StoredIds()));
  EXPECT_GT(pages, 1);
  // The basic view of the same jobs fits more per page.
  request.set_view(v1::BACKFILL_VIEW_BASIC);
  int basic_pages = 0;
  EXPECT_THAT(ListIds(request, &basic_pages), ElementsAreArray(StoredIds()));
  EXPECT_LT(basic_pages, pages);

  // ListPartitions too.
  v1::ListPartitionsRequest partitions;
  partitions.set_backfill_id(StoredIds().front());
  partitions.set_page_size(1000);
  std::vector<std::string> seen;
  int partition_pages = 0;
  while (true) {
    absl::StatusOr<v1::ListPartitionsResponse> page =
        client_->ListPartitions(partitions);
    ASSERT_TRUE(page.ok()) << page.status();
    ++partition_pages;
    for (const v1::BackfillPartition& p : page->partitions()) {
      seen.push_back(p.dataset() + "/" + p.partition());
    }
    if (page->next_page_token().empty()) break;
    partitions.set_page_token(page->next_page_token());
  }
  EXPECT_EQ(seen.size(), 2u * kDays + 1);
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(),
            seen.size());
  EXPECT_GT(partition_pages, 1);
}

// The answer to a submit or a change of state is the whole job only while
// it fits in the page budget: a call that did something never fails for the
// size of its answer.
TEST_F(SmallPagesTest, AnswersToChangesFallBackToTheBasicViewWhenTooLarge) {
  // Two days: the whole job fits.
  v1::BackfillRequest small;
  small.set_dataset("daily_revenue");
  small.add_partitions(Day(1));
  small.add_partitions(Day(2));
  small.set_reason("small");
  absl::StatusOr<v1::SubmitBackfillResponse> fits = client_->Submit(small, "");
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->backfill().view(), v1::BACKFILL_VIEW_FULL);
  EXPECT_EQ(fits->backfill().request().partitions_size(), 2);
  EXPECT_LE(fits->backfill().ByteSizeLong(), 1500u);

  // All of March: the whole job is over the budget; the answer is its
  // basic view, with the counts that stand for the lists.
  v1::BackfillRequest large = small;
  large.clear_partitions();
  for (int d = 1; d <= 31; ++d) large.add_partitions(Day(d));
  large.set_reason("large");
  absl::StatusOr<v1::SubmitBackfillResponse> submitted =
      client_->Submit(large, "");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const v1::Backfill& answer = submitted->backfill();
  EXPECT_EQ(answer.view(), v1::BACKFILL_VIEW_BASIC);
  EXPECT_EQ(answer.request().partitions_size(), 0);
  EXPECT_EQ(answer.requested_partition_count(), 31);
  ASSERT_GE(answer.plan_size(), 1);
  EXPECT_EQ(answer.plan(0).partitions_size(), 0);
  EXPECT_EQ(answer.plan(0).partition_count(), 31);
  EXPECT_LE(answer.ByteSizeLong(), 1500u);

  // GetBackfill still gives the whole job when asked (the caller chose).
  absl::StatusOr<v1::Backfill> whole = client_->Get(answer.id());
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->view(), v1::BACKFILL_VIEW_FULL);
  EXPECT_EQ(whole->request().partitions_size(), 31);
  EXPECT_GT(whole->ByteSizeLong(), 1500u);
  WaitTerminal(fits->backfill().id());
  WaitTerminal(answer.id());
}

// A small cap on a plan's answer: a plan over it comes without its lists.
class SmallPlanAnswersTest : public ServerListingTest {
 protected:
  // A plan of daily_revenue and its two dependents fits in 1 kB listing
  // two days, not listing all of March with its dependents' partitions
  // and every partition's reason.
  SmallPlanAnswersTest() { limits_.max_plan_answer_bytes = 1000; }
};

// A plan too large to answer whole leaves the partitions and their reasons
// out, with the counts that stand for them (a client would refuse a plan
// over its message limit); a plan that fits lists every partition.
TEST_F(SmallPlanAnswersTest, APlanOverTheLimitIsAnsweredWithoutItsLists) {
  v1::BackfillRequest small;
  small.set_dataset("daily_revenue");
  small.add_partitions(Day(1));
  small.add_partitions(Day(2));
  small.set_reason("small");
  absl::StatusOr<v1::PlanBackfillResponse> fits = client_->Plan(small);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_LE(fits->ByteSizeLong(), 1000u);
  ASSERT_GE(fits->datasets_size(), 1);
  EXPECT_EQ(fits->datasets(0).dataset(), "daily_revenue");
  EXPECT_EQ(fits->datasets(0).partitions_size(), 2);
  EXPECT_EQ(fits->datasets(0).partition_reasons_size(), 2);
  EXPECT_EQ(fits->datasets(0).partition_count(), 2);

  v1::BackfillRequest large = small;
  large.clear_partitions();
  large.set_from_partition(Day(1));
  large.set_to_partition("2025-04-01");
  large.set_reason("large");
  absl::StatusOr<v1::PlanBackfillResponse> planned = client_->Plan(large);
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_LE(planned->ByteSizeLong(), 1000u);
  ASSERT_GE(planned->datasets_size(), 1);
  int64_t counted = 0;
  for (const v1::DatasetPlan& dataset : planned->datasets()) {
    EXPECT_EQ(dataset.partitions_size(), 0) << dataset.dataset();
    EXPECT_EQ(dataset.partition_reasons_size(), 0) << dataset.dataset();
    counted += dataset.partition_count();
  }
  EXPECT_EQ(planned->datasets(0).dataset(), "daily_revenue");
  EXPECT_EQ(planned->datasets(0).partition_count(), 31);
  EXPECT_EQ(counted, planned->total_partitions());
  EXPECT_GT(planned->total_partitions(), 31);
}

class ServerListPartitionsTest : public ServerListingTest {
 protected:
  // The store's tasks of `id` as "dataset/partition STATE", in plan order.
  std::vector<std::string> StoredTasks(const std::string& id,
                                       const std::string& dataset = "",
                                       const std::set<TaskState>& states = {}) {
    absl::StatusOr<std::vector<PartitionTask>> tasks = store_->ListTasks(id);
    EXPECT_TRUE(tasks.ok()) << tasks.status();
    std::vector<std::string> out;
    for (const PartitionTask& t :
         tasks.value_or(std::vector<PartitionTask>())) {
      if (!dataset.empty() && t.dataset != dataset) continue;
      if (!states.empty() && states.count(t.state) == 0) continue;
      out.push_back(absl::StrCat(t.dataset, "/", t.partition, " ",
                                 TaskStateName(t.state)));
    }
    return out;
  }

  // Every page of `request`, as StoredTasks shows tasks.
  std::vector<std::string> ListTasks(v1::ListPartitionsRequest request,
                                     int* pages = nullptr) {
    std::vector<std::string> out;
    for (int page = 1; page <= 1000; ++page) {
      absl::StatusOr<v1::ListPartitionsResponse> listed =
          client_->ListPartitions(request);
      EXPECT_TRUE(listed.ok()) << listed.status();
      if (!listed.ok()) break;
      EXPECT_LE(listed->partitions_size(),
                request.page_size() == 0 ? 100 : request.page_size());
      for (const v1::BackfillPartition& p : listed->partitions()) {
        out.push_back(
            absl::StrCat(p.dataset(), "/", p.partition(), " ",
                         absl::StripPrefix(v1::PartitionState_Name(p.state()),
                                           "PARTITION_STATE_")));
      }
      if (pages != nullptr) *pages = page;
      if (listed->next_page_token().empty()) break;
      request.set_page_token(listed->next_page_token());
    }
    return out;
  }
};

TEST_F(ServerListPartitionsTest, PagesThroughAJobsPartitionsInPlanOrder) {
  const std::string id = Submit("daily_revenue", 1, kDays);
  ASSERT_EQ(WaitTerminal(id), v1::BACKFILL_STATE_SUCCEEDED);
  const std::vector<std::string> all = StoredTasks(id);
  ASSERT_EQ(all.size(), 2u * kDays + 1);
  for (int page_size : {1, 2, 3, 7, 14, 15, 16, 1000}) {
    v1::ListPartitionsRequest request;
    request.set_backfill_id(id);
    request.set_page_size(page_size);
    int pages = 0;
    EXPECT_THAT(ListTasks(request, &pages), ElementsAreArray(all))
        << "page_size " << page_size;
    EXPECT_EQ(pages, (15 + page_size - 1) / page_size)
        << "page_size " << page_size;
  }
  v1::ListPartitionsRequest by_default;
  by_default.set_backfill_id(id);
  EXPECT_THAT(ListTasks(by_default), ElementsAreArray(all));

  // What each partition says: its reason, rows, inputs, time.
  absl::StatusOr<v1::Backfill> full = client_->Get(id);
  ASSERT_TRUE(full.ok());
  v1::ListPartitionsRequest one_dataset;
  one_dataset.set_backfill_id(id);
  one_dataset.set_dataset("daily_revenue");
  absl::StatusOr<v1::ListPartitionsResponse> page =
      client_->ListPartitions(one_dataset);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->partitions_size(), kDays);
  for (int i = 0; i < kDays; ++i) {
    const v1::BackfillPartition& p = page->partitions(i);
    EXPECT_EQ(p.partition(), full->plan(0).partitions(i));
    EXPECT_EQ(p.reason(), full->plan(0).partition_reasons(i));
    EXPECT_EQ(p.state(), v1::PARTITION_STATE_PUBLISHED);
    EXPECT_GT(p.rows_written(), 0);
    EXPECT_EQ(p.attempts(), 1);
    EXPECT_EQ(p.last_error(), "");
    EXPECT_FALSE(p.output_fingerprint().empty());
    EXPECT_TRUE(p.has_update_time());
    ASSERT_EQ(p.inputs_size(), 2);  // orders of the day, customers whole
    EXPECT_EQ(p.inputs(0).dataset(), "orders");
    EXPECT_EQ(p.inputs(0).partition(), p.partition());
    EXPECT_EQ(p.input_rows(), p.inputs(0).rows() + p.inputs(1).rows());
  }
}

TEST_F(ServerListPartitionsTest, FiltersByDatasetAndState) {
  const std::string first = Submit("daily_revenue", 1, kDays);
  ASSERT_EQ(WaitTerminal(first), v1::BACKFILL_STATE_SUCCEEDED);
  // The same again: recomputed identical, so unchanged and skipped
  // partitions besides published ones.
  const std::string id = Submit("daily_revenue", 1, kDays);
  ASSERT_EQ(WaitTerminal(id), v1::BACKFILL_STATE_SUCCEEDED);

  for (const std::string dataset :
       {"daily_revenue", "daily_total", "region_totals"}) {
    v1::ListPartitionsRequest request;
    request.set_backfill_id(id);
    request.set_dataset(dataset);
    request.set_page_size(2);
    EXPECT_THAT(ListTasks(request), ElementsAreArray(StoredTasks(id, dataset)))
        << dataset;
  }
  const std::vector<
      std::pair<std::set<TaskState>, std::vector<v1::PartitionState>>>
      cases = {
          {{TaskState::kUnchanged}, {v1::PARTITION_STATE_UNCHANGED}},
          {{TaskState::kSkipped}, {v1::PARTITION_STATE_SKIPPED}},
          {{TaskState::kPublished}, {v1::PARTITION_STATE_PUBLISHED}},
          {{TaskState::kSkipped, TaskState::kUnchanged},
           {v1::PARTITION_STATE_SKIPPED, v1::PARTITION_STATE_UNCHANGED}},
          {{TaskState::kFailed}, {v1::PARTITION_STATE_FAILED}},
      };
  size_t listed = 0;
  for (const auto& [states, wire] : cases) {
    v1::ListPartitionsRequest request;
    request.set_backfill_id(id);
    for (v1::PartitionState s : wire) request.add_states(s);
    request.set_page_size(3);
    const std::vector<std::string> expected = StoredTasks(id, "", states);
    EXPECT_THAT(ListTasks(request), ElementsAreArray(expected));
    if (states.size() == 1) listed += expected.size();
  }
  EXPECT_EQ(listed, StoredTasks(id).size());  // every state seen once

  // Dataset and states together.
  v1::ListPartitionsRequest both;
  both.set_backfill_id(id);
  both.set_dataset("daily_total");
  both.add_states(v1::PARTITION_STATE_SKIPPED);
  both.set_page_size(1);
  EXPECT_THAT(ListTasks(both), ElementsAreArray(StoredTasks(
                                   id, "daily_total", {TaskState::kSkipped})));
}

TEST_F(ServerListPartitionsTest, BadRequestsAreRefusedAndChangeNothing) {
  const std::string id = Submit("daily_revenue", 1, 3);
  ASSERT_EQ(WaitTerminal(id), v1::BACKFILL_STATE_SUCCEEDED);
  const std::vector<std::string> before = StoredTasks(id);

  auto expect_invalid = [&](const v1::ListPartitionsRequest& request,
                            const std::string& says) {
    absl::Status status = client_->ListPartitions(request).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << request.ShortDebugString() << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr(says))
        << request.ShortDebugString();
  };
  v1::ListPartitionsRequest request;
  expect_invalid(request, "backfill_id");
  request.set_backfill_id("job-1");
  expect_invalid(request, "backfill_id");
  request.set_backfill_id(id);
  request.set_dataset("orders");
  expect_invalid(request, "daily_revenue, daily_total, region_totals");
  request.clear_dataset();
  request.add_states(v1::PARTITION_STATE_UNSPECIFIED);
  expect_invalid(request, "states");
  request.set_states(0, static_cast<v1::PartitionState>(42));
  expect_invalid(request, "states");
  request.clear_states();
  request.set_page_size(-1);
  expect_invalid(request,
                 "`page_size` -1 is negative: use 1..1000 (0 means 100");
  // Over the maximum: served as the maximum, so every partition at once.
  request.set_page_size(1001);
  absl::StatusOr<v1::ListPartitionsResponse> all =
      client_->ListPartitions(request);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->partitions_size(), static_cast<int>(before.size()));
  EXPECT_EQ(all->next_page_token(), "");
  request.set_page_size(1);
  request.set_page_token("garbage");
  expect_invalid(request, "page_token");

  // A token with another job, dataset or states; a ListBackfills token.
  request.clear_page_token();
  absl::StatusOr<v1::ListPartitionsResponse> page =
      client_->ListPartitions(request);
  ASSERT_TRUE(page.ok()) << page.status();
  const std::string token = page->next_page_token();
  ASSERT_FALSE(token.empty());
  const std::string other = Submit("daily_revenue", 4, 1);
  v1::ListPartitionsRequest other_job = request;
  other_job.set_backfill_id(other);
  other_job.set_page_token(token);
  expect_invalid(other_job, "backfill_id, dataset and states");
  v1::ListPartitionsRequest other_dataset = request;
  other_dataset.set_dataset("daily_total");
  other_dataset.set_page_token(token);
  expect_invalid(other_dataset, "other filters");
  v1::ListPartitionsRequest other_states = request;
  other_states.add_states(v1::PARTITION_STATE_PUBLISHED);
  other_states.set_page_token(token);
  expect_invalid(other_states, "other filters");
  for (size_t i = 0; i < token.size(); ++i) {
    v1::ListPartitionsRequest tampered = request;
    std::string changed = token;
    changed[i] = changed[i] == 'z' ? 'y' : 'z';
    tampered.set_page_token(changed);
    expect_invalid(tampered, "page_token");
  }
  v1::ListBackfillsRequest jobs;
  jobs.set_page_size(1);
  v1::ListPartitionsRequest jobs_token = request;
  jobs_token.set_page_token(FirstToken(jobs));
  expect_invalid(jobs_token, "not a token `ListPartitions` returned");

  v1::ListPartitionsRequest unknown;
  unknown.set_backfill_id("bf-999");
  EXPECT_EQ(client_->ListPartitions(unknown).status().code(),
            absl::StatusCode::kNotFound);

  EXPECT_THAT(StoredTasks(id), ElementsAreArray(before));
  // The good token still works.
  request.set_page_token(token);
  EXPECT_TRUE(client_->ListPartitions(request).ok());
  WaitTerminal(other);
}

}  // namespace
}  // namespace server_listing_test
}  // namespace backfill
