// In-process gRPC tests of BackfillServiceImpl over real storage
// (tests/testing/server_service_fixture.h): datasets, plan, submit and watch,
// idempotency, bad requests, max_cost, diff and approve, listing, shutdown,
// UTF-8, rollback.

#include <sqlite3.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/backfill_client.h"
#include "core/base/clock.h"
#include "core/model/pipeline_loader.h"
#include "core/run/backfill_manager.h"
#include "core/run/job_observer.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "gtest/gtest.h"
#include "server/backfill_service_impl.h"
#include "server/proto_convert.h"
#include "storage/sqlite/sqlite_engine.h"
#include "storage/sqlite/state/sqlite_state_store.h"
#include "tests/testing/raw_grpc.h"
#include "tests/testing/revenue_pipeline.h"
#include "tests/testing/server_service_fixture.h"

namespace backfill {
namespace server_service_test {
namespace {

using ::backfill::testing::HealthCheck;
using ::backfill::testing::RawCall;
using ::backfill::testing::Refusal;
using ::backfill::testing::WireError;
using namespace ::backfill::testing;  // NOLINT: the fixture and its helpers

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(ServerServiceTest, ListDatasetsDescribesTheCatalog) {
  absl::StatusOr<v1::ListDatasetsResponse> response = client_->ListDatasets();
  ASSERT_TRUE(response.ok()) << response.status();
  std::map<std::string, v1::Dataset> by_name;
  for (const v1::Dataset& d : response->datasets()) by_name[d.name()] = d;
  ASSERT_EQ(by_name.size(), 3u);

  const v1::Dataset& orders = by_name["orders"];
  EXPECT_EQ(orders.kind(), v1::DATASET_KIND_SOURCE);
  EXPECT_EQ(orders.table(), "raw_orders");
  EXPECT_EQ(orders.grain(), v1::GRAIN_DAY);
  EXPECT_EQ(orders.partition_column(), "order_date");
  EXPECT_THAT(orders.downstream(), ElementsAre("daily_revenue"));

  const v1::Dataset& customers = by_name["customers"];
  EXPECT_EQ(customers.kind(), v1::DATASET_KIND_SOURCE);
  EXPECT_EQ(customers.grain(), v1::GRAIN_NONE);
  EXPECT_THAT(customers.downstream(), ElementsAre("daily_revenue"));

  const v1::Dataset& revenue = by_name["daily_revenue"];
  EXPECT_EQ(revenue.kind(), v1::DATASET_KIND_DERIVED);
  EXPECT_EQ(revenue.grain(), v1::GRAIN_DAY);
  EXPECT_EQ(revenue.partition_column(), "ds");
  ASSERT_EQ(revenue.upstream_size(), 2);
  EXPECT_EQ(revenue.upstream(0).dataset(), "orders");
  EXPECT_EQ(revenue.upstream(0).mapping(), v1::PARTITION_MAPPING_IDENTITY);
  EXPECT_EQ(revenue.upstream(1).dataset(), "customers");
  EXPECT_EQ(revenue.upstream(1).mapping(), v1::PARTITION_MAPPING_ALL);
  EXPECT_TRUE(revenue.downstream().empty());
  EXPECT_FALSE(revenue.transform_version().empty());
  ASSERT_EQ(revenue.columns_size(), 4);
  EXPECT_EQ(revenue.columns(0).name(), "ds");
  EXPECT_EQ(revenue.columns(0).type(), "TEXT");
  EXPECT_EQ(revenue.columns(3).name(), "orders");
  EXPECT_EQ(revenue.columns(3).type(), "INTEGER");
  EXPECT_THAT(revenue.primary_key(), ElementsAre("ds", "region"));
  EXPECT_THAT(revenue.declared_at(), ::testing::StartsWith("pipeline.yaml:"));
}

TEST_F(ServerServiceTest, KeysOnADatasetWithoutEntityKeyAreRefused) {
  absl::StatusOr<v1::ListDatasetsResponse> datasets = client_->ListDatasets();
  ASSERT_TRUE(datasets.ok()) << datasets.status();
  for (const v1::Dataset& d : datasets->datasets()) {
    EXPECT_EQ(d.entity_key(), "") << d.name();
  }
  v1::BackfillRequest request =
      RangeRequest("daily_revenue", "2025-03-02", "2025-03-05");
  request.add_keys("c1");
  absl::Status plan = client_->Plan(request).status();
  EXPECT_EQ(plan.code(), absl::StatusCode::kInvalidArgument) << plan;
  EXPECT_THAT(plan.message(),
              HasSubstr("dataset \"daily_revenue\" declares no entity_key"));
  absl::Status submit = client_->Submit(request, "keys-key").status();
  EXPECT_EQ(submit.code(), absl::StatusCode::kInvalidArgument) << submit;
  EXPECT_THAT(submit.message(), HasSubstr("`keys`:"));
  EXPECT_EQ(StoredJobs(), 0u);
}

TEST_F(ServerServiceTest, PlanReturnsPartitionsAndCostAndWritesNothing) {
  absl::StatusOr<v1::PlanBackfillResponse> plan =
      client_->Plan(RangeRequest("daily_revenue", "2025-03-02", "2025-03-05"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->datasets_size(), 1);
  const v1::DatasetPlan& d = plan->datasets(0);
  EXPECT_EQ(d.dataset(), "daily_revenue");
  EXPECT_EQ(d.grain(), v1::GRAIN_DAY);
  EXPECT_THAT(d.partitions(),
              ElementsAre("2025-03-02", "2025-03-03", "2025-03-04"));
  EXPECT_EQ(plan->total_partitions(), 3);
  EXPECT_EQ(plan->cost().unit(), v1::COST_UNIT_INPUT_ROWS);
  EXPECT_GT(plan->cost().backfill(), 0);
  EXPECT_GT(plan->cost().full_reload(), plan->cost().backfill());
  EXPECT_NEAR(plan->cost().ratio(),
              plan->cost().backfill() / plan->cost().full_reload(), 1e-9);
  EXPECT_TRUE(plan->conflicts().empty());
  EXPECT_EQ(StoredJobs(), 0u);
}

TEST_F(ServerServiceTest, SubmitAndWatchPublishesTheExpectedTable) {
  absl::StatusOr<v1::SubmitBackfillResponse> submitted = client_->Submit(
      RangeRequest("daily_revenue", "2025-03-01", "2025-03-08"), "");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_TRUE(submitted->created());
  const v1::Backfill& job = submitted->backfill();
  EXPECT_THAT(job.id(), ::testing::StartsWith("bf-"));
  EXPECT_EQ(job.request().dataset(), "daily_revenue");
  EXPECT_EQ(job.request().reason(), "fix refunds");
  EXPECT_EQ(job.partitions().total(), kDays);
  EXPECT_EQ(job.cost_estimate().unit(), v1::COST_UNIT_INPUT_ROWS);
  EXPECT_TRUE(job.has_create_time());
  EXPECT_FALSE(job.has_end_time());

  std::vector<v1::Backfill> updates = WatchToEnd(job.id());
  ASSERT_FALSE(updates.empty());
  const v1::Backfill& last = updates.back();
  EXPECT_EQ(last.state(), v1::BACKFILL_STATE_SUCCEEDED) << last.message();
  EXPECT_EQ(last.partitions().published(), kDays);
  EXPECT_GT(last.rows_written(), 0);
  EXPECT_GT(last.actual_cost(), 0);
  EXPECT_TRUE(last.has_start_time());
  EXPECT_TRUE(last.has_end_time());
  for (size_t i = 0; i + 1 < updates.size(); ++i) {
    EXPECT_FALSE(updates[i].state() == v1::BACKFILL_STATE_SUCCEEDED)
        << "terminal state written more than once";
  }

  ASSERT_NO_FATAL_FAILURE(ExpectPublishedRevenue("2025-03-01", "2025-03-08"));

  // Get, List and a Watch of the finished job agree.
  absl::StatusOr<v1::Backfill> got = client_->Get(job.id());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->state(), v1::BACKFILL_STATE_SUCCEEDED);
  std::vector<v1::Backfill> again = WatchToEnd(job.id());
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].state(), v1::BACKFILL_STATE_SUCCEEDED);

