// End-to-end: the real backfilld with --openlineage-url pointing at an
// in-process HTTP receiver (tests/testing/http_test_server.h). A job's
// START and COMPLETE events arrive with the same run ids, the documented
// job names, inputs, outputs and facets, and a row count computed here
// with plain SQL; a receiver that is down or answers 500 never fails the
// job, and the failures show in /metrics; a job interrupted by kill -9
// gets its COMPLETE after the restart, on the run its START opened.

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"
#include "tests/testing/http_test_server.h"

namespace backfill {
namespace e2e_openlineage_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using ::backfill::testing::HttpTestServer;
using google::protobuf::Struct;
using google::protobuf::Value;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;

Struct Parse(const std::string& json) {
  Struct s;
  auto status = google::protobuf::util::JsonStringToMessage(json, &s);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return s;
}

const Value& At(const Struct& s, const std::string& key) {
  static const Value* kNull = new Value();
  auto it = s.fields().find(key);
  return it == s.fields().end() ? *kNull : it->second;
}
const Value& At(const Value& v, const std::string& key) {
  return At(v.struct_value(), key);
}

std::string Pretty(const std::string& json) {
  Struct s = Parse(json);
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(s, &out, options);
  return out;
}

// The value of an unlabelled series in a scrape; -1 when absent.
double Sample(const std::string& scrape, const std::string& name) {
  std::istringstream lines(scrape);
  std::string line;
  while (std::getline(lines, line)) {
    if (absl::StartsWith(line, name + " ")) {
      double v = -1;
      if (absl::SimpleAtod(line.substr(name.size() + 1), &v)) return v;
    }
  }
  return -1;
}

class OpenLineageE2eTest : public E2eTest {
 protected:
  // The dataset namespace events use for the warehouse: sqlite://, this
  // host's name in lower case, the file's absolute path.
  std::string WarehouseNamespace() const {
    char host[256] = {};
    EXPECT_EQ(gethostname(host, sizeof host - 1), 0);
    return "sqlite://" + absl::AsciiStrToLower(host) +
           fs::absolute(warehouse_).string();
  }

  std::vector<Struct> Events(const HttpTestServer& receiver) {
    std::vector<Struct> events;
    for (const HttpTestServer::Request& r : receiver.requests()) {
      EXPECT_EQ(r.method, "POST");
      EXPECT_EQ(r.target, "/api/v1/lineage");
      EXPECT_EQ(
          r.headers.count("content-type") ? r.headers.at("content-type") : "",
          "application/json");
      events.push_back(Parse(r.body));
    }
    return events;
  }

  // Waits until the receiver has `n` requests.
  void AwaitEvents(const HttpTestServer& receiver, size_t n) {
    ASSERT_TRUE(receiver.WaitForRequests(n, absl::Seconds(60)))
        << "only " << receiver.requests().size() << " of " << n
        << " OpenLineage events arrived";
  }

