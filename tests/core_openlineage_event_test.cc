// OpenLineage RunEvents of a job (openlineage/run_event.h): run ids checked
// against UUIDs computed independently with Python's uuid module, the
// outcome of each job state change, and whole events compared, as parsed
// JSON, with events written out by hand from the OpenLineage 2-0-2 spec
// (facets from their own specs; PostgreSQL tables named by its naming
// spec).

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/model/pipeline_loader.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "openlineage/emitter.h"
#include "openlineage/run_event.h"
#include "openlineage/uuid.h"
#include "tests/testing/revenue_pipeline.h"

namespace backfill::openlineage {
namespace core_openlineage_event_test {
namespace {

google::protobuf::Struct ParseJson(const std::string& json) {
  google::protobuf::Struct parsed;
  auto status = google::protobuf::util::JsonStringToMessage(json, &parsed);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return parsed;
}

void ExpectSameJson(const std::string& actual, const std::string& expected) {
  const google::protobuf::Struct a = ParseJson(actual);
  const google::protobuf::Struct e = ParseJson(expected);
  std::string diff;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(e, a)) << diff << "\nactual: " << actual;
}

// RFC 4122's namespace for URLs and for DNS names.
constexpr Uuid kUrlNamespace = {0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1,
                                0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8};
constexpr Uuid kDnsNamespace = {0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1,
                                0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8};

constexpr char kStoreId[] = "0123456789abcdef0123456789abcdef";

// The symlinks facet naming backfilld dataset `dataset` in the jobs'
// namespace, as written by hand from the spec's SymlinksDatasetFacet 1-0-1.
std::string Link(const std::string& dataset) {
  return R"json("facets": {"symlinks": {
      "_producer": "urn:backfilld:0.1.0",
      "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
      "identifiers": [{"namespace": "backfilld", "name": ")json" +
         dataset + R"json(", "type": "DATASET"}]}})json";
}

TEST(OpenLineageUuid, MatchesPythonsUuid5) {
  // python3 -c "import uuid; print(uuid.uuid5(uuid.NAMESPACE_DNS,
  //   'python.org'))"
  EXPECT_EQ(FormatUuid(NameBasedUuid(kDnsNamespace, "python.org")),
            "886313e1-3b8a-5372-9b90-0c9aee199e5d");
  // python3 -c "import uuid; print(uuid.uuid5(uuid.NAMESPACE_URL,
  //   'urn:backfilld:openlineage:run'))"
  EXPECT_EQ(
      FormatUuid(NameBasedUuid(kUrlNamespace, "urn:backfilld:openlineage:run")),
      "6ceacff3-56ee-5261-b4df-51eb7046a6c4");
  EXPECT_EQ(FormatUuid(kRunIdNamespace),
            "6ceacff3-56ee-5261-b4df-51eb7046a6c4");
}

TEST(OpenLineageUuid, RunIdsMatchPythonsUuid5) {
  // ns = uuid.UUID('6ceacff3-56ee-5261-b4df-51eb7046a6c4')
  // uuid.uuid5(ns, '0123456789abcdef0123456789abcdef/bf-7')
  EXPECT_EQ(JobRunId(kStoreId, "bf-7"), "306754dd-2e3c-5fef-a17a-f37518c9fbd5");
  // uuid.uuid5(ns, '0123456789abcdef0123456789abcdef/bf-7/daily_revenue')
  EXPECT_EQ(DatasetRunId(kStoreId, "bf-7", "daily_revenue"),
            "220f2adc-e921-5ff3-9a8e-9daa676317f1");
  // Another store, another run for the same job id.
  EXPECT_NE(JobRunId("ffffffffffffffffffffffffffffffff", "bf-7"),
            JobRunId(kStoreId, "bf-7"));
}