  v1::ListBackfillsRequest list;
  list.add_states(v1::BACKFILL_STATE_SUCCEEDED);
  absl::StatusOr<v1::ListBackfillsResponse> listed = client_->List(list);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->backfills_size(), 1);
  EXPECT_EQ(listed->backfills(0).id(), job.id());
  list.clear_states();
  list.add_states(v1::BACKFILL_STATE_FAILED);
  listed = client_->List(list);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->backfills_size(), 0);

  // A finished job cannot be cancelled.
  absl::StatusOr<v1::Backfill> cancelled = client_->Cancel(job.id(), "oops");
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kFailedPrecondition)
      << cancelled.status();
}

TEST_F(ServerServiceTest, SubmitIsIdempotentPerKey) {
  const v1::BackfillRequest request =
      RangeRequest("daily_revenue", "2025-03-01", "2025-03-03");
  absl::StatusOr<v1::SubmitBackfillResponse> first =
      client_->Submit(request, "key-1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->created());
  EXPECT_EQ(first->backfill().idempotency_key(), "key-1");

  absl::StatusOr<v1::SubmitBackfillResponse> second =
      client_->Submit(request, "key-1");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->created());
  EXPECT_EQ(second->backfill().id(), first->backfill().id());

  absl::StatusOr<v1::SubmitBackfillResponse> different = client_->Submit(
      RangeRequest("daily_revenue", "2025-03-01", "2025-03-04"), "key-1");
  EXPECT_EQ(different.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(absl::AsciiStrToLower(different.status().message()),
              HasSubstr("idempotency"));
  EXPECT_EQ(StoredJobs(), 1u);
  WatchToEnd(first->backfill().id());
}

TEST_F(ServerServiceTest, BadRequestsAreRejectedAndChangeNothing) {
  struct Case {
    const char* name;
    v1::BackfillRequest request;
  };
  std::vector<Case> cases;
  cases.push_back(
      {"unknown dataset", RangeRequest("no_such", "2025-03-01", "2025-03-02")});
  cases.push_back({"inverted range",
                   RangeRequest("daily_revenue", "2025-03-05", "2025-03-02")});
  cases.push_back({"empty range",
                   RangeRequest("daily_revenue", "2025-03-02", "2025-03-02")});
  v1::BackfillRequest malformed;
  malformed.set_dataset("daily_revenue");
  malformed.add_partitions("2025-3-1");
  malformed.set_reason("fix");
  cases.push_back({"malformed partition", malformed});
  cases.push_back({"missing reason", RangeRequest("daily_revenue", "2025-03-01",
                                                  "2025-03-02", "")});
  cases.push_back(
      {"source dataset", RangeRequest("orders", "2025-03-01", "2025-03-02")});
  for (const Case& c : cases) {
    absl::StatusOr<v1::SubmitBackfillResponse> submitted =
        client_->Submit(c.request, "");
    EXPECT_EQ(submitted.status().code(), absl::StatusCode::kInvalidArgument)
        << c.name << ": " << submitted.status();
    EXPECT_FALSE(submitted.status().message().empty()) << c.name;
    if (std::string(c.name) != "missing reason") {
      EXPECT_EQ(client_->Plan(c.request).status().code(),
                absl::StatusCode::kInvalidArgument)
          << c.name;
    }
  }

  for (const char* id : {"", "42", "bf-", "bf-x1", "job-1", "bf-1 "}) {
    EXPECT_EQ(client_->Get(id).status().code(),
              absl::StatusCode::kInvalidArgument)
        << "\"" << id << "\"";
    EXPECT_EQ(client_->Cancel(id, "r").status().code(),
              absl::StatusCode::kInvalidArgument)
        << "\"" << id << "\"";
  }
  absl::Status watch_bad =
      client_->Watch("nope", [](const v1::Backfill&) { return true; });
  EXPECT_EQ(watch_bad.code(), absl::StatusCode::kInvalidArgument) << watch_bad;

  EXPECT_EQ(client_->Get("bf-999").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->Cancel("bf-999", "r").status().code(),
            absl::StatusCode::kNotFound);
  absl::Status watch_unknown =
      client_->Watch("bf-999", [](const v1::Backfill&) { return true; });
  EXPECT_EQ(watch_unknown.code(), absl::StatusCode::kNotFound) << watch_unknown;

  v1::ListBackfillsRequest list;
  list.set_page_size(-1);
  EXPECT_EQ(client_->List(list).status().code(),
            absl::StatusCode::kInvalidArgument);
  list.set_page_size(0);
  list.add_states(v1::BACKFILL_STATE_UNSPECIFIED);
  EXPECT_EQ(client_->List(list).status().code(),
            absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(StoredJobs(), 0u);
}

// --max-cost over gRPC: a submit over the budget is FAILED_PRECONDITION and
// creates nothing; a plan over it is shown with the refusal; a job within it
// keeps its budget and reports each dataset's estimate and actual cost.
TEST_F(ServerServiceTest, MaxCostRefusesASubmitOverItAndCreatesNothing) {
  // Expected figures with plain SQL: daily_revenue of a day reads that
  // day's orders and every customer.
  sqlite3* db = nullptr;
  ASSERT_EQ(
      sqlite3_open_v2(warehouse_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
      SQLITE_OK);
  auto count = [&](const char* sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, nullptr), SQLITE_OK);
    int64_t n = -1;
    if (st != nullptr && sqlite3_step(st) == SQLITE_ROW) {
      n = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return n;
  };
  const int64_t estimate = count(
      "SELECT (SELECT COUNT(*) FROM raw_orders WHERE order_date >= "
      "'2025-03-02' AND order_date < '2025-03-05') + 3 * (SELECT COUNT(*) "
      "FROM dim_customers)");
  const int64_t full = count(
      "SELECT (SELECT COUNT(*) FROM raw_orders) + (SELECT COUNT(DISTINCT "
      "order_date) FROM raw_orders) * (SELECT COUNT(*) FROM dim_customers)");
  sqlite3_close(db);
  ASSERT_GT(estimate, 1);
  const std::string refusal = absl::StrCat(
      "estimated cost ", estimate, " input_rows exceeds `max_cost` ",
      estimate - 1, " (a full reload costs ", full,
      " input_rows): narrow the scope or raise the limit");

  v1::BackfillRequest request =
      RangeRequest("daily_revenue", "2025-03-02", "2025-03-05");
  request.set_max_cost(static_cast<double>(estimate - 1));
  absl::StatusOr<v1::SubmitBackfillResponse> refused =
      client_->Submit(request, "budget-key");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition)
      << refused.status();
  EXPECT_EQ(refused.status().message(), refusal);
  EXPECT_EQ(StoredJobs(), 0u);

  absl::StatusOr<v1::PlanBackfillResponse> plan = client_->Plan(request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_DOUBLE_EQ(plan->cost().backfill(), static_cast<double>(estimate));
  EXPECT_DOUBLE_EQ(plan->cost().full_reload(), static_cast<double>(full));
  EXPECT_DOUBLE_EQ(plan->cost().max_cost(), static_cast<double>(estimate - 1));
  EXPECT_EQ(plan->cost().refused(), refusal);
  EXPECT_EQ(plan->datasets(0).estimate_source(),
            v1::ESTIMATE_SOURCE_ROW_COUNTS);

  // Bad budgets are INVALID_ARGUMENT naming the field, and change nothing.
  for (double bad : {-1.0, std::nan(""), HUGE_VAL}) {
    request.set_max_cost(bad);
    absl::Status status = client_->Submit(request, "").status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(status.message(), HasSubstr("max_cost")) << bad;
  }
  EXPECT_EQ(StoredJobs(), 0u);

  // At the estimate: within the budget.
  request.set_max_cost(static_cast<double>(estimate));
  absl::StatusOr<v1::SubmitBackfillResponse> submitted =
      client_->Submit(request, "budget-key");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_DOUBLE_EQ(submitted->backfill().request().max_cost(),
                   static_cast<double>(estimate));
  EXPECT_TRUE(submitted->backfill().cost_estimate().refused().empty());
  WatchToEnd(submitted->backfill().id());
  absl::StatusOr<v1::Backfill> done = client_->Get(submitted->backfill().id());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), v1::BACKFILL_STATE_SUCCEEDED) << done->message();
  ASSERT_EQ(done->dataset_costs_size(), 1);
  const v1::DatasetCost& cost = done->dataset_costs(0);
  EXPECT_EQ(cost.dataset(), "daily_revenue");
  EXPECT_DOUBLE_EQ(cost.estimated(), static_cast<double>(estimate));
  EXPECT_DOUBLE_EQ(cost.actual(), static_cast<double>(estimate));
  EXPECT_EQ(cost.source(), v1::ESTIMATE_SOURCE_ROW_COUNTS);
  EXPECT_DOUBLE_EQ(done->actual_cost(), static_cast<double>(estimate));
  EXPECT_EQ(StoredJobs(), 1u);
}

