// Unit tests of server/proto_convert: domain <-> backfill.v1 conversions,
// and the gRPC form of errors (server/grpc_status).

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/base/error_details.h"
#include "core/model/pipeline_loader.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "server/governance_convert.h"
#include "server/grpc_status.h"
#include "server/listing_convert.h"
#include "server/proto_convert.h"

namespace backfill {
namespace server_convert_test {
namespace {

TEST(ProtoConvertTest, EveryJobStateMapsToItsEnumAndBack) {
  for (int i = 0; i < kJobStateCount; ++i) {
    const auto state = static_cast<JobState>(i);
    const v1::BackfillState proto = StateToProto(state);
    EXPECT_EQ(
        v1::BackfillState_Name(proto),
        std::string("BACKFILL_STATE_") + std::string(JobStateName(state)));
    ASSERT_TRUE(StateFromProto(proto).has_value());
    EXPECT_EQ(*StateFromProto(proto), state);
  }
  EXPECT_FALSE(StateFromProto(v1::BACKFILL_STATE_UNSPECIFIED).has_value());
  EXPECT_FALSE(StateFromProto(static_cast<v1::BackfillState>(99)).has_value());
}

TEST(ProtoConvertTest, RequestRoundTrips) {
  BackfillRequest request;
  request.dataset = "daily_revenue";
  request.from = "2025-03-01";
  request.to = "2025-03-04";
  request.partitions = {"a", "b"};
  request.reason = "why";
  request.ticket = "T-1";
  request.requested_by = "me";
  request.exclude_downstream = true;
  request.auto_detect = true;
  const BackfillRequest back = RequestFromProto(RequestToProto(request));
  EXPECT_EQ(back.dataset, request.dataset);
  EXPECT_EQ(back.from, request.from);
  EXPECT_EQ(back.to, request.to);
  EXPECT_EQ(back.partitions, request.partitions);
  EXPECT_EQ(back.reason, request.reason);
  EXPECT_EQ(back.ticket, request.ticket);
  EXPECT_EQ(back.requested_by, request.requested_by);
  EXPECT_TRUE(back.exclude_downstream);
  EXPECT_TRUE(back.auto_detect);
  EXPECT_FALSE(RequestFromProto(v1::BackfillRequest()).auto_detect);
}

TEST(ProtoConvertTest, JobTimestampsAndCosts) {
  Job job;
  job.id = "bf-7";
  job.state = JobState::kRunning;
  job.create_time = absl::FromUnixMillis(1740787200123);
  job.update_time = absl::FromUnixSeconds(1740787300);
  job.plan.cost.backfill = 30;
  job.plan.cost.full_reload = 120;
  DatasetPlan dp;
  dp.dataset = "x";
  dp.partitions = {"2025-03-01"};
  dp.reason = "requested";
  dp.cost = {30, 120};
  job.plan.datasets.push_back(dp);
  job.counts.total = 1;
  job.counts.running = 1;
  job.counts.unchanged = 30;
  job.counts.skipped = 12;
  job.actual_cost = 12;
  job.rows_written = 5;
  const v1::Backfill proto = JobToProto(job, Catalog());
  EXPECT_EQ(proto.id(), "bf-7");
  EXPECT_EQ(proto.state(), v1::BACKFILL_STATE_RUNNING);
  EXPECT_EQ(proto.create_time().seconds(), 1740787200);
  EXPECT_EQ(proto.create_time().nanos(), 123000000);
  EXPECT_EQ(proto.update_time().seconds(), 1740787300);
  EXPECT_FALSE(proto.has_start_time());
  EXPECT_FALSE(proto.has_end_time());
  EXPECT_EQ(proto.cost_estimate().unit(), v1::COST_UNIT_INPUT_ROWS);
  EXPECT_DOUBLE_EQ(proto.cost_estimate().ratio(), 0.25);
  ASSERT_EQ(proto.plan_size(), 1);
  EXPECT_EQ(proto.plan(0).grain(),
            v1::GRAIN_UNSPECIFIED);  // not in the (empty) catalog
  EXPECT_EQ(proto.partitions().running(), 1);
  EXPECT_EQ(proto.partitions().unchanged(), 30);
  EXPECT_EQ(proto.partitions().skipped(), 12);
  EXPECT_DOUBLE_EQ(proto.actual_cost(), 12);
  EXPECT_EQ(proto.rows_written(), 5);
}

TEST(ProtoConvertTest, PlanWithConflicts) {
  Plan plan;
  DatasetPlan dp;
  dp.dataset = "x";
  dp.partitions = {"a", "b"};
  dp.reason = "requested";
  dp.cost = {2, 4};
  plan.datasets.push_back(dp);
  plan.cost = {2, 4};
  plan.conflicts.push_back({"bf-3", "x", "a"});
  const v1::PlanBackfillResponse proto = PlanToProto(plan, Catalog());
  EXPECT_EQ(proto.total_partitions(), 2);
  EXPECT_DOUBLE_EQ(proto.cost().ratio(), 0.5);
  ASSERT_EQ(proto.conflicts_size(), 1);
  EXPECT_EQ(proto.conflicts(0).backfill_id(), "bf-3");
  EXPECT_EQ(proto.conflicts(0).partition(), "a");
}

TEST(ProtoConvertTest, PartitionReasonsOnlyWhenThereForEveryPartition) {
  DatasetPlan dp;
  dp.dataset = "monthly";
  dp.partitions = {"2025-01", "2025-02"};
  dp.partition_reasons = {"downstream of daily via rollup",
                          "downstream of daily via rollup"};
  v1::DatasetPlan proto = DatasetPlanToProto(dp, Catalog());
  ASSERT_EQ(proto.partition_reasons_size(), 2);
  EXPECT_EQ(proto.partition_reasons(1), "downstream of daily via rollup");
  dp.partition_reasons = {"", ""};  // a job planned before reasons were kept
  EXPECT_EQ(DatasetPlanToProto(dp, Catalog()).partition_reasons_size(), 0);
  dp.partition_reasons = {"requested"};  // misaligned
  EXPECT_EQ(DatasetPlanToProto(dp, Catalog()).partition_reasons_size(), 0);
}

TEST(ProtoConvertTest, DatasetUpstreamsCarryTheirLookback) {
  absl::StatusOr<Catalog> catalog = LoadPipelineTexts({{"p.yaml", R"(
datasets:
  - {name: days, kind: source, partition: {column: ds, grain: day}}
  - name: monthly
    kind: derived
    partition: {column: m, grain: month}
    upstream: [{dataset: days, mapping: rollup}]
    transform: SELECT 1 AS m
    contract: {columns: {m: TEXT}}
  - name: rolling
    kind: derived
    partition: {column: ds, grain: day}
    upstream: [{dataset: days, mapping: {lookback: 7}}]
    transform: SELECT 1 AS ds
    contract: {columns: {ds: TEXT}}
)"}});
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  v1::Dataset rolling = DatasetToProto(*catalog->Find("rolling"), *catalog);
  ASSERT_EQ(rolling.upstream_size(), 1);
  EXPECT_EQ(rolling.upstream(0).mapping(), v1::PARTITION_MAPPING_LOOKBACK);
  EXPECT_EQ(rolling.upstream(0).lookback(), 7);
  v1::Dataset monthly = DatasetToProto(*catalog->Find("monthly"), *catalog);
  EXPECT_EQ(monthly.upstream(0).mapping(), v1::PARTITION_MAPPING_ROLLUP);
  EXPECT_EQ(monthly.upstream(0).lookback(), 0);
}

TEST(ProtoConvertTest, TimeByKeyDatasetsCarryTheirKeyDimension) {
  absl::StatusOr<Catalog> catalog = LoadPipelineTexts({{"p.yaml", R"(
datasets:
  - {name: days, kind: source, partition: {column: ds, grain: day}}
  - name: by_region
    kind: derived
    partition: {column: ds, grain: day, key_column: region, keys: [eu, us]}
    upstream: [{dataset: days, mapping: identity}]
    transform: SELECT 1 AS ds, 2 AS region
    contract: {columns: {ds: TEXT, region: TEXT}}
)"}});
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  v1::Dataset by_region = DatasetToProto(*catalog->Find("by_region"), *catalog);
  EXPECT_EQ(by_region.grain(), v1::GRAIN_DAY);
  EXPECT_EQ(by_region.partition_column(), "ds");
  EXPECT_EQ(by_region.partition_key_column(), "region");
  ASSERT_EQ(by_region.partition_keys_size(), 2);
  EXPECT_EQ(by_region.partition_keys(0), "eu");
  EXPECT_EQ(by_region.partition_keys(1), "us");
  v1::Dataset days = DatasetToProto(*catalog->Find("days"), *catalog);
  EXPECT_EQ(days.partition_key_column(), "");
  EXPECT_EQ(days.partition_keys_size(), 0);
  DatasetPlan dp;
  dp.dataset = "by_region";
  dp.partitions = {"2025-03-01|eu"};
  const v1::DatasetPlan plan = DatasetPlanToProto(dp, *catalog);
  EXPECT_EQ(plan.grain(), v1::GRAIN_DAY);
  EXPECT_EQ(plan.partition_key_column(), "region");
  dp.dataset = "days";
  dp.partitions = {"2025-03-01"};
  EXPECT_EQ(DatasetPlanToProto(dp, *catalog).partition_key_column(), "");
}

TEST(ProtoConvertTest, StatusKeepsCodeAndMessage) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  const grpc::Status s = ToGrpcStatus(absl::NotFoundError("no job bf-9"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "no job bf-9");
  EXPECT_EQ(ToGrpcStatus(absl::FailedPreconditionError("x")).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

// Whatever an error holds, it fits a client's trailer: the message and the
// details together take at most kMaxErrorBytes. The code and the reason are
// kept; the message is cut at a character boundary and says its size; what
// is kept of the details is a prefix of what was attached.
TEST(ProtoConvertTest, AnErrorTooLargeForATrailerIsCutKeepingCodeAndReason) {
  // "é" takes bytes 639 and 640: a cut after 640 bytes keeps 639.
  const std::string message =
      std::string(639, 'a') + "\xc3\xa9" + std::string(5000, 'b');
  const std::string ids(3000, 'x');
  absl::Status status =
      WithReason(absl::FailedPreconditionError(message), "PARTITIONS_HELD",
                 {{"backfill_ids", ids}, {"limit", "5"}});
  std::vector<std::string> descriptions;
  for (int i = 0; i < 20; ++i) {
    descriptions.push_back(std::string(500, static_cast<char>('c' + i)));
    status = WithFieldViolation(status, absl::StrCat("partitions[", i, "]"),
                                descriptions.back());
  }

  const grpc::Status sent = ToGrpcStatus(status);
  EXPECT_EQ(sent.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_LE(sent.error_message().size() + sent.error_details().size(),
            kMaxErrorBytes);
  EXPECT_EQ(sent.error_message(),
            std::string(639, 'a') + "... (cut: 5641 bytes in all)");
  google::rpc::Status rpc;
  ASSERT_TRUE(rpc.ParseFromString(sent.error_details()));
  EXPECT_EQ(rpc.code(),
            static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(rpc.message(), sent.error_message());
  int infos = 0;
  for (const google::protobuf::Any& detail : rpc.details()) {
    google::rpc::ErrorInfo info;
    google::rpc::BadRequest bad_request;
    if (detail.UnpackTo(&info)) {
      ++infos;
      EXPECT_EQ(info.reason(), "PARTITIONS_HELD");
      EXPECT_EQ(info.domain(), "backfilld");
      for (const auto& [key, value] : info.metadata()) {
        EXPECT_LE(value.size(), kMaxErrorDetailBytes + 3) << key;
        if (key == "backfill_ids") {
          EXPECT_EQ(value, std::string(kMaxErrorDetailBytes, 'x') + "...");
        } else {
          EXPECT_EQ(key, "limit");
          EXPECT_EQ(value, "5");
        }
      }
    } else if (detail.UnpackTo(&bad_request)) {
      // The first violations, in order, each cut.
      ASSERT_LE(bad_request.field_violations_size(), 20);
      for (int i = 0; i < bad_request.field_violations_size(); ++i) {
        const auto& v = bad_request.field_violations(i);
        EXPECT_EQ(v.field(), absl::StrCat("partitions[", i, "]"));
        EXPECT_EQ(v.description(),
                  descriptions[i].substr(0, kMaxErrorDetailBytes) + "...");
      }
    } else {
      ADD_FAILURE() << "unexpected detail " << detail.type_url();
    }
  }
  EXPECT_EQ(infos, 1);
}

TEST(ProtoConvertTest, AnErrorWithinTheBoundIsSentWhole) {
  const std::string message(600, 'm');
  const absl::Status with_message =
      WithReason(WithFieldViolation(absl::InvalidArgumentError(message),
                                    "request.reason", std::string(300, 'd')),
                 "FIELD_TOO_LONG", {{"limit", std::string(100, '9')}});
  const grpc::Status sent = ToGrpcStatus(with_message);
  EXPECT_EQ(sent.error_message(), message);
  google::rpc::Status rpc;
  ASSERT_TRUE(rpc.ParseFromString(sent.error_details()));
  ASSERT_EQ(rpc.details_size(), 2);
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(rpc.details(0).UnpackTo(&info));
  EXPECT_EQ(info.metadata().at("limit"), std::string(100, '9'));
  google::rpc::BadRequest bad_request;
  ASSERT_TRUE(rpc.details(1).UnpackTo(&bad_request));
  ASSERT_EQ(bad_request.field_violations_size(), 1);
  EXPECT_EQ(bad_request.field_violations(0).description(),
            std::string(300, 'd'));
}

// AIP-158: a page_size over the maximum is served as the maximum, 0 is the
// default, a negative one is refused naming the field.
TEST(ProtoConvertTest, PageSizesOverTheMaximumAreServedAsTheMaximum) {
  const int kInt32Max = std::numeric_limits<int32_t>::max();
  const struct {
    int asked;
    int jobs;        // ListBackfills: default 50, at most 1000
    int partitions;  // ListPartitions: default 100, at most 1000
    int events;      // ListAuditEvents: default 100, at most 1000
  } cases[] = {{0, 50, 100, 100},
               {1, 1, 1, 1},
               {7, 7, 7, 7},
               {1000, 1000, 1000, 1000},
               {1001, 1000, 1000, 1000},
               {1 << 20, 1000, 1000, 1000},
               {kInt32Max, 1000, 1000, 1000}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.asked);
    v1::ListBackfillsRequest jobs;
    jobs.set_page_size(c.asked);
    absl::StatusOr<JobPageQuery> job_query = JobPageQueryFromProto(jobs);
    ASSERT_TRUE(job_query.ok()) << job_query.status();
    EXPECT_EQ(job_query->page_size, c.jobs);
    v1::ListPartitionsRequest partitions;
    partitions.set_backfill_id("bf-1");
    partitions.set_page_size(c.asked);
    absl::StatusOr<PartitionPageQuery> partition_query =
        PartitionPageQueryFromProto(partitions);
    ASSERT_TRUE(partition_query.ok()) << partition_query.status();
    EXPECT_EQ(partition_query->page_size, c.partitions);
    v1::ListAuditEventsRequest events;
    events.set_page_size(c.asked);
    absl::StatusOr<AuditQuery> audit_query = AuditQueryFromProto(events);
    ASSERT_TRUE(audit_query.ok()) << audit_query.status();
    EXPECT_EQ(audit_query->limit, c.events);
  }
  for (int negative : {-1, std::numeric_limits<int32_t>::min()}) {
    SCOPED_TRACE(negative);
    v1::ListBackfillsRequest jobs;
    jobs.set_page_size(negative);
    v1::ListPartitionsRequest partitions;
    partitions.set_backfill_id("bf-1");
    partitions.set_page_size(negative);
    v1::ListAuditEventsRequest events;
    events.set_page_size(negative);
    for (const absl::Status& s :
         {JobPageQueryFromProto(jobs).status(),
          PartitionPageQueryFromProto(partitions).status(),
          AuditQueryFromProto(events).status()}) {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
      const ErrorDetails details = DetailsOf(s);
      EXPECT_EQ(details.reason, "PAGE_SIZE_OUT_OF_RANGE");
      ASSERT_EQ(details.field_violations.size(), 1u);
      EXPECT_EQ(details.field_violations[0].field, "page_size");
    }
  }
}

// Stored text can hold bytes that are not UTF-8 (a Latin-1 warehouse
// value quoted in a validation message). Every message the converters build
// serializes, binary and JSON, with those bytes escaped as "\xNN".
TEST(ProtoConvertTest, TextThatIsNotUtf8IsEscapedSoEveryMessageSerializes) {
  const std::string bad = "duplicate key M\xfcller \xff";
  const std::string escaped = "duplicate key M\\xfcller \\xff";

  AuditEvent event;
  event.seq = 4;
  event.job_id = "bf-2";
  event.from_state = "VALIDATING";
  event.to_state = "VALIDATION_FAILED";
  event.message = bad;
  event.at = absl::FromUnixSeconds(1740787200);
  AuditPage page;
  page.events = {event};
  const v1::ListAuditEventsResponse audit = AuditPageToProto(page, 0);
  ASSERT_EQ(audit.events_size(), 1);
  EXPECT_EQ(audit.events(0).message(), escaped);
  std::string wire;
  EXPECT_TRUE(audit.SerializeToString(&wire));
  std::string json;
  ASSERT_TRUE(
      google::protobuf::util::MessageToJsonString(audit.events(0), &json).ok());
  EXPECT_THAT(json, ::testing::HasSubstr(
                        R"("message":"duplicate key M\\xfcller \\xff")"));

  Job job;
  job.id = "bf-2";
  job.state = JobState::kValidationFailed;
  job.message = bad;
  job.request.reason = "caf\xc3\xa9";  // well-formed: kept
  DatasetPlan dp;
  dp.dataset = "by_customer";
  dp.partitions = {"M\xfc"};
  job.plan.datasets = {dp};
  CheckResult check;
  check.dataset = "by_customer";
  check.message = bad;
  job.checks = {check};
  const v1::Backfill proto = JobToProto(job, Catalog());
  EXPECT_EQ(proto.message(), escaped);
  EXPECT_EQ(proto.request().reason(), "caf\xc3\xa9");
  ASSERT_EQ(proto.plan_size(), 1);
  ASSERT_EQ(proto.plan(0).partitions_size(), 1);
  EXPECT_EQ(proto.plan(0).partitions(0), "M\\xfc");
  ASSERT_EQ(proto.checks_size(), 1);
  EXPECT_EQ(proto.checks(0).message(), escaped);
  EXPECT_TRUE(proto.SerializeToString(&wire));

  PartitionHistory history;
  history.dataset = "by_customer";
  history.partition = "M\xfc";
  PartitionVersion version;
  version.record.job_id = "bf-2";
  version.record.reason = bad;
  PartitionDiff diff;
  diff.error = bad;
  version.diff = diff;
  CheckResult held;
  held.check = "no_negative";
  held.severity = CheckSeverity::kHold;
  held.dataset = "by_customer";
  held.partition = "M\xfc";
  held.passed = false;
  held.message = bad;
  held.samples = {bad};
  version.checks = {held};
  history.versions = {version};
  StaleDependent stale;
  stale.reason = bad;
  history.stale = stale;
  const v1::ExplainPartitionResponse why = PartitionHistoryToProto(history);
  EXPECT_EQ(why.partition(), "M\\xfc");
  ASSERT_EQ(why.versions_size(), 1);
  EXPECT_EQ(why.versions(0).reason(), escaped);
  EXPECT_EQ(why.versions(0).diff().error(), escaped);
  ASSERT_EQ(why.versions(0).checks_size(), 1);
  const v1::CheckResult& why_check = why.versions(0).checks(0);
  EXPECT_EQ(why_check.name(), "no_negative");
  EXPECT_EQ(why_check.severity(), v1::CHECK_SEVERITY_HOLD);
  EXPECT_EQ(why_check.partition(), "M\\xfc");
  EXPECT_FALSE(why_check.passed());
  EXPECT_EQ(why_check.message(), escaped);
  ASSERT_EQ(why_check.sample_rows_size(), 1);
  EXPECT_EQ(why_check.sample_rows(0), escaped);
  EXPECT_EQ(why.stale_reason(), escaped);
  EXPECT_TRUE(why.SerializeToString(&wire));
}

// A page stops before the event that would take it over its byte budget
// (at least one event per page); the token resumes right after the last
// event sent, so no event is skipped or repeated.
TEST(ProtoConvertTest, AuditPagesStopAtTheirByteBudget) {
  AuditPage page;
  for (int64_t seq = 10; seq < 14; ++seq) {
    AuditEvent e;
    e.seq = seq;
    e.job_id = "bf-1";
    e.to_state = "FAILED";
    e.message = std::string(seq == 10 ? 3000 : 400, 'x');
    page.events.push_back(e);
  }
  page.next_after_seq = 13;
  // The first event alone is over the budget: it is sent, alone.
  v1::ListAuditEventsRequest request;
  request.set_backfill_id("bf-1");
  const uint64_t filters = AuditFilterHash(request);
  // The seq a page's token resumes after, read as the next request would.
  auto resumes_after = [&request](const std::string& token) -> int64_t {
    v1::ListAuditEventsRequest next = request;
    next.set_page_token(token);
    absl::StatusOr<AuditQuery> query = AuditQueryFromProto(next);
    EXPECT_TRUE(query.ok()) << query.status();
    return query.ok() ? query->after_seq : -1;
  };
  v1::ListAuditEventsResponse first = AuditPageToProto(page, filters, 1000);
  ASSERT_EQ(first.events_size(), 1);
  EXPECT_EQ(first.events(0).seq(), 10);
  EXPECT_EQ(resumes_after(first.next_page_token()), 10);
  // Each later event takes a little over 400 bytes: two fit in 1000.
  page.events.erase(page.events.begin());
  v1::ListAuditEventsResponse second = AuditPageToProto(page, filters, 1000);
  ASSERT_EQ(second.events_size(), 2);
  EXPECT_EQ(second.events(1).seq(), 12);
  EXPECT_EQ(resumes_after(second.next_page_token()), 12);
  // Within the budget: the page's own token.
  v1::ListAuditEventsResponse all = AuditPageToProto(page, filters);
  EXPECT_EQ(all.events_size(), 3);
  EXPECT_EQ(resumes_after(all.next_page_token()), 13);
  // The token is opaque and bound to the filters: not a bare seq, and
  // refused for another job.
  EXPECT_NE(all.next_page_token(), "13");
  v1::ListAuditEventsRequest other;
  other.set_backfill_id("bf-2");
  other.set_page_token(all.next_page_token());
  EXPECT_EQ(AuditQueryFromProto(other).status().code(),
            absl::StatusCode::kInvalidArgument);
  page.next_after_seq = 0;
  EXPECT_EQ(AuditPageToProto(page, filters).next_page_token(), "");
}

}  // namespace
}  // namespace server_convert_test
}  // namespace backfill