TEST(OpenLineageUuid, ParseAndFormatRoundTrip) {
  absl::StatusOr<Uuid> parsed =
      ParseUuid("6CEACFF3-56EE-5261-B4DF-51EB7046A6C4");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, kRunIdNamespace);
  for (const char* bad : {"", "6ceacff3-56ee-5261-b4df-51eb7046a6c",
                          "6ceacff3x56ee-5261-b4df-51eb7046a6c4",
                          "6ceacff3-56ee-5261-b4df-51eb7046a6cg",
                          "6ceacff3-56ee-5261-b4df-51eb7046a6c4a"}) {
    EXPECT_EQ(ParseUuid(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(OpenLineageOutcome, EveryStateChange) {
  using S = JobState;
  using P = RunHistory::Phase;
  const RunHistory never{P::kNotStarted, false};
  const RunHistory open{P::kOpen, false};
  const RunHistory closed{P::kClosed, false};
  const RunHistory closed_published{P::kClosed, true};
  // "JOB/DATASETS[+stats]", "rollback" or "-" (nothing).
  auto text = [](std::optional<Outcome> o) -> std::string {
    if (!o.has_value()) return "-";
    if (o->rollback) return "rollback";
    return std::string(EventTypeName(o->job)) + "/" +
           EventTypeName(o->datasets) + (o->output_statistics ? "+stats" : "");
  };
  // First start, resume, validation sending partitions back, retry of a
  // closed run.
  EXPECT_EQ(text(OutcomeOf(S::kQueued, S::kRunning, never)), "START/START");
  EXPECT_EQ(text(OutcomeOf(S::kQueued, S::kRunning, open)), "RUNNING/RUNNING");
  EXPECT_EQ(text(OutcomeOf(S::kValidating, S::kRunning, open)),
            "RUNNING/RUNNING");
  EXPECT_EQ(text(OutcomeOf(S::kQueued, S::kRunning, closed)), "OTHER/OTHER");
  // Endings of an open run.
  EXPECT_EQ(text(OutcomeOf(S::kConfirming, S::kSucceeded, open)),
            "COMPLETE/COMPLETE+stats");
  EXPECT_EQ(text(OutcomeOf(S::kConfirming, S::kDownstreamUnhealthy, open)),
            "FAIL/COMPLETE+stats");
  EXPECT_EQ(text(OutcomeOf(S::kRunning, S::kFailed, open)), "FAIL/FAIL");
  EXPECT_EQ(text(OutcomeOf(S::kValidating, S::kValidationFailed, open)),
            "FAIL/FAIL");
  EXPECT_EQ(text(OutcomeOf(S::kRunning, S::kCancelled, open)), "ABORT/ABORT");
  EXPECT_EQ(text(OutcomeOf(S::kPaused, S::kCancelled, open)), "ABORT/ABORT");
  // Never started: nothing to close.
  EXPECT_EQ(text(OutcomeOf(S::kQueued, S::kCancelled, never)), "-");
  EXPECT_EQ(text(OutcomeOf(S::kQueued, S::kFailed, never)), "-");
  EXPECT_EQ(text(OutcomeOf(S::kPaused, S::kCancelled, never)), "-");
  // A closed run gets no second terminal event.
  EXPECT_EQ(text(OutcomeOf(S::kDownstreamUnhealthy, S::kConfirming,
                           closed_published)),
            "OTHER/OTHER");
  EXPECT_EQ(text(OutcomeOf(S::kConfirming, S::kSucceeded, closed_published)),
            "OTHER/OTHER");
  EXPECT_EQ(text(OutcomeOf(S::kFailed, S::kCancelled, closed)), "OTHER/OTHER");
  // Published after a FAIL (retry, or approval with --override): the
  // first report of the rows.
  EXPECT_EQ(text(OutcomeOf(S::kConfirming, S::kSucceeded, closed)),
            "OTHER/OTHER+stats");
  // A rollback is a run of its own.
  EXPECT_EQ(text(OutcomeOf(S::kSucceeded, S::kRolledBack, closed_published)),
            "rollback");
  EXPECT_EQ(text(OutcomeOf(S::kDownstreamUnhealthy, S::kRolledBack,
                           closed_published)),
            "rollback");
  // Moves that send nothing, whatever the history.
  for (const RunHistory& h : {never, open, closed}) {
    for (S to : {S::kQueued, S::kValidating, S::kAwaitingApproval,
                 S::kPublishing, S::kConfirming, S::kPaused}) {
      EXPECT_EQ(text(OutcomeOf(S::kRunning, to, h)), "-") << JobStateName(to);
    }
    EXPECT_EQ(text(OutcomeOf(S::kPublishing, S::kConfirming, h)), "-");
    EXPECT_EQ(text(OutcomeOf(S::kFailed, S::kQueued, h)), "-");
  }
  EXPECT_STREQ(EventTypeName(EventType::kStart), "START");
  EXPECT_STREQ(EventTypeName(EventType::kRunning), "RUNNING");
  EXPECT_STREQ(EventTypeName(EventType::kComplete), "COMPLETE");
  EXPECT_STREQ(EventTypeName(EventType::kAbort), "ABORT");
  EXPECT_STREQ(EventTypeName(EventType::kFail), "FAIL");
  EXPECT_STREQ(EventTypeName(EventType::kOther), "OTHER");
}

TEST(OpenLineageOutcome, HistoryOfAuditEvents) {
  using P = RunHistory::Phase;
  auto history = [](std::vector<std::pair<const char*, const char*>> moves) {
    std::vector<AuditEvent> events;
    for (const auto& [from, to] : moves) {
      AuditEvent e;
      e.seq = static_cast<int64_t>(events.size()) + 1;
      e.from_state = from;
      e.to_state = to;
      events.push_back(e);
    }
    return HistoryOf(events);
  };
  EXPECT_EQ(history({{"", "QUEUED"}}).phase, P::kNotStarted);
  EXPECT_EQ(history({{"", "QUEUED"}, {"QUEUED", "FAILED"}}).phase,
            P::kNotStarted);
  EXPECT_EQ(history({{"", "QUEUED"},
                     {"QUEUED", "FAILED"},
                     {"FAILED", "QUEUED"},
                     {"QUEUED", "RUNNING"}})
                .phase,
            P::kOpen);
  EXPECT_EQ(history({{"", "QUEUED"},
                     {"QUEUED", "RUNNING"},
                     {"RUNNING", "PAUSED"},
                     {"PAUSED", "QUEUED"}})
                .phase,
            P::kOpen);
  const RunHistory failed =
      history({{"", "QUEUED"}, {"QUEUED", "RUNNING"}, {"RUNNING", "FAILED"}});
  EXPECT_EQ(failed.phase, P::kClosed);
  EXPECT_FALSE(failed.reported_outcome);
  const RunHistory unhealthy =
      history({{"", "QUEUED"},
               {"QUEUED", "RUNNING"},
               {"RUNNING", "VALIDATING"},
               {"VALIDATING", "PUBLISHING"},
               {"PUBLISHING", "CONFIRMING"},
               {"CONFIRMING", "DOWNSTREAM_UNHEALTHY"},
               {"DOWNSTREAM_UNHEALTHY", "CONFIRMING"}});
  EXPECT_EQ(unhealthy.phase, P::kClosed);
  EXPECT_TRUE(unhealthy.reported_outcome);
}

TEST(OpenLineageFacetSchema, SchemaUrlPointsIntoTheShippedSchema) {
  const std::string url = BackfillFacetSchemaUrl("0.1.0");
  EXPECT_EQ(url,
            "urn:backfilld:0.1.0:facet:BackfilldBackfillRunFacet"
            "#/$defs/BackfilldBackfillRunFacet");
  std::ifstream in(std::string(BACKFILL_SOURCE_DIR) +
                   "/docs/openlineage/BackfilldBackfillRunFacet.json");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const google::protobuf::Struct schema = ParseJson(text.str());
  // The document is what the part before '#' names, and the JSON pointer
  // after it resolves in it.
  EXPECT_EQ(schema.fields().at("$id").string_value(),
            url.substr(0, url.find('#')));
  EXPECT_EQ(schema.fields().at("$defs").struct_value().fields().count(
                "BackfilldBackfillRunFacet"),
            1u);
}

TEST(OpenLineageNominalTime, RangesOfEachGrain) {
  auto range = [](const PartitionLayout& layout,
                  std::vector<std::string> partitions) {
    std::optional<TimeRange> r = NominalRange(layout, partitions);
    return r ? Rfc3339(r->start) + " " + Rfc3339(r->end) : std::string("none");
  };
  EXPECT_EQ(range(Grain::kDay, {"2025-03-02", "2025-03-01", "2025-03-05"}),
            "2025-03-01T00:00:00.000Z 2025-03-06T00:00:00.000Z");
  EXPECT_EQ(range(Grain::kHour, {"2025-03-01T07", "2025-03-01T23"}),
            "2025-03-01T07:00:00.000Z 2025-03-02T00:00:00.000Z");
  EXPECT_EQ(range(Grain::kMonth, {"2024-12"}),
            "2024-12-01T00:00:00.000Z 2025-01-01T00:00:00.000Z");
  EXPECT_EQ(range(PartitionLayout(Grain::kDay, {"eu", "us"}),
                  {"2025-03-01|us", "2025-03-03|eu"}),
            "2025-03-01T00:00:00.000Z 2025-03-04T00:00:00.000Z");
  EXPECT_EQ(range(Grain::kKey, {"eu"}), "none");
  EXPECT_EQ(range(Grain::kNone, {""}), "none");
  EXPECT_EQ(range(Grain::kDay, {}), "none");
}

class OpenLineageEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Catalog> catalog = LoadPipelineTexts(
        {{"p.yaml", fixtures::RevenuePipelineYaml(
                        "", fixtures::RevenueDependentsYaml())}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    config_.job_namespace = "backfilld";
    config_.dataset_namespace = "sqlite:///srv/bf/warehouse.db";
    config_.store_id = kStoreId;
    config_.version = "0.1.0";

    job_.id = "bf-7";
    job_.request.dataset = "daily_revenue";
    job_.request.reason = "refund bug";
    job_.request.ticket = "DATA-42";
    job_.request.requested_by = "alice";
    for (const char* d : {"daily_revenue", "daily_total"}) {
      DatasetPlan plan;
      plan.dataset = d;
      plan.partitions = {"2025-03-01", "2025-03-02"};
      job_.plan.datasets.push_back(plan);
    }
    DatasetPlan totals;
    totals.dataset = "region_totals";
    totals.partitions = {""};
    job_.plan.datasets.push_back(totals);

    auto task = [](const char* dataset, const char* partition, TaskState state,
                   int64_t rows) {
      PartitionTask t;
      t.job_id = "bf-7";
      t.dataset = dataset;
      t.partition = partition;
      t.state = state;
      t.rows_written = rows;
      return t;
    };
    tasks_ = {task("daily_revenue", "2025-03-01", TaskState::kPublished, 4),
              task("daily_revenue", "2025-03-02", TaskState::kPublished, 3),
              task("daily_total", "2025-03-01", TaskState::kPublished, 1),
              // Unchanged (early cutoff): recomputed, not republished.
              task("daily_total", "2025-03-02", TaskState::kUnchanged, 1),
              task("region_totals", "", TaskState::kPublished, 4)};
    at_ = absl::FromUnixMillis(1741168800250);  // 2025-03-05T10:00:00.250Z
  }

  Catalog catalog_;
  EventConfig config_;
  Job job_;
  std::vector<PartitionTask> tasks_;
  absl::Time at_;
};

TEST_F(OpenLineageEventsTest, CompleteEventsOfEveryRun) {
  absl::StatusOr<std::vector<std::string>> events = BuildRunEvents(
      config_, catalog_, job_, tasks_, JobState::kSucceeded, "published",
      Outcome{EventType::kComplete, EventType::kComplete, true}, at_);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 4u);

  const std::string backfill_facet = R"json(
        "backfilld_backfill": {
          "_producer": "urn:backfilld:0.1.0",
          "_schemaURL": "urn:backfilld:0.1.0:facet:BackfilldBackfillRunFacet#/$defs/BackfilldBackfillRunFacet",
          "jobId": "bf-7", "state": "SUCCEEDED", "reason": "refund bug",
          "ticket": "DATA-42", "requestedBy": "alice", "message": "published"
        })json";
  const std::string nominal = R"json(
        "nominalTime": {
          "_producer": "urn:backfilld:0.1.0",
          "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet",
          "nominalStartTime": "2025-03-01T00:00:00.000Z",
          "nominalEndTime": "2025-03-03T00:00:00.000Z"
        })json";
  const std::string parent = R"json(
        "parent": {
          "_producer": "urn:backfilld:0.1.0",
          "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ParentRunFacet.json#/$defs/ParentRunFacet",
          "run": {"runId": "306754dd-2e3c-5fef-a17a-f37518c9fbd5"},
          "job": {"namespace": "backfilld", "name": "backfill"}
        })json";
  const std::string header = R"json(
    "eventType": "COMPLETE",
    "eventTime": "2025-03-05T10:00:00.250Z",
    "producer": "urn:backfilld:0.1.0",
    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",)json";
  auto stats = [](int rows) {
    return std::string(R"json("outputFacets": {"outputStatistics": {
          "_producer": "urn:backfilld:0.1.0",
          "_schemaURL": "https://openlineage.io/spec/facets/1-0-2/OutputStatisticsOutputDatasetFacet.json#/$defs/OutputStatisticsOutputDatasetFacet",
          "rowCount": )json") +
           std::to_string(rows) + "}}";
  };

  ExpectSameJson((*events)[0], "{" + header + R"json(
    "run": {"runId": "306754dd-2e3c-5fef-a17a-f37518c9fbd5",
            "facets": {)json" + nominal +
                                   "," + backfill_facet + R"json(}},
    "job": {"namespace": "backfilld", "name": "backfill"},
    "inputs": [], "outputs": []
  })json");

  ExpectSameJson((*events)[1], "{" + header + R"json(
    "run": {"runId": "220f2adc-e921-5ff3-9a8e-9daa676317f1",
            "facets": {)json" + nominal +
                                   "," + parent + "," + backfill_facet +
                                   R"json(}},
    "job": {"namespace": "backfilld", "name": "backfill/daily_revenue"},
    "inputs": [
      {"namespace": "sqlite:///srv/bf/warehouse.db", "name": "raw_orders",
       )json" + Link("orders") + R"json(},
      {"namespace": "sqlite:///srv/bf/warehouse.db", "name": "dim_customers",
       )json" + Link("customers") + R"json(}
    ],
    "outputs": [
      {"namespace": "sqlite:///srv/bf/warehouse.db", "name": "daily_revenue",
       )json" + Link("daily_revenue") +
                                   ", " + stats(7) + R"json(}
    ]
  })json");

  // python3: uuid.uuid5(ns,
  // '0123456789abcdef0123456789abcdef/bf-7/daily_total')
  ExpectSameJson((*events)[2], "{" + header + R"json(
    "run": {"runId": "61e5c1a4-3836-5448-86cd-5910d2a431c0",
            "facets": {)json" + nominal +
                                   "," + parent + "," + backfill_facet +
                                   R"json(}},
    "job": {"namespace": "backfilld", "name": "backfill/daily_total"},
    "inputs": [
      {"namespace": "sqlite:///srv/bf/warehouse.db", "name": "daily_revenue",
       )json" + Link("daily_revenue") +
                                   R"json(}
    ],
    "outputs": [
      {"namespace": "sqlite:///srv/bf/warehouse.db", "name": "daily_total",
       )json" + Link("daily_total") +
                                   ", " + stats(1) + R"json(}
    ]
  })json");

  // Unpartitioned: no nominalTime.
  // python3: uuid.uuid5(ns,
  //   '0123456789abcdef0123456789abcdef/bf-7/region_totals')
  ExpectSameJson((*events)[3], "{" + header + R"json(
    "run": {"runId": "db5e58e3-6702-5930-8a91-2fd1551b0920",
            "facets": {)json" + parent +
                                   "," + backfill_facet + R"json(}},
    "job": {"namespace": "backfilld", "name": "backfill/region_totals"},
    "inputs": [
      {"namespace": "sqlite:///srv/bf/warehouse.db", "name": "daily_revenue",
       )json" + Link("daily_revenue") +
                                   R"json(}
    ],
    "outputs": [
      {"namespace": "sqlite:///srv/bf/warehouse.db", "name": "region_totals",
       )json" + Link("region_totals") +
                                   ", " + stats(4) + R"json(}
    ]
  })json");
}

