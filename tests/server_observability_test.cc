// Observability of a real Daemon (gRPC server, manager, SQLite store and
// warehouse on a temporary directory, /metrics over HTTP):
//  * after many jobs the scrape has as many series as after a few (no
//    label grows with jobs or partitions), and its counters match what the
//    test did and what state.db records (read with plain SQL);
//  * a cancelled job counts in neither cost counter;
//  * every metric name of the Grafana dashboard (deploy/grafana) is in the
//    scrape, and promtool parses every expression of it.

#include <sqlite3.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/backfill_client.h"
#include "core/model/pipeline_loader.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "platform/curl_http_client.h"
#include "server/daemon.h"
#include "tests/testing/prometheus_text.h"
#include "tests/testing/revenue_pipeline.h"

namespace backfill {
namespace server_observability_test {
namespace {

namespace fs = std::filesystem;
using ::backfill::testing::DeclaredFamilies;
using ::backfill::testing::ParseSamples;
using ::backfill::testing::PromSample;
using ::backfill::testing::SumOf;
using ::testing::HasSubstr;
using ::testing::Not;

template <typename F>
bool Eventually(F done, absl::Duration timeout = absl::Seconds(60)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return done();
}

std::string Day(int day) { return absl::StrFormat("2025-02-%02d", day); }

class ObservabilityTest : public ::testing::Test {
 protected:
  // One order a day in February 2025, one customer.
  void SetUp() override {
    std::string tmpl =
        (fs::temp_directory_path() / "backfill-observability-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((fs::path(dir_) / "warehouse.db").c_str(), &db),
              SQLITE_OK);
    std::string sql =
        "CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, order_date "
        "TEXT NOT NULL, customer_id INTEGER NOT NULL, amount REAL NOT NULL, "
        "refund REAL NOT NULL);"
        "CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY, region "
        "TEXT NOT NULL);"
        "INSERT INTO dim_customers VALUES (1, 'emea');";
    for (int day = 1; day <= 28; ++day) {
      absl::StrAppend(&sql,
                      "INSERT INTO raw_orders (order_date, customer_id, "
                      "amount, refund) VALUES ('",
                      Day(day), "', 1, 10.0, 0.0);");
    }
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK);

