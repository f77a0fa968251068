// In-process gRPC tests of BackfillServiceImpl over real storage
// (tests/testing/server_service_fixture.h): health, --affected-by, request
// validation of ids, partitions and audit queries, and the reasons and
// field violations every refusal carries.

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
namespace server_service_requests_test {
namespace {

using ::backfill::testing::HealthCheck;
using ::backfill::testing::RawCall;
using ::backfill::testing::Refusal;
using ::backfill::testing::WireError;
using namespace ::backfill::testing;  // NOLINT: the fixture and its helpers

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(ServerServiceTest, HealthIsServing) {
  const std::string kServing("\x08\x01", 2);
  std::string response;
  grpc::Status status = HealthCheck(target_, "", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response, kServing);
  status = HealthCheck(target_, "backfill.v1.BackfillService", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response, kServing);
  status = HealthCheck(target_, "no.such.Service", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
}

// The days of raw_orders holding a row where `condition` holds, with plain
// SQL on the warehouse file.
std::vector<std::string> DaysWhere(const std::string& warehouse,
                                   const std::string& condition) {
  std::vector<std::string> days;
  sqlite3* db = nullptr;
  EXPECT_EQ(
      sqlite3_open_v2(warehouse.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
      SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  const std::string sql =
      absl::StrCat("SELECT DISTINCT order_date FROM raw_orders WHERE ",
                   condition, " ORDER BY 1");
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  while (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
    days.push_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return days;
}

v1::BackfillRequest AffectedRequest(const std::string& affected_by) {
  v1::BackfillRequest request;
  request.set_dataset("daily_revenue");
  request.set_affected_by(affected_by);
  request.set_reason("fix refunds");
  request.set_requested_by("server_service_test");
  return request;
}

TEST_F(ServerServiceTest, AffectedByPlansTheMatchingDays) {
  const std::vector<std::string> days =
      DaysWhere(warehouse_, "refund > 0 AND amount > 70");
  ASSERT_FALSE(days.empty());
  ASSERT_LT(days.size(), static_cast<size_t>(kDays));
  absl::StatusOr<v1::PlanBackfillResponse> plan =
      client_->Plan(AffectedRequest("orders: refund > 0 AND amount > 70"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->datasets_size(), 1);
  EXPECT_EQ(std::vector<std::string>(plan->datasets(0).partitions().begin(),
                                     plan->datasets(0).partitions().end()),
            days);
  EXPECT_EQ(plan->datasets(0).reason(),
            "requested: affected by orders: refund > 0 AND amount > 70");
  EXPECT_EQ(StoredJobs(), 0u);

  absl::StatusOr<v1::PlanBackfillResponse> none =
      client_->Plan(AffectedRequest("orders: refund > 1000"));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(none.status().message(),
            "no partition of orders has a row where refund > 1000; nothing "
            "to backfill");
}

TEST_F(ServerServiceTest, BadAffectedByIsInvalidArgumentAndCreatesNothing) {
  struct Case {
    const char* name;
    v1::BackfillRequest request;
    const char* says;
  };
  std::vector<Case> cases;
  v1::BackfillRequest with_range = AffectedRequest("orders: refund > 0");
  with_range.set_from_partition("2025-03-01");
  with_range.set_to_partition("2025-03-03");
  cases.push_back({"with a range", with_range, "scope of its own"});
  v1::BackfillRequest with_list = AffectedRequest("orders: refund > 0");
  with_list.add_partitions("2025-03-01");
  cases.push_back({"with partitions", with_list, "scope of its own"});
  cases.push_back({"syntax error", AffectedRequest("orders: refund >"),
                   "predicate \"refund >\""});
  cases.push_back({"unknown column", AffectedRequest("orders: refnud > 0"),
                   "no such column: refnud"});
  cases.push_back({"escape", AffectedRequest("orders: 1) OR (1"),
                   "predicate \"1) OR (1\""});
  cases.push_back({"statements",
                   AffectedRequest("orders: 1; DELETE FROM raw_orders"),
                   "contains ';'"});
  cases.push_back({"other table",
                   AffectedRequest("orders: customer_id IN (SELECT "
                                   "customer_id FROM dim_customers)"),
                   "reads table dim_customers"});
  cases.push_back({"unknown dataset", AffectedRequest("ordres: refund > 0"),
                   "unknown dataset \"ordres\""});
  cases.push_back(
      {"no colon", AffectedRequest("orders refund > 0"), "has no ':'"});
  cases.push_back({"too long",
                   AffectedRequest(absl::StrCat("orders: refund > 0",
                                                std::string(5000, ' '), "+ 1")),
                   "at most 4096"});
  cases.push_back({"control character",
                   AffectedRequest("orders: refund > 0\x1b[2J"),
                   "control character"});
  for (const Case& c : cases) {
    absl::StatusOr<v1::PlanBackfillResponse> plan = client_->Plan(c.request);
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument)
        << c.name << ": " << plan.status();
    EXPECT_THAT(plan.status().message(), HasSubstr("affected_by")) << c.name;
    EXPECT_THAT(plan.status().message(), HasSubstr(c.says)) << c.name;
    absl::StatusOr<v1::SubmitBackfillResponse> submitted =
        client_->Submit(c.request, "");
    EXPECT_EQ(submitted.status().code(), absl::StatusCode::kInvalidArgument)
        << c.name << ": " << submitted.status();
  }
  EXPECT_EQ(StoredJobs(), 0u);
  EXPECT_EQ(DaysWhere(warehouse_, "1").size(), static_cast<size_t>(kDays));
}

TEST_F(ServerServiceTest, AffectedByIsKeptWithTheJobAndInItsFingerprint) {
  const v1::BackfillRequest request =
      AffectedRequest("orders: refund > 0 AND amount > 70");
  absl::StatusOr<v1::SubmitBackfillResponse> first =
      client_->Submit(request, "affected-1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->backfill().request().affected_by(),
            "orders: refund > 0 AND amount > 70");
  EXPECT_TRUE(first->backfill().request().from_partition().empty());
  WatchToEnd(first->backfill().id());
  absl::StatusOr<v1::Backfill> got = client_->Get(first->backfill().id());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->request().affected_by(), "orders: refund > 0 AND amount > 70");
  EXPECT_EQ(got->state(), v1::BACKFILL_STATE_SUCCEEDED);

  absl::StatusOr<v1::SubmitBackfillResponse> again =
      client_->Submit(request, "affected-1");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created());
  EXPECT_EQ(again->backfill().id(), first->backfill().id());

  absl::StatusOr<v1::SubmitBackfillResponse> other = client_->Submit(
      AffectedRequest("orders: refund > 0 AND amount > 60"), "affected-1");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.status().message(), HasSubstr("`idempotency_key`"));
  EXPECT_EQ(StoredJobs(), 1u);
}

TEST(ValidateJobIdTest, AcceptsOnlyBfDigits) {
  EXPECT_TRUE(ValidateJobId("bf-1").ok());
  EXPECT_TRUE(ValidateJobId("bf-1234567890").ok());
  for (const char* bad : {"", "bf-", "bf-1a", "BF-1", "bf--1", "x bf-1",
                          "bf-123456789012345678901"}) {
    EXPECT_EQ(ValidateJobId(bad).code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST_F(ServerServiceTest, ExplainPartitionValidatesDatasetAndPartition) {
  auto unknown = client_->ExplainPartition("no_such_dataset", "2025-03-01");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("no_such_dataset"));
  auto empty = client_->ExplainPartition("", "2025-03-01");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.status().message(), HasSubstr("dataset"));
  for (const char* bad : {"2025-03", "2025-02-30", "2025-03-01T07", ""}) {
    auto r = client_->ExplainPartition("daily_revenue", bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("YYYY-MM-DD")) << bad;
  }
  // A valid partition never published: no versions, not stale.
  auto never = client_->ExplainPartition("daily_revenue", "2025-03-01");
  ASSERT_TRUE(never.ok()) << never.status();
  EXPECT_EQ(never->versions_size(), 0);
  EXPECT_FALSE(never->stale());
}

TEST_F(ServerServiceTest, ListAuditEventsValidatesItsRequest) {
  auto refused = [this](const v1::ListAuditEventsRequest& request,
                        const std::string& field) {
    auto r = client_->ListAuditEvents(request);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
        << request.ShortDebugString();
    EXPECT_THAT(r.status().message(), HasSubstr(field));
  };
  v1::ListAuditEventsRequest r;
  r.set_backfill_id("job-1");
  refused(r, "backfill_id");
  r = v1::ListAuditEventsRequest();
  r.set_page_size(-1);
  refused(r, "page_size");
  // Over the maximum: served as the maximum.
  r = v1::ListAuditEventsRequest();
  r.set_page_size(1001);
  EXPECT_TRUE(client_->ListAuditEvents(r).ok());
  r = v1::ListAuditEventsRequest();
  r.set_page_token("abc");
  refused(r, "page_token");
  r = v1::ListAuditEventsRequest();
  r.mutable_since()->set_nanos(-1);
  refused(r, "since");
  r = v1::ListAuditEventsRequest();
  r.mutable_since()->set_seconds(253402300800);  // 10000-01-01
  refused(r, "since");
  r = v1::ListAuditEventsRequest();
  r.set_backfill_id("bf-404");
  auto missing = client_->ListAuditEvents(r);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("bf-404"));
  // A valid empty log.
  auto none = client_->ListAuditEvents(v1::ListAuditEventsRequest());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->events_size(), 0);
  EXPECT_EQ(none->next_page_token(), "");
}

// Whether `path` ("request.partitions[1]") names a field of `type`.
bool NamesAField(const google::protobuf::Descriptor* type,
                 const std::string& path) {
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (type == nullptr) return false;
    const size_t bracket = part.find('[');
    const google::protobuf::FieldDescriptor* field =
        type->FindFieldByName(std::string(part.substr(0, bracket)));
    if (field == nullptr) return false;
    if (bracket != absl::string_view::npos && !field->is_repeated()) {
      return false;
    }
    type = field->message_type();
  }
  return true;
}

TEST_F(ServerServiceTest, RefusalsCarryAReasonAndNameTheRefusedFields) {
  struct Case {
    std::string label;
    std::string method;
    std::shared_ptr<google::protobuf::Message> request;
    grpc::StatusCode code;
    std::string reason;
    std::vector<std::string> fields;
    std::map<std::string, std::string> metadata = {};  // a subset expected
  };
  auto submit = [](v1::BackfillRequest r, const std::string& key = "") {
    auto m = std::make_shared<v1::SubmitBackfillRequest>();
    *m->mutable_request() = std::move(r);
    m->set_idempotency_key(key);
    return m;
  };
  auto plan = [](v1::BackfillRequest r) {
    auto m = std::make_shared<v1::PlanBackfillRequest>();
    *m->mutable_request() = std::move(r);
    return m;
  };
  auto get = [](const std::string& id) {
    auto m = std::make_shared<v1::GetBackfillRequest>();
    m->set_id(id);
    return m;
  };
  const auto range = [](const std::string& from, const std::string& to) {
    return RangeRequest("daily_revenue", from, to, "refunds were ignored");
  };
  v1::BackfillRequest list = range("", "");
  list.add_partitions("2025-03-01");
  list.add_partitions("2025-3-2");
  v1::BackfillRequest unknown = range("2025-03-01", "2025-03-02");
  unknown.set_dataset("no_such_dataset");
  v1::BackfillRequest negative_cost = range("2025-03-01", "2025-03-02");
  negative_cost.set_max_cost(-1);
  auto page = std::make_shared<v1::ListBackfillsRequest>();
  page->set_page_size(-1);
  auto partitions = std::make_shared<v1::ListPartitionsRequest>();

  const std::vector<Case> cases = {
      {"no reason",
       "SubmitBackfill",
       submit(RangeRequest("daily_revenue", "2025-03-01", "2025-03-02", "")),
       grpc::StatusCode::INVALID_ARGUMENT,
       "REASON_REQUIRED",
       {"request.reason"}},
      {"a malformed partition in a list",
       "PlanBackfill",
       plan(list),
       grpc::StatusCode::INVALID_ARGUMENT,
       "PARTITION_MALFORMED",
       {"request.partitions[1]"},
       {{"dataset", "daily_revenue"}}},
      {"a range end that is no day",
       "PlanBackfill",
       plan(range("2025-03-01", "2025-02-30")),
       grpc::StatusCode::INVALID_ARGUMENT,
       "PARTITION_MALFORMED",
       {"request.to_partition"}},
      {"a range start that is no day",
       "PlanBackfill",
       plan(range("2025-13-01", "2025-03-02")),
       grpc::StatusCode::INVALID_ARGUMENT,
       "PARTITION_MALFORMED",
       {"request.from_partition"}},
      {"a reversed range",
       "PlanBackfill",
       plan(range("2025-03-05", "2025-03-01")),
       grpc::StatusCode::INVALID_ARGUMENT,
       "RANGE_INVALID",
       {"request.from_partition", "request.to_partition"}},
      {"half a range",
       "PlanBackfill",
       plan(range("2025-03-05", "")),
       grpc::StatusCode::INVALID_ARGUMENT,
       "SCOPE_INVALID",
       {"request.to_partition"}},
      {"an unknown dataset",
       "PlanBackfill",
       plan(unknown),
       grpc::StatusCode::INVALID_ARGUMENT,
       "DATASET_NOT_FOUND",
       {"request.dataset"},
       {{"dataset", "no_such_dataset"}}},
      {"a negative budget",
       "SubmitBackfill",
       submit(negative_cost),
       grpc::StatusCode::INVALID_ARGUMENT,
       "MAX_COST_INVALID",
       {"request.max_cost"}},
      {"a malformed id",
       "GetBackfill",
       get("bf-x"),
       grpc::StatusCode::INVALID_ARGUMENT,
       "BACKFILL_ID_MALFORMED",
       {"id"}},
      {"an unknown id",
       "GetBackfill",
       get("bf-999"),
       grpc::StatusCode::NOT_FOUND,
       "BACKFILL_NOT_FOUND",
       {},
       {{"backfill_id", "bf-999"}}},
      {"a negative page size",
       "ListBackfills",
       page,
       grpc::StatusCode::INVALID_ARGUMENT,
       "PAGE_SIZE_OUT_OF_RANGE",
       {"page_size"}},
      {"no job to list",
       "ListPartitions",
       partitions,
       grpc::StatusCode::INVALID_ARGUMENT,
       "BACKFILL_ID_MISSING",
       {"backfill_id"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    WireError error = Refusal(target_, c.method, *c.request);
    EXPECT_EQ(error.code, c.code) << error.message;
    EXPECT_EQ(error.info.reason(), c.reason) << error.message;
    EXPECT_EQ(error.fields, c.fields) << error.message;
    for (const auto& [key, value] : c.metadata) {
      auto found = error.info.metadata().find(key);
      ASSERT_NE(found, error.info.metadata().end()) << key;
      EXPECT_EQ(found->second, value);
    }
    for (const std::string& field : error.fields) {
      EXPECT_TRUE(NamesAField(c.request->GetDescriptor(), field)) << field;
    }
    // API terms: fields by their proto names, never the CLI's flags.
    EXPECT_THAT(error.message, ::testing::Not(HasSubstr("--")));
    EXPECT_THAT(error.message, ::testing::Not(HasSubstr("backfillctl")));
  }
  EXPECT_EQ(StoredJobs(), 0u);
}

TEST_F(ServerServiceTest, RefusalsOfTheJobsStateAndOfAReusedKeyHaveReasons) {
  v1::SubmitBackfillRequest submit;
  *submit.mutable_request() = RangeRequest(
      "daily_revenue", "2025-03-01", "2025-03-03", "refunds were ignored");
  submit.set_idempotency_key("key-1");
  std::string response;
  ASSERT_TRUE(
      RawCall(target_, kSubmitMethod, submit.SerializeAsString(), &response)
          .ok());
  v1::SubmitBackfillResponse created;
  ASSERT_TRUE(created.ParseFromString(response));
  const std::string id = created.backfill().id();
  WatchToEnd(id);

  // The same key for another request: the key is the refused field.
  submit.mutable_request()->set_to_partition("2025-03-04");
  WireError reused = Refusal(target_, "SubmitBackfill", submit);
  EXPECT_EQ(reused.code, grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(reused.info.reason(), "IDEMPOTENCY_KEY_REUSED");
  EXPECT_EQ(reused.fields, std::vector<std::string>{"idempotency_key"});
  EXPECT_EQ(reused.info.metadata().at("backfill_id"), id);

  // A finished job cannot be cancelled: a conflict with its state.
  v1::CancelBackfillRequest cancel;
  cancel.set_id(id);
  WireError finished = Refusal(target_, "CancelBackfill", cancel);
  EXPECT_EQ(finished.code, grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(finished.info.reason(), "BACKFILL_STATE_CONFLICT");
  EXPECT_EQ(finished.info.metadata().at("backfill_id"), id);
  EXPECT_TRUE(finished.fields.empty());

  // An error without a finer reason names its code.
  v1::ExplainPartitionRequest why;
  why.set_dataset("orders");
  why.set_partition("2025-03-01");
  WireError source = Refusal(target_, "ExplainPartition", why);
  EXPECT_EQ(
      source.info.reason(),
      absl::StatusCodeToString(static_cast<absl::StatusCode>(source.code)));
}

TEST_F(ServerServiceTest, GetDatasetDescribesOneDatasetAsTheListDoes) {
  absl::StatusOr<v1::Dataset> revenue = client_->GetDataset("daily_revenue");
  ASSERT_TRUE(revenue.ok()) << revenue.status();
  EXPECT_EQ(revenue->name(), "daily_revenue");
  EXPECT_EQ(revenue->kind(), v1::DATASET_KIND_DERIVED);
  EXPECT_EQ(revenue->table(), "daily_revenue");
  EXPECT_EQ(revenue->grain(), v1::GRAIN_DAY);
  EXPECT_EQ(revenue->partition_column(), "ds");
  ASSERT_EQ(revenue->upstream_size(), 2);
  EXPECT_EQ(revenue->upstream(0).dataset(), "orders");
  EXPECT_EQ(revenue->upstream(1).dataset(), "customers");
  // The same message as its entry in ListDatasets.
  absl::StatusOr<v1::ListDatasetsResponse> all = client_->ListDatasets();
  ASSERT_TRUE(all.ok()) << all.status();
  for (const v1::Dataset& d : all->datasets()) {
    absl::StatusOr<v1::Dataset> one = client_->GetDataset(d.name());
    ASSERT_TRUE(one.ok()) << d.name() << ": " << one.status();
    EXPECT_EQ(one->SerializeAsString(), d.SerializeAsString()) << d.name();
  }

  v1::GetDatasetRequest unknown;
  unknown.set_name("daily_revenu");
  WireError missing = Refusal(target_, "GetDataset", unknown);
  EXPECT_EQ(missing.code, grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(missing.info.reason(), "DATASET_NOT_FOUND");
  EXPECT_EQ(missing.info.metadata().at("dataset"), "daily_revenu");
  EXPECT_THAT(missing.message, HasSubstr("\"daily_revenu\""));

  WireError empty = Refusal(target_, "GetDataset", v1::GetDatasetRequest());
  EXPECT_EQ(empty.code, grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(empty.info.reason(), "DATASET_MISSING");
  EXPECT_EQ(empty.fields, std::vector<std::string>{"name"});
}

}  // namespace
}  // namespace server_service_requests_test
}  // namespace backfill