TEST_F(OpenLineageEventsTest, StartAndFailCarryNoOutputStatistics) {
  for (EventType type : {EventType::kStart, EventType::kFail, EventType::kAbort,
                         EventType::kRunning, EventType::kOther}) {
    absl::StatusOr<std::vector<std::string>> events =
        BuildRunEvents(config_, catalog_, job_, tasks_, JobState::kRunning, "",
                       Outcome{type, type}, at_);
    ASSERT_TRUE(events.ok()) << events.status();
    ASSERT_EQ(events->size(), 4u);
    for (const std::string& json : *events) {
      const google::protobuf::Struct e = ParseJson(json);
      EXPECT_EQ(e.fields().at("eventType").string_value(), EventTypeName(type));
      for (const auto& output :
           e.fields().at("outputs").list_value().values()) {
        EXPECT_EQ(output.struct_value().fields().count("outputFacets"), 0u)
            << json;
      }
    }
  }
}

TEST_F(OpenLineageEventsTest, DownstreamUnhealthyFailsTheJobRunOnly) {
  absl::StatusOr<std::vector<std::string>> events = BuildRunEvents(
      config_, catalog_, job_, tasks_, JobState::kDownstreamUnhealthy,
      "amount_cache serves 10 for 2025-03-01, expected 12",
      *OutcomeOf(JobState::kConfirming, JobState::kDownstreamUnhealthy,
                 RunHistory{RunHistory::Phase::kOpen, false}),
      at_);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 4u);
  const google::protobuf::Struct job_run = ParseJson((*events)[0]);
  EXPECT_EQ(job_run.fields().at("eventType").string_value(), "FAIL");
  const auto& facet = job_run.fields()
                          .at("run")
                          .struct_value()
                          .fields()
                          .at("facets")
                          .struct_value()
                          .fields()
                          .at("backfilld_backfill")
                          .struct_value()
                          .fields();
  EXPECT_EQ(facet.at("state").string_value(), "DOWNSTREAM_UNHEALTHY");
  EXPECT_EQ(facet.at("message").string_value(),
            "amount_cache serves 10 for 2025-03-01, expected 12");
  const google::protobuf::Struct dataset_run = ParseJson((*events)[1]);
  EXPECT_EQ(dataset_run.fields().at("eventType").string_value(), "COMPLETE");
  EXPECT_EQ(dataset_run.fields()
                .at("outputs")
                .list_value()
                .values(0)
                .struct_value()
                .fields()
                .at("outputFacets")
                .struct_value()
                .fields()
                .at("outputStatistics")
                .struct_value()
                .fields()
                .at("rowCount")
                .number_value(),
            7);
}