  std::string WaitForSample(Daemon& daemon, const std::string& name,
                            double at_least) {
    const auto deadline = Clock::now() + seconds(60);
    std::string scrape;
    while (Clock::now() < deadline) {
      scrape = HttpGet(daemon.metrics_port(), "/metrics");
      if (Sample(scrape, name) >= at_least) return scrape;
      std::this_thread::sleep_for(milliseconds(100));
    }
    ADD_FAILURE() << name << " never reached " << at_least << ":\n" << scrape;
    return scrape;
  }
};

TEST_F(OpenLineageE2eTest, StartAndCompleteOfAJobArriveWithTheSameRuns) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/10, /*orders_per_day=*/30, false));
  HttpTestServer receiver;
  Daemon& daemon = NewDaemon();
  daemon.set_extra_args({"--openlineage-url", receiver.Url(""),
                         "--openlineage-namespace", "e2e-lineage"});
  ASSERT_TRUE(daemon.Start());

  const std::string job =
      SubmitSucceeded(daemon, {"daily_revenue", "--from", "2025-01-02", "--to",
                               "2025-01-05", "--reason", "e2e lineage",
                               "--ticket", "OL-7", "--requested-by", "olga"});
  ASSERT_FALSE(job.empty());
  // START and COMPLETE of the job's run and of daily_revenue's run.
  ASSERT_NO_FATAL_FAILURE(AwaitEvents(receiver, 4));
  const std::vector<Struct> events = Events(receiver);
  ASSERT_EQ(events.size(), 4u);
  if (std::getenv("BACKFILL_E2E_PRINT_EVENTS") != nullptr) {
    for (const auto& r : receiver.requests()) {
      std::fprintf(stderr, "%s\n", Pretty(r.body).c_str());
    }
  }

  std::vector<std::string> order;
  std::map<std::string, std::string> run_of;  // job name -> run id
  for (const Struct& e : events) {
    const std::string name = At(At(e, "job"), "name").string_value();
    const std::string run = At(At(e, "run"), "runId").string_value();
    order.push_back(At(e, "eventType").string_value() + " " + name);
    EXPECT_EQ(At(At(e, "job"), "namespace").string_value(), "e2e-lineage");
    EXPECT_THAT(run,
                ::testing::MatchesRegex(
                    "[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}"
                    "-[0-9a-f]{12}"));
    if (run_of.count(name)) {
      EXPECT_EQ(run_of[name], run) << "START and COMPLETE of " << name;
    }
    run_of[name] = run;
    EXPECT_EQ(At(e, "schemaURL").string_value(),
              "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/"
              "RunEvent");
    EXPECT_EQ(At(e, "producer").string_value(), "urn:backfilld:0.1.0");
    EXPECT_THAT(At(e, "eventTime").string_value(),
                ::testing::MatchesRegex("20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:"
                                        "[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z"));
    const Value& facets = At(At(e, "run"), "facets");
    const Value& nominal = At(facets, "nominalTime");
    EXPECT_EQ(At(nominal, "nominalStartTime").string_value(),
              "2025-01-02T00:00:00.000Z");
    EXPECT_EQ(At(nominal, "nominalEndTime").string_value(),
              "2025-01-05T00:00:00.000Z");
    const Value& custom = At(facets, "backfilld_backfill");
    EXPECT_EQ(At(custom, "jobId").string_value(), job);
    EXPECT_EQ(At(custom, "reason").string_value(), "e2e lineage");
    EXPECT_EQ(At(custom, "ticket").string_value(), "OL-7");
    EXPECT_EQ(At(custom, "requestedBy").string_value(), "olga");
    EXPECT_FALSE(At(custom, "_producer").string_value().empty());
    EXPECT_FALSE(At(custom, "_schemaURL").string_value().empty());
  }
  EXPECT_THAT(
      order,
      ElementsAre("START backfill", "START backfill/daily_revenue",
                  "COMPLETE backfill", "COMPLETE backfill/daily_revenue"));
  ASSERT_EQ(run_of.size(), 2u);
  EXPECT_NE(run_of["backfill"], run_of["backfill/daily_revenue"]);

  // The dataset's run: parent, inputs, output with the rows published,
  // counted here with plain SQL.
  const Struct& complete = events[3];
  const Value& parent = At(At(At(complete, "run"), "facets"), "parent");
  EXPECT_EQ(At(At(parent, "run"), "runId").string_value(), run_of["backfill"]);
  EXPECT_EQ(At(At(parent, "job"), "name").string_value(), "backfill");
  EXPECT_EQ(At(At(parent, "job"), "namespace").string_value(), "e2e-lineage");
  // Named by table, with a symlink to the backfilld dataset in the jobs'
  // namespace.
  auto linked = [](const Value& dataset) {
    const Value& symlinks = At(At(dataset, "facets"), "symlinks");
    EXPECT_EQ(At(symlinks, "_schemaURL").string_value(),
              "https://openlineage.io/spec/facets/1-0-1/"
              "SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet");
    std::string out;
    for (const Value& id : At(symlinks, "identifiers").list_value().values()) {
      out += At(id, "namespace").string_value() + " " +
             At(id, "name").string_value() + " " +
             At(id, "type").string_value();
    }
    return out;
  };
  std::vector<std::string> inputs;
  for (const Value& input : At(complete, "inputs").list_value().values()) {
    EXPECT_EQ(At(input, "namespace").string_value(), WarehouseNamespace());
    inputs.push_back(At(input, "name").string_value() + " -> " + linked(input));
  }
  EXPECT_THAT(inputs,
              ElementsAre("raw_orders -> e2e-lineage orders DATASET",
                          "dim_customers -> e2e-lineage customers DATASET"));
  ASSERT_EQ(At(complete, "outputs").list_value().values_size(), 1);
  const Value& output = At(complete, "outputs").list_value().values(0);
  EXPECT_EQ(At(output, "namespace").string_value(), WarehouseNamespace());
  EXPECT_EQ(At(output, "name").string_value(), "daily_revenue");
  EXPECT_EQ(linked(output), "e2e-lineage daily_revenue DATASET");
  Sqlite db(warehouse_, /*read_only=*/true);
  auto rows = db.Query(
      "SELECT COUNT(*) FROM daily_revenue WHERE ds >= '2025-01-02' AND ds < "
      "'2025-01-05'");
  ASSERT_TRUE(rows.has_value()) << db.error();
  EXPECT_EQ(At(At(At(output, "outputFacets"), "outputStatistics"), "rowCount")
                .number_value(),
            std::stod((*rows)[0][0]));
  EXPECT_EQ((*rows)[0][0], "12");  // 3 days x 4 regions
  // The job's run has no datasets of its own; START has no statistics.
  EXPECT_EQ(At(events[0], "outputs").list_value().values_size(), 0);
  EXPECT_EQ(At(At(events[1], "outputs").list_value().values(0), "outputFacets")
                .kind_case(),
            Value::KIND_NOT_SET);

  const std::string scrape =
      WaitForSample(daemon, "backfill_openlineage_events_sent_total", 4);
  EXPECT_EQ(Sample(scrape, "backfill_openlineage_events_sent_total"), 4);
  EXPECT_EQ(Sample(scrape, "backfill_openlineage_failed_attempts_total"), 0);
  ExpectCleanSigterm(daemon);
}