TEST_F(ServerServiceTest, DiffPagesThroughPartitionsAndApproveIsValidated) {
  absl::StatusOr<v1::SubmitBackfillResponse> submitted = client_->Submit(
      RangeRequest("daily_revenue", "2025-03-01", "2025-03-06"), "diff-key");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->backfill().id();
  std::vector<v1::Backfill> updates = WatchToEnd(id);
  ASSERT_FALSE(updates.empty());
  ASSERT_EQ(updates.back().state(), v1::BACKFILL_STATE_SUCCEEDED);

  // GetBackfill carries the per-dataset summary: a first load, all added.
  const RevenueTable published = ReadPublished(warehouse_);
  absl::StatusOr<v1::Backfill> job = client_->Get(id);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->diff_size(), 1);
  EXPECT_EQ(job->diff(0).dataset(), "daily_revenue");
  EXPECT_TRUE(job->diff(0).by_primary_key());
  EXPECT_EQ(job->diff(0).partitions(), 5);
  EXPECT_EQ(job->diff(0).rows_before(), 0);
  EXPECT_EQ(job->diff(0).added(), static_cast<int64_t>(published.size()));
  double revenue = 0;
  for (const auto& [key, row] : published) revenue += row.revenue;
  ASSERT_EQ(job->diff(0).measures_size(), 2);
  EXPECT_EQ(job->diff(0).measures(0).column(), "revenue");
  EXPECT_NEAR(job->diff(0).measures(0).delta(), revenue, 1e-6);
  EXPECT_FALSE(job->has_approval());

  // Pages of 2 partitions: 3 pages, every partition once, in order.
  v1::DiffBackfillRequest request;
  request.set_id(id);
  request.set_page_size(2);
  request.set_sample_rows(1);
  std::vector<std::string> seen;
  for (int page = 0; page < 5; ++page) {
    absl::StatusOr<v1::DiffBackfillResponse> response = client_->Diff(request);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->state(), v1::BACKFILL_STATE_SUCCEEDED);
    ASSERT_EQ(response->datasets_size(), 1);
    EXPECT_EQ(response->datasets(0).partitions(), 5);
    for (const v1::PartitionDiff& p : response->partitions()) {
      seen.push_back(p.partition());
      EXPECT_LE(p.samples_size(), 1);
      int64_t rows = 0;
      for (const auto& [key, row] : published)
        rows += key.first == p.partition();
      EXPECT_EQ(p.rows_after(), rows) << p.partition();
      EXPECT_EQ(p.added(), rows) << p.partition();
    }
    if (response->next_page_token().empty()) break;
    request.set_page_token(response->next_page_token());
  }
  EXPECT_THAT(seen,
              ::testing::ElementsAre("2025-03-01", "2025-03-02", "2025-03-03",
                                     "2025-03-04", "2025-03-05"));

  // Bad DiffBackfill requests.
  auto diff_code = [&](const std::function<void(v1::DiffBackfillRequest*)>& f) {
    v1::DiffBackfillRequest r;
    r.set_id(id);
    f(&r);
    return client_->Diff(r).status().code();
  };
  EXPECT_EQ(diff_code([](auto* r) { r->set_id("bf-x"); }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(diff_code([](auto* r) { r->set_id("bf-999"); }),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(diff_code([](auto* r) { r->set_sample_rows(11); }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(diff_code([](auto* r) { r->set_sample_rows(-1); }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(diff_code([](auto* r) { r->set_page_size(-1); }),
            absl::StatusCode::kInvalidArgument);
  // Over the maximum (1000): served as the maximum, every partition here.
  for (int over : {1001, std::numeric_limits<int32_t>::max()}) {
    v1::DiffBackfillRequest r;
    r.set_id(id);
    r.set_page_size(over);
    absl::StatusOr<v1::DiffBackfillResponse> all = client_->Diff(r);
    ASSERT_TRUE(all.ok()) << over << ": " << all.status();
    EXPECT_EQ(all->partitions_size(), 5) << over;
    EXPECT_EQ(all->next_page_token(), "") << over;
  }
  EXPECT_EQ(diff_code([](auto* r) { r->set_page_token("abc"); }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(diff_code([](auto* r) { r->set_page_token("0"); }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(diff_code([](auto* r) { r->set_dataset("orders"); }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(diff_code([](auto* r) { r->set_sample_rows(0); }),
            absl::StatusCode::kOk);

  // Bad ApproveBackfill requests; a SUCCEEDED job needs no approval.
  auto approve = [&](const std::string& job_id, const std::string& reason) {
    v1::ApproveBackfillRequest r;
    r.set_id(job_id);
    r.set_reason(reason);
    return client_->Approve(r).status();
  };
  EXPECT_EQ(approve("", "ok").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(approve("bf-1 ", "ok").code(), absl::StatusCode::kInvalidArgument);
  absl::Status no_reason = approve(id, "");
  EXPECT_EQ(no_reason.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_reason.message()), HasSubstr("reason"));
  EXPECT_EQ(approve(id, std::string(5000, 'x')).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(approve("bf-999", "ok").code(), absl::StatusCode::kNotFound);
  absl::Status done = approve(id, "ok");
  EXPECT_EQ(done.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(done.message()), HasSubstr("SUCCEEDED"));
  EXPECT_FALSE(client_->Get(id)->has_approval());
}

TEST_F(ServerServiceTest, ListBackfillsPagesNewestFirst) {
  std::vector<std::string> ids;
  const std::vector<std::pair<std::string, std::string>> ranges = {
      {"2025-03-01", "2025-03-02"},
      {"2025-03-03", "2025-03-04"},
      {"2025-03-05", "2025-03-06"}};
  for (const auto& [from, to] : ranges) {
    auto submitted =
        client_->Submit(RangeRequest("daily_revenue", from, to), "");
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    ids.push_back(submitted->backfill().id());
  }
  v1::ListBackfillsRequest list;
  list.set_page_size(2);
  auto listed = client_->List(list);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->backfills_size(), 2);
  EXPECT_EQ(listed->backfills(0).id(), ids[2]);
  EXPECT_EQ(listed->backfills(1).id(), ids[1]);
  list.set_page_size(0);  // default 50
  listed = client_->List(list);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->backfills_size(), 3);
  for (const std::string& id : ids) WatchToEnd(id);
}

TEST_F(ServerServiceTest, WatchEndsPromptlyWhenTheServerShutsDown) {
  // A job the running manager never schedules (written to the store
  // directly) stays QUEUED, so its Watch would run forever.
  Job job;
  job.request = RequestFromProto(
      RangeRequest("daily_revenue", "2025-03-01", "2025-03-02"));
  DatasetPlan dp;
  dp.dataset = "daily_revenue";
  dp.partitions = {"2025-03-01"};
  dp.reason = "requested";
  job.plan.datasets.push_back(dp);
  absl::StatusOr<CreateJobResult> created = store_->CreateJob(job, absl::Now());
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string id = created->job.id;

  std::vector<v1::Backfill> updates;
  std::promise<absl::Status> done;
  std::thread watcher([&] {
    done.set_value(client_->Watch(id, [&](const v1::Backfill& b) {
      updates.push_back(b);
      return true;
    }));
  });
  std::future<absl::Status> result = done.get_future();
  EXPECT_EQ(result.wait_for(std::chrono::milliseconds(500)),
            std::future_status::timeout);
  const absl::Time stop = absl::Now();
  api_->BeginShutdown();
  ASSERT_EQ(result.wait_for(std::chrono::seconds(5)),
            std::future_status::ready);
  const absl::Status status = result.get();
  watcher.join();
  EXPECT_LT(absl::Now() - stop, absl::Seconds(2));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  ASSERT_EQ(updates.size(), 1u);  // the current state, once
  EXPECT_EQ(updates[0].id(), id);
  EXPECT_EQ(updates[0].state(), v1::BACKFILL_STATE_QUEUED);
}

TEST_F(ServerServiceTest, ASubmitDuringShutdownIsRefusedAndCreatesNothing) {
  api_->BeginShutdown();
  absl::StatusOr<v1::SubmitBackfillResponse> refused = client_->Submit(
      RangeRequest("daily_revenue", "2025-03-01", "2025-03-02"), "late-key");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable)
      << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("shutting down"));
  v1::ListBackfillsRequest list;
  absl::StatusOr<v1::ListBackfillsResponse> listed = client_->List(list);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->backfills_size(), 0);
}

// `message` serialized, with `marker` replaced by `bytes` of the same length
// (so that every length prefix stays right): how invalid UTF-8 gets into a
// `string` field on the wire.
std::string Patched(const google::protobuf::Message& message,
                    const std::string& marker, const std::string& bytes) {
  EXPECT_EQ(marker.size(), bytes.size());
  std::string wire = message.SerializeAsString();
  const size_t at = wire.find(marker);
  EXPECT_NE(at, std::string::npos) << marker;
  if (at != std::string::npos) wire.replace(at, marker.size(), bytes);
  return wire;
}

TEST_F(ServerServiceTest, InvalidUtf8InAReasonIsInvalidArgumentWithAMessage) {
  v1::SubmitBackfillRequest submit;
  *submit.mutable_request() = RangeRequest("daily_revenue", "2025-03-01",
                                           "2025-03-02", "fix MARK refunds");
  std::string response;
  grpc::Status status = RawCall(
      target_, kSubmitMethod, Patched(submit, "MARK", "M\xff\xfeK"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << status.error_code() << ": " << status.error_message();
  EXPECT_FALSE(status.error_message().empty());
  EXPECT_THAT(status.error_message(), HasSubstr("request.reason"));
  EXPECT_THAT(status.error_message(), HasSubstr("not valid UTF-8"));
  EXPECT_EQ(StoredJobs(), 0u);

  // A partition, in PlanBackfill: named with its index.
  v1::PlanBackfillRequest plan;
  plan.mutable_request()->set_dataset("daily_revenue");
  plan.mutable_request()->add_partitions("2025-03-01");
  plan.mutable_request()->add_partitions("2025-03-0X");
  status = RawCall(target_, "/backfill.v1.BackfillService/PlanBackfill",
                   Patched(plan, "0X", "0\xc3"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("request.partitions[1]"));

  // The same way in, valid UTF-8 that is not ASCII is accepted and kept.
  const std::string reason = "r\xc3\xa9parer les remboursements \xe4\xbf\xae";
  submit.mutable_request()->set_reason(reason);
  status =
      RawCall(target_, kSubmitMethod, submit.SerializeAsString(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  v1::SubmitBackfillResponse submitted;
  ASSERT_TRUE(submitted.ParseFromString(response));
  EXPECT_TRUE(submitted.created());
  EXPECT_EQ(submitted.backfill().request().reason(), reason);
  WatchToEnd(submitted.backfill().id());
}

// Every method of the service, whatever its request: a request protobuf
// cannot parse is INVALID_ARGUMENT with a message, never gRPC's INTERNAL.
TEST_F(ServerServiceTest,
       EveryMethodAnswersAnUnparsableRequestWithInvalidArgument) {
  const google::protobuf::ServiceDescriptor* service =
      v1::PlanBackfillRequest::descriptor()->file()->FindServiceByName(
          "BackfillService");
  ASSERT_NE(service, nullptr);
  ASSERT_GE(service->method_count(), 7);
  for (int m = 0; m < service->method_count(); ++m) {
    const google::protobuf::MethodDescriptor* method = service->method(m);
    const std::string name =
        absl::StrCat("/", service->full_name(), "/", method->name());
    std::string response;
    // Field 1, length 5, but only two bytes follow.
    grpc::Status status = RawCall(target_, name,
                                  std::string("\x0a\x05"
                                              "ab",
                                              4),
                                  &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << name << ": " << status.error_code() << " " << status.error_message();
    EXPECT_THAT(status.error_message(),
                HasSubstr(method->input_type()->full_name()))
        << name;

    // Invalid UTF-8 in the first text field of the request, or of its
    // first sub-message that has one.
    const google::protobuf::Descriptor* type = method->input_type();
    std::unique_ptr<google::protobuf::Message> request(
        google::protobuf::MessageFactory::generated_factory()
            ->GetPrototype(type)
            ->New());
    google::protobuf::Message* holder = request.get();
    std::string path;
    for (int depth = 0; depth < 2 && holder != nullptr; ++depth) {
      const google::protobuf::Descriptor* d = holder->GetDescriptor();
      const google::protobuf::FieldDescriptor* text = nullptr;
      const google::protobuf::FieldDescriptor* sub = nullptr;
      for (int f = 0; f < d->field_count(); ++f) {
        const google::protobuf::FieldDescriptor* field = d->field(f);
        if (field->type() == google::protobuf::FieldDescriptor::TYPE_STRING &&
            text == nullptr) {
          text = field;
        }
        if (field->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE &&
            !field->is_repeated() && sub == nullptr) {
          sub = field;
        }
      }
      const google::protobuf::Reflection* reflection = holder->GetReflection();
      if (text != nullptr) {
        if (text->is_repeated()) {
          reflection->AddString(holder, text, "MARK");
          absl::StrAppend(&path, text->name(), "[0]");
        } else {
          reflection->SetString(holder, text, "MARK");
          absl::StrAppend(&path, text->name());
        }
        holder = nullptr;
      } else if (sub != nullptr) {
        holder = reflection->MutableMessage(holder, sub);
        absl::StrAppend(&path, sub->name(), ".");
      } else {
        holder = nullptr;
        path.clear();
      }
    }
    if (path.empty() || path.back() == '.') continue;  // no text field
    status =
        RawCall(target_, name, Patched(*request, "MARK", "M\xffRK"), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << name << ": " << status.error_code() << " " << status.error_message();
    EXPECT_THAT(status.error_message(),
                HasSubstr(absl::StrCat("field ", path, " is not valid UTF-8")))
        << name;
  }
  EXPECT_EQ(StoredJobs(), 0u);
}

TEST_F(ServerServiceTest, RollbackValidatesItsRequestAndRestores) {
  absl::StatusOr<v1::SubmitBackfillResponse> submitted = client_->Submit(
      RangeRequest("daily_revenue", "2025-03-01", "2025-03-03"), "");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->backfill().id();
  ASSERT_EQ(WatchToEnd(id).back().state(), v1::BACKFILL_STATE_SUCCEEDED);
  const RevenueTable published = ReadPublished(warehouse_);
  ASSERT_FALSE(published.empty());

  v1::RollbackBackfillRequest request;
  request.set_reason("wrong refunds");
  // The id: missing, malformed, unknown.
  absl::StatusOr<v1::Backfill> r = client_->Rollback(request);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("`id` is empty"));
  request.set_id("job-1");
  r = client_->Rollback(request);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  request.set_id("bf-999");
  r = client_->Rollback(request);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  // The reason: missing or blank.
  request.set_id(id);
  for (const char* reason : {"", "  \t"}) {
    request.set_reason(reason);
    r = client_->Rollback(request);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("reason"));
  }
  request.set_reason(std::string(5000, 'x'));
  r = client_->Rollback(request);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  // A job that published nothing.
  Job queued;
  queued.request = RequestFromProto(
      RangeRequest("daily_revenue", "2025-03-05", "2025-03-06"));
  DatasetPlan queued_plan;
  queued_plan.dataset = "daily_revenue";
  queued_plan.partitions = {"2025-03-05"};
  queued_plan.reason = "requested";
  queued.plan.datasets.push_back(queued_plan);
  absl::StatusOr<CreateJobResult> created =
      store_->CreateJob(queued, absl::Now());
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(store_
                  ->TransitionJob(created->job.id, JobState::kQueued,
                                  JobState::kCancelled, "cancelled",
                                  absl::Now())
                  .ok());
  request.set_id(created->job.id);
  request.set_reason("wrong refunds");
  r = client_->Rollback(request);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(),
              HasSubstr("is CANCELLED: nothing of it was published"));
  // Nothing changed so far.
  EXPECT_EQ(ReadPublished(warehouse_).size(), published.size());
  EXPECT_EQ(client_->Get(id)->state(), v1::BACKFILL_STATE_SUCCEEDED);

  // The rollback of the initial load: the table is empty again.
  request.set_id(id);
  r = client_->Rollback(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->state(), v1::BACKFILL_STATE_ROLLED_BACK);
  ASSERT_TRUE(r->has_rollback());
  EXPECT_EQ(r->rollback().reason(), "wrong refunds");
  EXPECT_THAT(r->rollback().requested_by(), HasSubstr("unknown ("));
  EXPECT_TRUE(r->rollback().has_time());
  EXPECT_FALSE(r->rollback().forced());
  EXPECT_EQ(r->rollback().partitions_restored(), 2);
  EXPECT_EQ(r->rollback().rows_restored(), 0);
  EXPECT_TRUE(ReadPublished(warehouse_).empty());
  EXPECT_THAT(r->message(), HasSubstr("restored 2 partitions (0 rows)"));
  // Watch of the rolled-back job ends at once with it.
  EXPECT_EQ(WatchToEnd(id).back().state(), v1::BACKFILL_STATE_ROLLED_BACK);

  // The datasets show their retention policy (the default here).
  absl::StatusOr<v1::ListDatasetsResponse> datasets = client_->ListDatasets();
  ASSERT_TRUE(datasets.ok()) << datasets.status();
  for (const v1::Dataset& d : datasets->datasets()) {
    if (d.name() != "daily_revenue") continue;
    EXPECT_EQ(d.retention().versions(), 10);
    EXPECT_EQ(d.retention().max_age_seconds(), 0);
    EXPECT_FALSE(d.retention().declared());
  }
}

// Updates are coalesced, but not the end: with an hour between updates, a
// watch still ends as soon as the job does, with its final state.
class WatchCoalescingTest : public ServerServiceTest {
 protected:
  ServiceLimits Limits() const override {
    ServiceLimits limits;
    limits.watch_min_interval = absl::Hours(1);
    return limits;
  }
};

TEST_F(WatchCoalescingTest, TheEndOfAJobIsSentAtOnceWhateverTheInterval) {
  absl::StatusOr<v1::SubmitBackfillResponse> submitted = client_->Submit(
      RangeRequest("daily_revenue", "2025-03-01", "2025-03-08"), "");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  // Before the end was exempt from the interval, this watch would have
  // waited the hour out (and ctest's timeout failed it).
  std::vector<v1::Backfill> updates = WatchToEnd(submitted->backfill().id());
  ASSERT_FALSE(updates.empty());
  EXPECT_EQ(updates.back().state(), v1::BACKFILL_STATE_SUCCEEDED);
  EXPECT_EQ(updates.back().partitions().published(), 7);
  // The first update, then at most the end: nothing else within the hour.
  EXPECT_LE(updates.size(), 2u);
  ASSERT_NO_FATAL_FAILURE(ExpectPublishedRevenue("2025-03-01", "2025-03-08"));
}

}  // namespace
}  // namespace server_service_test
}  // namespace backfill