TEST_F(OpenLineageEventsTest, RollbackIsARunOfItsOwnWithTheUndoneRunAsParent) {
  absl::StatusOr<std::vector<std::string>> events =
      BuildRollbackEvents(config_, catalog_, job_, "rolled back by bob", at_);
  ASSERT_TRUE(events.ok()) << events.status();
  // Job START, 3 dataset STARTs, 3 dataset COMPLETEs, job COMPLETE.
  ASSERT_EQ(events->size(), 8u);
  std::vector<std::string> seen;
  for (const std::string& json : *events) {
    const google::protobuf::Struct e = ParseJson(json);
    seen.push_back(
        e.fields().at("eventType").string_value() + " " +
        e.fields().at("job").struct_value().fields().at("name").string_value() +
        " " +
        e.fields()
            .at("run")
            .struct_value()
            .fields()
            .at("runId")
            .string_value());
  }
  // python3: uuid.uuid5(ns, '0123456789abcdef0123456789abcdef/bf-7/rollback')
  // and '.../bf-7/rollback/<dataset>'.
  EXPECT_THAT(
      seen,
      ::testing::ElementsAre(
          "START backfill 48835225-be5e-5839-a570-11f3521deeca",
          "START backfill/daily_revenue d82652a2-8237-5e49-a340-a61915d12aa9",
          "START backfill/daily_total 1f029101-2a94-5dbd-b3b7-f06379ba03d0",
          "START backfill/region_totals 1a059d27-f3b8-5306-81d7-58cf414eddb9",
          "COMPLETE backfill/daily_revenue "
          "d82652a2-8237-5e49-a340-a61915d12aa9",
          "COMPLETE backfill/daily_total 1f029101-2a94-5dbd-b3b7-f06379ba03d0",
          "COMPLETE backfill/region_totals "
          "1a059d27-f3b8-5306-81d7-58cf414eddb9",
          "COMPLETE backfill 48835225-be5e-5839-a570-11f3521deeca"));

  const std::string backfill_facet = R"json(
        "backfilld_backfill": {
          "_producer": "urn:backfilld:0.1.0",
          "_schemaURL": "urn:backfilld:0.1.0:facet:BackfilldBackfillRunFacet#/$defs/BackfilldBackfillRunFacet",
          "jobId": "bf-7", "state": "ROLLED_BACK", "reason": "refund bug",
          "ticket": "DATA-42", "requestedBy": "alice",
          "message": "rolled back by bob"
        })json";
  const std::string nominal = R"json(
        "nominalTime": {
          "_producer": "urn:backfilld:0.1.0",
          "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet",
          "nominalStartTime": "2025-03-01T00:00:00.000Z",
          "nominalEndTime": "2025-03-03T00:00:00.000Z"
        })json";
  // The job's rollback run: parent is the job's own run (bf-7).
  ExpectSameJson((*events)[0], R"json({
    "eventType": "START",
    "eventTime": "2025-03-05T10:00:00.250Z",
    "producer": "urn:backfilld:0.1.0",
    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    "run": {"runId": "48835225-be5e-5839-a570-11f3521deeca",
            "facets": {)json" + nominal +
                                   R"json(,
      "parent": {
        "_producer": "urn:backfilld:0.1.0",
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ParentRunFacet.json#/$defs/ParentRunFacet",
        "run": {"runId": "306754dd-2e3c-5fef-a17a-f37518c9fbd5"},
        "job": {"namespace": "backfilld", "name": "backfill"}
      },)json" + backfill_facet + R"json(}},
    "job": {"namespace": "backfilld", "name": "backfill"},
    "inputs": [], "outputs": []
  })json");
  // daily_revenue's rollback run: parent is bf-7's daily_revenue run, the
  // output the restored table, no inputs and no statistics.
  ExpectSameJson((*events)[4], R"json({
    "eventType": "COMPLETE",
    "eventTime": "2025-03-05T10:00:00.250Z",
    "producer": "urn:backfilld:0.1.0",
    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    "run": {"runId": "d82652a2-8237-5e49-a340-a61915d12aa9",
            "facets": {)json" + nominal +
                                   R"json(,
      "parent": {
        "_producer": "urn:backfilld:0.1.0",
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ParentRunFacet.json#/$defs/ParentRunFacet",
        "run": {"runId": "220f2adc-e921-5ff3-9a8e-9daa676317f1"},
        "job": {"namespace": "backfilld", "name": "backfill/daily_revenue"}
      },)json" + backfill_facet + R"json(}},
    "job": {"namespace": "backfilld", "name": "backfill/daily_revenue"},
    "inputs": [],
    "outputs": [
      {"namespace": "sqlite:///srv/bf/warehouse.db", "name": "daily_revenue",
       )json" + Link("daily_revenue") +
                                   R"json(}
    ]
  })json");
}