TEST_F(OpenLineageE2eTest,
       ARollbackIsARunOfItsOwnAndLeavesTheJobsRunsComplete) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/5, /*orders_per_day=*/20, false));
  HttpTestServer receiver;
  Daemon& daemon = NewDaemon();
  // The full endpoint, as OpenLineage clients are configured: used as is
  // (Events() checks every request went to /api/v1/lineage).
  daemon.set_extra_args({"--openlineage-url", receiver.Url("/api/v1/lineage")});
  ASSERT_TRUE(daemon.Start());
  const std::string job = SubmitSucceeded(
      daemon, {"daily_revenue", "--from", "2025-01-02", "--to", "2025-01-04"},
      "e2e lineage rollback");
  ASSERT_FALSE(job.empty());
  ASSERT_NO_FATAL_FAILURE(AwaitEvents(receiver, 4));
  RunResult rollback = daemon.CtlJson(
      {"rollback", job, "--reason", "bad numbers"}, seconds(120));
  ASSERT_EQ(rollback.exit_code, 0) << rollback;
  ASSERT_NO_FATAL_FAILURE(AwaitEvents(receiver, 8));
  const std::vector<Struct> events = Events(receiver);
  ASSERT_EQ(events.size(), 8u);
  std::vector<std::string> order;
  std::vector<std::string> runs;
  for (const Struct& e : events) {
    order.push_back(At(e, "eventType").string_value() + " " +
                    At(At(e, "job"), "name").string_value());
    runs.push_back(At(At(e, "run"), "runId").string_value());
  }
  EXPECT_THAT(
      order,
      ElementsAre("START backfill", "START backfill/daily_revenue",
                  "COMPLETE backfill", "COMPLETE backfill/daily_revenue",
                  // the rollback's runs
                  "START backfill", "START backfill/daily_revenue",
                  "COMPLETE backfill/daily_revenue", "COMPLETE backfill"));
  // No ABORT on the job's runs; the rollback's runs are new runs whose
  // parent is the run they undo.
  const std::string job_run = runs[0];
  const std::string dataset_run = runs[1];
  EXPECT_EQ(runs[2], job_run);
  EXPECT_EQ(runs[3], dataset_run);
  EXPECT_NE(runs[4], job_run);
  EXPECT_NE(runs[5], dataset_run);
  EXPECT_EQ(runs[7], runs[4]);
  EXPECT_EQ(runs[6], runs[5]);
  EXPECT_EQ(
      At(At(At(At(At(events[4], "run"), "facets"), "parent"), "run"), "runId")
          .string_value(),
      job_run);
  const Value& parent = At(At(At(events[6], "run"), "facets"), "parent");
  EXPECT_EQ(At(At(parent, "run"), "runId").string_value(), dataset_run);
  EXPECT_EQ(At(At(parent, "job"), "name").string_value(),
            "backfill/daily_revenue");
  // The restored dataset is the rollback run's output.
  ASSERT_EQ(At(events[6], "outputs").list_value().values_size(), 1);
  const Value& output = At(events[6], "outputs").list_value().values(0);
  EXPECT_EQ(At(output, "namespace").string_value(), WarehouseNamespace());
  EXPECT_EQ(At(output, "name").string_value(), "daily_revenue");
  EXPECT_EQ(
      At(At(At(At(events[6], "run"), "facets"), "backfilld_backfill"), "state")
          .string_value(),
      "ROLLED_BACK");
  ExpectCleanSigterm(daemon);
}