    // Each partition counts to `spin` first, so that a job of the whole
    // month runs long enough to be cancelled while RUNNING.
    const std::string condition =
        "        AND (WITH RECURSIVE spin(n) AS (SELECT 1 UNION ALL\n"
        "             SELECT n + 1 FROM spin WHERE n < 300000)\n"
        "             SELECT COUNT(*) FROM spin) > 0\n";
    absl::StatusOr<Catalog> catalog = LoadPipelineTexts(
        {{"pipeline.yaml", fixtures::RevenuePipelineYaml(condition)}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    DaemonOptions options;
    options.data_dir = dir_;
    options.listen = "127.0.0.1:0";
    options.metrics_listen = "127.0.0.1:0";
    options.workers = 1;
    absl::StatusOr<std::unique_ptr<Daemon>> daemon =
        Daemon::Start(options, *std::move(catalog));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    client_ = BackfillClient::Connect(daemon_->listen_address());
  }

  void TearDown() override {
    client_.reset();
    if (daemon_ != nullptr) daemon_->Shutdown();
    daemon_.reset();
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  std::string Scrape() {
    HttpRequest request;
    request.url =
        absl::StrCat("http://127.0.0.1:", daemon_->metrics_port(), "/metrics");
    absl::StatusOr<HttpResponse> response = http_.Send(request);
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return "";
    EXPECT_EQ(response->status, 200);
    return response->body;
  }

  v1::BackfillRequest Request(const std::string& from, const std::string& to) {
    v1::BackfillRequest request;
    request.set_dataset("daily_revenue");
    request.set_from_partition(from);
    request.set_to_partition(to);
    request.set_reason("observability test");
    request.set_requested_by("server_observability_test");
    return request;
  }

  // Submits [from, to) and waits until it ends; its final state.
  v1::BackfillState RunJob(const std::string& from, const std::string& to) {
    absl::StatusOr<v1::SubmitBackfillResponse> submitted =
        client_->Submit(Request(from, to), "");
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok()) return v1::BACKFILL_STATE_UNSPECIFIED;
    const std::string id = submitted->backfill().id();
    v1::BackfillState state = v1::BACKFILL_STATE_UNSPECIFIED;
    EXPECT_TRUE(Eventually([&] {
      absl::StatusOr<v1::Backfill> job = client_->Get(id);
      if (!job.ok()) return false;
      state = job->state();
      return state == v1::BACKFILL_STATE_SUCCEEDED ||
             state == v1::BACKFILL_STATE_FAILED ||
             state == v1::BACKFILL_STATE_CANCELLED;
    }));
    return state;
  }

  // Submits the whole month, cancels it once a partition is done while it
  // is RUNNING and waits until it is CANCELLED. `eta` gets the job as
  // read while it ran, after its first partition.
  void RunAndCancelMonth(v1::Backfill* running = nullptr,
                         std::string* scrape_while_running = nullptr) {
    absl::StatusOr<v1::SubmitBackfillResponse> submitted =
        client_->Submit(Request(Day(1), "2025-03-01"), "");
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    const std::string id = submitted->backfill().id();
    ASSERT_TRUE(Eventually([&] {
      absl::StatusOr<v1::Backfill> job = client_->Get(id);
      // Unchanged partitions (recomputed days published before) count.
      if (!job.ok() || job->state() != v1::BACKFILL_STATE_RUNNING ||
          job->partitions().staged() + job->partitions().unchanged() < 1) {
        return false;
      }
      if (running != nullptr) *running = *job;
      return true;
    }));
    if (scrape_while_running != nullptr) *scrape_while_running = Scrape();
    absl::StatusOr<v1::Backfill> cancelled = client_->Cancel(id, "test");
    ASSERT_TRUE(cancelled.ok()) << cancelled.status();
    ASSERT_TRUE(Eventually([&] {
      absl::StatusOr<v1::Backfill> job = client_->Get(id);
      return job.ok() && job->state() == v1::BACKFILL_STATE_CANCELLED;
    }));
  }

  // Waits (bounded) until the scrape counts `n` cancelled jobs.
  bool CancelledCounted(int n) {
    return Eventually([&] {
      return SumOf(ParseSamples(Scrape()), "backfill_jobs_finished_total",
                   {{"state", "cancelled"}}) == n;
    });
  }

  // One number from state.db, by plain SQL.
  double Sql(const std::string& query) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2((fs::path(dir_) / "state.db").c_str(), &db,
                              SQLITE_OPEN_READONLY, nullptr),
              SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    double value = -1;
    if (sqlite3_prepare_v2(db, query.c_str(), -1, &stmt, nullptr) ==
            SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      value = sqlite3_column_double(stmt, 0);
    } else {
      ADD_FAILURE() << query << ": " << sqlite3_errmsg(db);
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return value;
  }

  std::string dir_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<BackfillClient> client_;
  CurlHttpClient http_;
};

// The series of a scrape, without their values.
std::set<std::string> SeriesOf(const std::string& text) {
  std::set<std::string> out;
  for (const PromSample& s : ParseSamples(text)) {
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) absl::StrAppend(&key, ",", k, "=", v);
    out.insert(key);
  }
  return out;
}

TEST_F(ObservabilityTest, SeriesDoNotGrowWithJobsAndCountersMatchTheJobs) {
  // A first round with every kind of event the second one has: new
  // partitions, a rerun (unchanged), a cancelled job, a NOT_FOUND call.
  int succeeded = 0;
  std::vector<int> days = {1, 2, 3, 1};
  for (int day : days) {
    ASSERT_EQ(RunJob(Day(day), Day(day + 1)), v1::BACKFILL_STATE_SUCCEEDED);
    ++succeeded;
  }
  v1::Backfill running;
  std::string while_running;
  ASSERT_NO_FATAL_FAILURE(RunAndCancelMonth(&running, &while_running));
  EXPECT_EQ(client_->Get("bf-999999").status().code(),
            absl::StatusCode::kNotFound);
  // The end of a cancelled job reaches the metrics just after the store.
  ASSERT_TRUE(CancelledCounted(1));
  const std::set<std::string> first = SeriesOf(Scrape());

  // While the month ran with a partition done, its ETA was known.
  EXPECT_TRUE(running.has_eta()) << running.DebugString();
  EXPECT_GT(running.eta().partition_seconds(), 0);
  EXPECT_THAT(running.current_step(), HasSubstr("recompute in staging"));
  const auto during = ParseSamples(while_running);
  EXPECT_GT(SumOf(during, "backfill_running_jobs_eta_seconds"), 0);
  EXPECT_EQ(SumOf(during, "backfill_running_jobs_eta_unknown"), 0);

  // 46 more jobs: 45 of one day each (days wrap around: reruns), one
  // cancelled.
  for (int i = 0; i < 45; ++i) {
    const int day = 4 + i % 25;
    ASSERT_EQ(
        RunJob(Day(day), Day(day) < "2025-02-28" ? Day(day + 1) : "2025-03-01"),
        v1::BACKFILL_STATE_SUCCEEDED);
    ++succeeded;
  }
  ASSERT_NO_FATAL_FAILURE(RunAndCancelMonth());
  EXPECT_EQ(client_->Get("bf-999998").status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(CancelledCounted(2));
  const std::string text = Scrape();
  const std::set<std::string> second = SeriesOf(text);

  // Not one series more (nor less) after 51 jobs than after 5.
  EXPECT_EQ(second, first);
  EXPECT_THAT(text, Not(HasSubstr("bf-")));
  EXPECT_THAT(text, Not(HasSubstr("2025-02")));

  // The counters, against the test's own count and state.db.
  const auto samples = ParseSamples(text);
  EXPECT_EQ(
      SumOf(samples, "backfill_jobs_finished_total", {{"state", "succeeded"}}),
      succeeded);
  EXPECT_EQ(
      SumOf(samples, "backfill_jobs_finished_total", {{"state", "cancelled"}}),
      2);
  EXPECT_EQ(SumOf(samples, "backfill_jobs_published_total",
                  {{"dataset", "daily_revenue"}}),
            succeeded);
  EXPECT_EQ(SumOf(samples, "grpc_server_handled_total",
                  {{"grpc_method", "SubmitBackfill"},
                   {"grpc_type", "unary"},
                   {"grpc_code", "OK"}}),
            succeeded + 2);
  EXPECT_EQ(SumOf(samples, "grpc_server_handled_total",
                  {{"grpc_method", "GetBackfill"}, {"grpc_code", "NOT_FOUND"}}),
            2);
  EXPECT_EQ(SumOf(samples, "grpc_server_handled_total",
                  {{"grpc_method", "CancelBackfill"}, {"grpc_code", "OK"}}),
            2);
  const std::string succeeded_jobs =
      "(SELECT id FROM jobs WHERE state = 'SUCCEEDED')";
  EXPECT_EQ(SumOf(samples, "backfill_partitions_published_total",
                  {{"dataset", "daily_revenue"}}),
            Sql("SELECT COUNT(*) FROM tasks WHERE state = 'PUBLISHED'"));
  EXPECT_EQ(SumOf(samples, "backfill_partitions_checkpointed_total",
                  {{"dataset", "daily_revenue"}, {"state", "unchanged"}}),
            Sql("SELECT COUNT(*) FROM tasks WHERE state = 'UNCHANGED'"));
  EXPECT_EQ(SumOf(samples, "backfill_rows_published_total",
                  {{"dataset", "daily_revenue"}}),
            Sql("SELECT TOTAL(row_count) FROM lineage WHERE action = "
                "'publish'"));
  EXPECT_EQ(SumOf(samples, "backfill_cost_estimated_input_rows_total",
                  {{"dataset", "daily_revenue"}}),
            Sql("SELECT TOTAL(cost_backfill) FROM job_datasets WHERE job_id "
                "IN " +
                succeeded_jobs));
  EXPECT_EQ(SumOf(samples, "backfill_cost_full_reload_input_rows_total",
                  {{"dataset", "daily_revenue"}}),
            Sql("SELECT TOTAL(cost_full_reload) FROM job_datasets WHERE "
                "job_id IN " +
                succeeded_jobs));
  EXPECT_EQ(SumOf(samples, "backfill_cost_actual_input_rows_total",
                  {{"dataset", "daily_revenue"}}),
            Sql("SELECT TOTAL(input_rows) FROM tasks WHERE job_id IN " +
                succeeded_jobs));
  // The cancelled jobs estimated the whole month each: had they counted,
  // the estimate would hold them.
  EXPECT_GT(Sql("SELECT TOTAL(cost_backfill) FROM job_datasets WHERE job_id "
                "IN (SELECT id FROM jobs WHERE state = 'CANCELLED')"),
            0);
}

// --- The dashboard ---------------------------------------------------------

// PromQL words that are not metric names: functions (followed by "("),
// aggregation modifiers and operators.
const std::set<std::string>& PromqlKeywords() {
  static const std::set<std::string> words = {
      "by", "without", "on", "ignoring", "group_left", "group_right", "and",
      "or", "unless", "bool", "offset", "inf", "nan", "atan2",
      // Aggregation operators: "sum by (x) (...)" has no "(" after "sum".
      "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
      "count_values", "bottomk", "topk", "quantile"};
  return words;
}

// The metric names an expression uses: identifiers outside label matchers
// {...}, range selectors [...], strings and grouping lists "by (...)",
// that are not followed by "(" (a function) and are not PromQL keywords.
std::set<std::string> MetricNames(const std::string& expr) {
  std::set<std::string> names;
  size_t i = 0;
  bool grouping = false;  // inside the list of by/without/on/ignoring
  while (i < expr.size()) {
    const char c = expr[i];
    if (c == '"' || c == '\'' || c == '`') {
      const size_t close = expr.find(c, i + 1);
      i = close == std::string::npos ? expr.size() : close + 1;
    } else if (c == '{') {
      const size_t close = expr.find('}', i);
      i = close == std::string::npos ? expr.size() : close + 1;
    } else if (c == '[') {
      const size_t close = expr.find(']', i);
      i = close == std::string::npos ? expr.size() : close + 1;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      // A number (1e3, 0.95, 0x1f): no name starts inside it.
      while (i < expr.size() &&
             (std::isalnum(static_cast<unsigned char>(expr[i])) ||
              expr[i] == '.')) {
        ++i;
      }
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_' ||
               c == ':') {
      size_t j = i;
      while (j < expr.size() &&
             (std::isalnum(static_cast<unsigned char>(expr[j])) ||
              expr[j] == '_' || expr[j] == ':')) {
        ++j;
      }
      const std::string word = expr.substr(i, j - i);
      size_t k = j;
      while (k < expr.size() && expr[k] == ' ') ++k;
      const bool call = k < expr.size() && expr[k] == '(';
      if (word == "by" || word == "without" || word == "on" ||
          word == "ignoring" || word == "group_left" || word == "group_right") {
        grouping = call;
      } else if (!call && !grouping && PromqlKeywords().count(word) == 0) {
        names.insert(word);
      }
      i = j;
    } else if (c == ')') {
      grouping = false;
      ++i;
    } else {
      ++i;
    }
  }
  return names;
}

TEST(DashboardTokenizerTest, FindsMetricNamesOnly) {
  EXPECT_EQ(MetricNames("histogram_quantile(0.95, sum by (le, grpc_method) "
                        "(rate(grpc_server_handling_seconds_bucket{grpc_type="
                        "\"unary\"}[5m])))"),
            std::set<std::string>({"grpc_server_handling_seconds_bucket"}));
  EXPECT_EQ(MetricNames("sum(increase(a_total[1h])) / on (instance) "
                        "sum(b_total{x=\"y\"}) and c > 1e3"),
            std::set<std::string>({"a_total", "b_total", "c"}));
}

// Every expression of deploy/grafana/backfilld.json (panel targets and the
// templating query).
std::vector<std::string> DashboardExpressions() {
  std::ifstream in(std::string(BACKFILL_SOURCE_DIR) +
                   "/deploy/grafana/backfilld.json");
  std::stringstream text;
  text << in.rdbuf();
  google::protobuf::Struct dashboard;
  const auto status =
      google::protobuf::util::JsonStringToMessage(text.str(), &dashboard);
  EXPECT_TRUE(status.ok()) << status.ToString();
  std::vector<std::string> out;
  // Walks every value; collects "expr" strings and the templating
  // "definition" (label_values(METRIC, label) is Grafana's, not PromQL).
  std::function<void(const google::protobuf::Value&)> walk =
      [&](const google::protobuf::Value& v) {
        if (v.has_struct_value()) {
          for (const auto& [key, field] : v.struct_value().fields()) {
            if (key == "expr" && field.has_string_value()) {
              out.push_back(field.string_value());
            } else if (key == "definition" && field.has_string_value()) {
              std::string def = field.string_value();
              const std::string prefix = "label_values(";
              if (def.rfind(prefix, 0) == 0) {
                def = def.substr(prefix.size());
                out.push_back(def.substr(0, def.find(',')));
              }
            } else {
              walk(field);
            }
          }
        } else if (v.has_list_value()) {
          for (const auto& item : v.list_value().values()) walk(item);
        }
      };
  google::protobuf::Value root;
  *root.mutable_struct_value() = dashboard;
  walk(root);
  return out;
}

// The scrape's declared families with the series names each exports
// (a histogram's _bucket, _sum and _count).
std::set<std::string> ExportedNames(const std::string& text) {
  std::set<std::string> out;
  for (const auto& [name, type] : DeclaredFamilies(text)) {
    if (type == "histogram") {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        out.insert(name + suffix);
      }
    } else {
      out.insert(name);
    }
  }
  return out;
}

TEST_F(ObservabilityTest, EveryDashboardMetricIsInARealScrape) {
  ASSERT_EQ(RunJob(Day(1), Day(3)), v1::BACKFILL_STATE_SUCCEEDED);
  const std::string text = Scrape();
  const std::set<std::string> exported = ExportedNames(text);
  std::set<std::string> sampled;
  for (const PromSample& s : ParseSamples(text)) sampled.insert(s.name);
  // Declared in every scrape, with samples only once a downstream consumer
  // was confirmed, while a running job has an ETA, or for a dataset whose
  // replay policy was evaluated (this pipeline declares none).
  const std::set<std::string> sampled_later = {
      "backfill_downstream_healthy",
      "backfill_downstream_confirmation_seconds_bucket",
      "backfill_running_jobs_eta_seconds",
      "backfill_replay_due_partitions",
      "backfill_replay_evaluations_total",
      "backfill_replay_last_evaluation_timestamp_seconds"};
  // Not in the scrape of a daemon alone: the leases a replica of a group
  // holds (server/node_leases_collector.h, tested with a store of leases
  // in server_node_metrics_test), and Prometheus' own `up` of each target.
  const std::set<std::string> not_exported_alone = {"backfill_node_leases",
                                                    "up"};

  const std::vector<std::string> expressions = DashboardExpressions();
  ASSERT_GE(expressions.size(), 20u);
  std::set<std::string> used;
  for (const std::string& expr : expressions) {
    const std::set<std::string> names = MetricNames(expr);
    EXPECT_FALSE(names.empty()) << expr;
    for (const std::string& name : names) {
      used.insert(name);
      if (not_exported_alone.count(name) > 0) continue;
      EXPECT_TRUE(exported.count(name) > 0)
          << name << " (in " << expr << ") is not exported by backfilld";
      if (sampled_later.count(name) == 0) {
        EXPECT_TRUE(sampled.count(name) > 0)
            << name << " has no sample after a job ran";
      }
    }
  }
  // The panels the dashboard promises.
  for (const char* name :
       {"backfill_running_jobs_progress_ratio",
        "backfill_running_jobs_eta_seconds",
        "backfill_cost_estimated_input_rows_total",
        "backfill_cost_actual_input_rows_total",
        "backfill_cost_full_reload_input_rows_total",
        "backfill_downstream_healthy", "backfill_validation_failures_total",
        "backfill_jobs_finished_total", "grpc_server_handling_seconds_bucket",
        "backfill_replay_due_partitions", "backfill_replay_evaluations_total",
        "backfill_replay_last_evaluation_timestamp_seconds",
        "backfill_node_leases", "backfill_lease_takeovers_total",
        "process_cpu_seconds_total"}) {
    EXPECT_TRUE(used.count(name) > 0) << name << " is on no panel";
  }

  // promtool parses every expression, as recording rules (Grafana's
  // variables replaced by values).
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed";
  }
  const std::string rules = (fs::path(dir_) / "dashboard-rules.yml").string();
  {
    std::ofstream out(rules);
    out << "groups:\n  - name: dashboard\n    rules:\n";
    int n = 0;
    for (std::string expr : expressions) {
      expr = absl::StrReplaceAll(expr, {{"$__rate_interval", "5m"},
                                        {"$__range", "6h"},
                                        {"$instance", ".*"}});
      out << "      - record: dashboard:expr_" << n++ << "\n        expr: '"
          << absl::StrReplaceAll(expr, {{"'", "''"}}) << "'\n";
    }
  }
  FILE* pipe =
      popen(absl::StrCat("promtool check rules ", rules, " 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[512];
  while (fgets(buf, sizeof buf, pipe) != nullptr) output += buf;
  EXPECT_EQ(pclose(pipe), 0) << output;
}

}  // namespace
}  // namespace server_observability_test
}  // namespace backfill