// The run facets of an event, as parsed JSON.
google::protobuf::Struct RunFacetsOf(const std::string& json) {
  const google::protobuf::Struct e = ParseJson(json);
  return e.fields()
      .at("run")
      .struct_value()
      .fields()
      .at("facets")
      .struct_value();
}

// The standard errorMessage run facet, as written by hand from the spec's
// ErrorMessageRunFacet 1-0-1 (message and programmingLanguage required).
std::string ErrorMessageFacet(const std::string& message) {
  return R"json({
      "_producer": "urn:backfilld:0.1.0",
      "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet",
      "message": ")json" +
         message + R"json(",
      "programmingLanguage": "C++"})json";
}

std::string JsonOf(const google::protobuf::Value& value) {
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(value, &json).ok());
  return json;
}

TEST_F(OpenLineageEventsTest, FailEventsCarryTheStandardErrorMessageFacet) {
  const std::string reason =
      "partition 2025-03-02 of daily_revenue: no such column: amount";
  for (JobState to : {JobState::kFailed, JobState::kValidationFailed}) {
    absl::StatusOr<std::vector<std::string>> events =
        BuildRunEvents(config_, catalog_, job_, tasks_, to, reason,
                       *OutcomeOf(JobState::kRunning, to,
                                  RunHistory{RunHistory::Phase::kOpen, false}),
                       at_);
    ASSERT_TRUE(events.ok()) << events.status();
    ASSERT_EQ(events->size(), 4u);
    for (const std::string& json : *events) {
      const google::protobuf::Struct facets = RunFacetsOf(json);
      ASSERT_EQ(facets.fields().count("errorMessage"), 1u) << json;
      ExpectSameJson(JsonOf(facets.fields().at("errorMessage")),
                     ErrorMessageFacet(reason));
      // The custom facet keeps the reason too.
      EXPECT_EQ(facets.fields()
                    .at("backfilld_backfill")
                    .struct_value()
                    .fields()
                    .at("message")
                    .string_value(),
                reason);
    }
  }
  // A failure recorded without a message still says what happened (the
  // facet requires a message).
  absl::StatusOr<std::vector<std::string>> silent =
      BuildRunEvents(config_, catalog_, job_, tasks_, JobState::kFailed, "",
                     Outcome{EventType::kFail, EventType::kFail}, at_);
  ASSERT_TRUE(silent.ok()) << silent.status();
  ExpectSameJson(JsonOf(RunFacetsOf((*silent)[0]).fields().at("errorMessage")),
                 ErrorMessageFacet("the backfill ended FAILED"));
}