TEST_F(OpenLineageE2eTest, AFailingReceiverNeverFailsTheJob) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/5, /*orders_per_day=*/20, false));
  HttpTestServer receiver;
  receiver.SetHandler([](const HttpTestServer::Request&) {
    HttpTestServer::Response r;
    r.status = 500;
    r.body = "{\"error\":\"down for maintenance\"}";
    return r;
  });
  Daemon& daemon = NewDaemon();
  daemon.set_extra_args({"--openlineage-url", receiver.Url("/")});
  ASSERT_TRUE(daemon.Start());
  const std::string job = SubmitSucceeded(
      daemon, {"daily_revenue", "--from", "2025-01-01", "--to", "2025-01-06"},
      "e2e lineage outage");
  ASSERT_FALSE(job.empty());
  EXPECT_EQ(PublishedRevenue(warehouse_, "0000", "9999"),
            ExpectedRevenue(warehouse_, "2025-01-01", "2025-01-06"));
  const std::string scrape =
      WaitForSample(daemon, "backfill_openlineage_failed_attempts_total", 2);
  EXPECT_EQ(Sample(scrape, "backfill_openlineage_events_sent_total"), 0);
  EXPECT_GE(receiver.requests().size(), 2u);
  // SIGTERM: the drain gives up what is left and the daemon exits 0.
  ExpectCleanSigterm(daemon);
}

TEST_F(OpenLineageE2eTest, AReceiverThatIsDownNeverFailsTheJob) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/5, /*orders_per_day=*/20, false));
  const int closed_port = FreePort();  // nothing listens there
  Daemon& daemon = NewDaemon();
  daemon.set_extra_args(
      {"--openlineage-url", absl::StrCat("http://127.0.0.1:", closed_port)});
  ASSERT_TRUE(daemon.Start());
  const std::string job = SubmitSucceeded(
      daemon, {"daily_revenue", "--from", "2025-01-01", "--to", "2025-01-03"},
      "e2e lineage receiver down");
  ASSERT_FALSE(job.empty());
  const std::string scrape =
      WaitForSample(daemon, "backfill_openlineage_failed_attempts_total", 1);
  EXPECT_EQ(Sample(scrape, "backfill_openlineage_events_sent_total"), 0);
  ExpectCleanSigterm(daemon);
}

TEST_F(OpenLineageE2eTest, BadUrlIsRefusedAtStart) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/1, /*orders_per_day=*/1, false));
  Daemon& daemon = NewDaemon();
  daemon.set_extra_args({"--openlineage-url", "marquez:5000"});
  std::optional<int> code = daemon.SpawnExpectingExit(seconds(30));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2);
  EXPECT_TRUE(HasStartupError(ReadFile(daemon.log()), "--openlineage-url"))
      << ReadFile(daemon.log());
}

TEST_F(OpenLineageE2eTest, AJobInterruptedByKill9CompletesItsRunAfterRestart) {
  constexpr int kDays = 60;
  ASSERT_NO_FATAL_FAILURE(Prepare(kDays, /*orders_per_day=*/100, true));
  HttpTestServer receiver;
  Daemon& first = NewDaemon(/*workers=*/1);
  first.set_extra_args({"--openlineage-url", receiver.Url("")});
  ASSERT_TRUE(first.Start());
  RunResult submit =
      first.CtlJson({"submit", "daily_revenue", "--from", "2025-01-01", "--to",
                     "2025-03-02", "--reason", "e2e lineage restart"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  const std::string job = JsonString(submit.out, "id");
  ASSERT_NO_FATAL_FAILURE(AwaitEvents(receiver, 2));  // the STARTs
  RunResult status = first.CtlJson({"status", job});
  ASSERT_FALSE(IsTerminalState(JsonString(status.out, "state")))
      << "the job finished before it could be interrupted:\n"
      << status;
  first.Signal(SIGKILL);
  ASSERT_TRUE(first.Wait(seconds(30)).has_value());

  Daemon& second = NewDaemon(/*workers=*/2);
  second.set_extra_args({"--openlineage-url", receiver.Url("")});
  ASSERT_TRUE(second.Start());
  const std::string final_json = WaitTerminal(second, job, seconds(240));
  ASSERT_EQ(JsonString(final_json, "state"), "BACKFILL_STATE_SUCCEEDED");
  ASSERT_NO_FATAL_FAILURE(AwaitEvents(receiver, 4));
  const std::vector<Struct> events = Events(receiver);
  ASSERT_EQ(events.size(), 4u);
  for (int i : {0, 1}) {
    EXPECT_EQ(At(events[i], "eventType").string_value(), "START");
    EXPECT_EQ(At(events[i + 2], "eventType").string_value(), "COMPLETE");
    EXPECT_EQ(At(At(events[i], "run"), "runId").string_value(),
              At(At(events[i + 2], "run"), "runId").string_value());
  }
  ExpectCleanSigterm(second);
}

}  // namespace
}  // namespace e2e_openlineage_test
}  // namespace backfill