TEST_F(OpenLineageEventsTest, OnlyFailEventsCarryAnErrorMessage) {
  // DOWNSTREAM_UNHEALTHY fails the job's run; the datasets' runs complete.
  absl::StatusOr<std::vector<std::string>> unhealthy = BuildRunEvents(
      config_, catalog_, job_, tasks_, JobState::kDownstreamUnhealthy,
      "amount_cache serves 10 for 2025-03-01, expected 12",
      *OutcomeOf(JobState::kConfirming, JobState::kDownstreamUnhealthy,
                 RunHistory{RunHistory::Phase::kOpen, false}),
      at_);
  ASSERT_TRUE(unhealthy.ok()) << unhealthy.status();
  ASSERT_EQ(unhealthy->size(), 4u);
  ASSERT_EQ(RunFacetsOf((*unhealthy)[0]).fields().count("errorMessage"), 1u)
      << (*unhealthy)[0];
  ExpectSameJson(
      JsonOf(RunFacetsOf((*unhealthy)[0]).fields().at("errorMessage")),
      ErrorMessageFacet("amount_cache serves 10 for 2025-03-01, expected 12"));
  for (size_t i = 1; i < unhealthy->size(); ++i) {
    EXPECT_EQ(RunFacetsOf((*unhealthy)[i]).fields().count("errorMessage"), 0u)
        << (*unhealthy)[i];
  }
  for (EventType type :
       {EventType::kStart, EventType::kRunning, EventType::kComplete,
        EventType::kAbort, EventType::kOther}) {
    absl::StatusOr<std::vector<std::string>> events =
        BuildRunEvents(config_, catalog_, job_, tasks_, JobState::kCancelled,
                       "cancelled by otto", Outcome{type, type}, at_);
    ASSERT_TRUE(events.ok()) << events.status();
    for (const std::string& json : *events) {
      EXPECT_EQ(RunFacetsOf(json).fields().count("errorMessage"), 0u) << json;
    }
  }
}

TEST_F(OpenLineageEventsTest, PostgresTablesAreNamedDatabaseSchemaTable) {
  config_.dataset_namespace = "postgres://db.internal:5432";
  config_.dataset_name_prefix = PostgresNamePrefix("analytics", "mart");
  absl::StatusOr<std::vector<std::string>> events =
      BuildRunEvents(config_, catalog_, job_, tasks_, JobState::kRunning, "",
                     Outcome{EventType::kStart, EventType::kStart}, at_);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 4u);
  // "NAMESPACE NAME" of a dataset list, and the names its symlinks give.
  auto names = [](const google::protobuf::Struct& event, const char* list) {
    std::vector<std::string> out;
    for (const auto& entry : event.fields().at(list).list_value().values()) {
      const auto& fields = entry.struct_value().fields();
      out.push_back(fields.at("namespace").string_value() + " " +
                    fields.at("name").string_value() + " -> " +
                    fields.at("facets")
                        .struct_value()
                        .fields()
                        .at("symlinks")
                        .struct_value()
                        .fields()
                        .at("identifiers")
                        .list_value()
                        .values(0)
                        .struct_value()
                        .fields()
                        .at("name")
                        .string_value());
    }
    return out;
  };
  const google::protobuf::Struct revenue = ParseJson((*events)[1]);
  EXPECT_THAT(
      names(revenue, "inputs"),
      ::testing::ElementsAre(
          "postgres://db.internal:5432 analytics.mart.raw_orders -> orders",
          "postgres://db.internal:5432 analytics.mart.dim_customers -> "
          "customers"));
  EXPECT_THAT(names(revenue, "outputs"),
              ::testing::ElementsAre("postgres://db.internal:5432 "
                                     "analytics.mart.daily_revenue -> "
                                     "daily_revenue"));
  const google::protobuf::Struct total = ParseJson((*events)[2]);
  EXPECT_THAT(names(total, "outputs"),
              ::testing::ElementsAre("postgres://db.internal:5432 "
                                     "analytics.mart.daily_total -> "
                                     "daily_total"));
  // A rollback names the restored table alike.
  absl::StatusOr<std::vector<std::string>> rollback =
      BuildRollbackEvents(config_, catalog_, job_, "rolled back", at_);
  ASSERT_TRUE(rollback.ok()) << rollback.status();
  EXPECT_THAT(names(ParseJson((*rollback)[1]), "outputs"),
              ::testing::ElementsAre("postgres://db.internal:5432 "
                                     "analytics.mart.daily_revenue -> "
                                     "daily_revenue"));
}

TEST_F(OpenLineageEventsTest, TextIsEscapedAsJson) {
  job_.request.reason = "quote \" backslash \\ newline \n tab \t é";
  absl::StatusOr<std::vector<std::string>> events =
      BuildRunEvents(config_, catalog_, job_, tasks_, JobState::kRunning, "",
                     Outcome{EventType::kStart, EventType::kStart}, at_);
  ASSERT_TRUE(events.ok()) << events.status();
  const google::protobuf::Struct e = ParseJson((*events)[0]);
  EXPECT_EQ(e.fields()
                .at("run")
                .struct_value()
                .fields()
                .at("facets")
                .struct_value()
                .fields()
                .at("backfilld_backfill")
                .struct_value()
                .fields()
                .at("reason")
                .string_value(),
            job_.request.reason);
}

}  // namespace
}  // namespace core_openlineage_event_test
}  // namespace backfill::openlineage
