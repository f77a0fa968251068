// Downstream consumers: the `consumers:` keys, the JSON reader, how a probed
// value is compared with the warehouse's, and a job's confirmation through
// the runner (unhealthy, confirmed again, resumed after a restart) over the
// in-memory state store and FakeEngine.

#include <cstdlib>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/base/clock.h"
#include "core/base/json_value.h"
#include "core/model/catalog.h"
#include "core/model/pipeline_loader.h"
#include "core/run/backfill_manager.h"
#include "core/run/confirm_step.h"
#include "core/run/consumer_confirmer.h"
#include "core/run/job_observer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/consumer_fakes.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_consumers_test {
namespace {

using testing::Answer;
using ::testing::ElementsAre;
using testing::FakeCommands;
using testing::FakeHttp;
using ::testing::HasSubstr;
using testing::Json;
using ::testing::Pair;
using testing::Real;
using testing::Text;

std::string Pipeline(const std::string& consumers) {
  return absl::StrCat(R"yaml(datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: day, grain: day}
  - name: segment_daily
    kind: derived
    table: segment_daily
    partition: {column: day, grain: day}
    upstream: [{dataset: orders, mapping: identity}]
    transform: |
      SELECT day, SUM(amount) AS amount FROM raw_orders
      WHERE day >= :partition_start AND day < :partition_end GROUP BY day
    contract:
      columns: {day: TEXT, amount: REAL}
    consumers:
)yaml",
                      consumers);
}

constexpr char kIssueConsumer[] = R"yaml(      - name: amount_cache
        kind: http
        invalidate: {url: "http://127.0.0.1:8088/invalidate"}
        probe: {url: "http://127.0.0.1:8088/value?day={partition}", field: amount}
        expect: "SELECT ROUND(SUM(amount), 2) FROM segment_daily WHERE day = :partition"
        timeout: 30s
)yaml";

std::string LoadError(const std::string& consumers) {
  absl::StatusOr<Catalog> c =
      LoadPipelineTexts({{"p.yaml", Pipeline(consumers)}});
  EXPECT_FALSE(c.ok());
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(ConsumerSpecTest, TheIssueExampleLoads) {
  absl::StatusOr<Catalog> c =
      LoadPipelineTexts({{"p.yaml", Pipeline(kIssueConsumer)}});
  ASSERT_TRUE(c.ok()) << c.status();
  const DatasetSpec* d = c->Find("segment_daily");
  ASSERT_EQ(d->consumers.size(), 1u);
  const ConsumerSpec& s = d->consumers[0];
  EXPECT_EQ(s.name, "amount_cache");
  EXPECT_EQ(s.kind, ConsumerKind::kHttp);
  EXPECT_EQ(s.invalidate_url, "http://127.0.0.1:8088/invalidate");
  EXPECT_EQ(s.probe_url, "http://127.0.0.1:8088/value?day={partition}");
  EXPECT_EQ(s.field, "amount");
  EXPECT_EQ(s.sample, 0);
  EXPECT_EQ(s.timeout, absl::Seconds(30));
  EXPECT_EQ(s.expect,
            "SELECT ROUND(SUM(amount), 2) FROM segment_daily WHERE day = "
            ":partition");
  EXPECT_EQ(s.line, 17);
  EXPECT_EQ(ProbeUrl(s, "2025-03-01|eu u"),
            "http://127.0.0.1:8088/value?day=2025-03-01%7Ceu%20u");
}

TEST(ConsumerSpecTest, AnAtSignAfterTheHostIsNoUserName) {
  absl::StatusOr<Catalog> c = LoadPipelineTexts({{"p.yaml", Pipeline(R"yaml(
      - name: a
        kind: http
        invalidate: {url: "http://x:8088/i?by=ops@example.com"}
        probe: {url: "http://x/v/@{partition}", field: f}
        expect: SELECT 1
)yaml")}});
  ASSERT_TRUE(c.ok()) << c.status();
}

TEST(ConsumerSpecTest, DefaultsAndCommands) {
  absl::StatusOr<Catalog> c = LoadPipelineTexts({{"p.yaml", Pipeline(R"yaml(
      - name: dash
        kind: command
        invalidate: {command: [/opt/bin/flush, --all]}
        probe: {command: [/opt/bin/read, "--day={partition}"], field: v, sample: 2}
        expect: SELECT 1
)yaml")}});
  ASSERT_TRUE(c.ok()) << c.status();
  const ConsumerSpec& s = c->Find("segment_daily")->consumers[0];
  EXPECT_EQ(s.timeout, kDefaultConsumerTimeout);
  EXPECT_EQ(s.sample, 2);
  EXPECT_THAT(ProbeCommand(s, "2025-03-01"),
              ElementsAre("/opt/bin/read", "--day=2025-03-01"));
  EXPECT_THAT(InvalidateCommand(s, "segment_daily", "bf-7", {"a", "b"}),
              ElementsAre("/opt/bin/flush", "--all", "segment_daily", "bf-7",
                          "a", "b"));
  ConsumerSpec plain = s;
  plain.probe_command = {"/opt/bin/read"};
  EXPECT_THAT(ProbeCommand(plain, "2025-03-01"),
              ElementsAre("/opt/bin/read", "2025-03-01"));
}

TEST(ConsumerSpecTest, LoadErrorsNameFileLineAndReason) {
  EXPECT_THAT(LoadError(R"yaml(      - name: a
        kind: ftp
        invalidate: {url: "http://x/i"}
        probe: {url: "http://x/v?d={partition}", field: f}
        expect: SELECT 1
)yaml"),
              HasSubstr("p.yaml:18: `kind` in consumer \"a\" of dataset "
                        "\"segment_daily\" is \"ftp\"; expected http or "
                        "command"));
  EXPECT_THAT(LoadError(absl::StrCat(kIssueConsumer, kIssueConsumer)),
              HasSubstr("p.yaml:23: consumer name \"amount_cache\" in dataset "
                        "\"segment_daily\" is used twice"));
  EXPECT_THAT(LoadError(R"yaml(      - name: a
        kind: http
        invalidate: {url: "file:///etc/passwd"}
        probe: {url: "http://x/v?d={partition}", field: f}
        expect: SELECT 1
)yaml"),
              HasSubstr("p.yaml:19: `url` in the invalidate of consumer \"a\" "
                        "of dataset \"segment_daily\" is \"file:///etc/"
                        "passwd\"; expected an http:// or https:// URL"));
  EXPECT_THAT(LoadError(R"yaml(      - name: a
        kind: http
        invalidate: {url: "http://cache:s3cr3t@x/i"}
        probe: {url: "http://x/v?d={partition}", field: f}
        expect: SELECT 1
)yaml"),
              HasSubstr("p.yaml:19: `url` in the invalidate of consumer \"a\" "
                        "of dataset \"segment_daily\" holds a user name or "
                        "password (user@host); credentials never go in the "
                        "file"));
  EXPECT_THAT(LoadError(R"yaml(      - name: a
        kind: http
        invalidate: {url: "http://x/i"}
        probe: {url: "https://u@x/v?d={partition}", field: f}
        expect: SELECT 1
)yaml"),
              HasSubstr("holds a user name or password"));
  EXPECT_THAT(LoadError(R"yaml(      - name: a
        kind: http
        invalidate: {url: "http://x/i"}
        probe: {url: "http://x/v", field: f}
        expect: SELECT 1
)yaml"),
              HasSubstr("must say where the partition goes with {partition}"));
  EXPECT_THAT(LoadError(R"yaml(      - name: a
        kind: command
        invalidate: {command: [/bin/sh, -c, "curl x"]}
        probe: {command: [/bin/read], field: f}
        expect: SELECT 1
)yaml"),
              HasSubstr("p.yaml:19: `command` in the invalidate of consumer "
                        "\"a\" of dataset \"segment_daily\" runs the shell "
                        "\"/bin/sh\""));
  EXPECT_THAT(LoadError(R"yaml(      - name: a
        kind: http
        invalidate: {url: "http://x/i"}
        probe: {url: "http://x/v?d={partition}", field: f}
        expect: DELETE FROM segment_daily
)yaml"),
              HasSubstr("p.yaml:21: `expect` in consumer \"a\""));
  EXPECT_THAT(LoadError(R"yaml(      - name: a
        kind: http
        invalidate: {url: "http://x/i"}
        probe: {url: "http://x/v?d={partition}", field: f}
        expect: SELECT :keys
)yaml"),
              HasSubstr("p.yaml:21:"));
  EXPECT_THAT(LoadError(R"yaml(      - name: a
        kind: http
        invalidate: {url: "http://x/i"}
        probe: {url: "http://x/v?d={partition}", field: f}
        expect: SELECT 1
        timeout: 2h
)yaml"),
              HasSubstr("p.yaml:22: `timeout` in consumer \"a\" of dataset "
                        "\"segment_daily\" is \"2h\"; expected a duration "
                        "from 1s to 10m"));
  EXPECT_THAT(LoadError(R"yaml(      - name: a
        kind: http
        invalidate: {url: "http://x/i"}
        probe: {url: "http://x/v?d={partition}", field: f, path: x}
        expect: SELECT 1
)yaml"),
              HasSubstr("p.yaml:20: unknown key \"path\" in the probe of "
                        "consumer \"a\""));
}

TEST(ConsumerSpecTest, HeadersReferenceTheEnvironmentAndNeverHoldItsValue) {
  unsetenv("BF_TEST_UNSET_TOKEN");
  EXPECT_THAT(LoadError(R"yaml(      - name: a
        kind: http
        headers: {Authorization: "Bearer ${BF_TEST_UNSET_TOKEN}"}
        invalidate: {url: "http://x/i"}
        probe: {url: "http://x/v?d={partition}", field: f}
        expect: SELECT 1
)yaml"),
              HasSubstr("p.yaml:19: header Authorization in consumer \"a\" "
                        "of dataset \"segment_daily\" references the "
                        "environment variable BF_TEST_UNSET_TOKEN, which is "
                        "not set"));
  setenv("BF_TEST_TOKEN", "s3cr3t", 1);
  absl::StatusOr<Catalog> c = LoadPipelineTexts({{"p.yaml", Pipeline(R"yaml(
      - name: a
        kind: http
        headers: {Authorization: "Bearer ${BF_TEST_TOKEN}"}
        invalidate: {url: "http://x/i"}
        probe: {url: "http://x/v?d={partition}", field: f}
        expect: SELECT 1
)yaml")}});
  ASSERT_TRUE(c.ok()) << c.status();
  const ConsumerSpec& s = c->Find("segment_daily")->consumers[0];
  EXPECT_THAT(s.headers,
              ElementsAre(Pair("Authorization", "Bearer ${BF_TEST_TOKEN}")));
  EXPECT_EQ(*ExpandEnvironment(s.headers[0].second), "Bearer s3cr3t");
  EXPECT_THAT(LoadError(R"yaml(      - name: a
        kind: http
        headers: {Content-Type: text/plain}
        invalidate: {url: "http://x/i"}
        probe: {url: "http://x/v?d={partition}", field: f}
        expect: SELECT 1
)yaml"),
              HasSubstr("is set by backfilld and cannot be declared"));
}

TEST(JsonValueTest, ParsesStrictJson) {
  absl::StatusOr<JsonValue> v = ParseJson(
      R"( {"a": 12.5, "b": "x\u00e9\n", "c": null, "d": [1, true]} )");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->fields.at("a").number, 12.5);
  EXPECT_EQ(v->fields.at("b").text, "x\xc3\xa9\n");
  EXPECT_EQ(v->fields.at("c").type, JsonValue::Type::kNull);
  EXPECT_EQ(v->fields.at("d").items.size(), 2u);
  for (const char* bad : {"", "{", "{a: 1}", "[1,]", "01", "1.", "\"\x01\"",
                          "{} x", "nul", "1e999"}) {
    EXPECT_FALSE(ParseJson(bad).ok()) << bad;
  }
  EXPECT_EQ(JsonQuote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
}

TEST(DisagreementTest, NumbersWithinOneBillionthTextExactlyNullOnlyNull) {
  auto differs = [](const SqlValue& want, const std::string& served) {
    JsonValue v = Json(served);
    return ConsumerConfirmer::Disagreement(want, &v, "f");
  };
  EXPECT_FALSE(differs(Real(100.0), "100.00000000001"));  // 1e-13 relative
  EXPECT_FALSE(differs(Real(1e12), "1000000000500"));     // 5e-10 relative
  EXPECT_EQ(differs(Real(1e12), "1000000002000"), "1000000002000");  // 2e-9
  EXPECT_EQ(differs(Real(100.0), "100.0001"), "100.0001");
  EXPECT_FALSE(differs(Real(0.0), "0"));
  EXPECT_EQ(differs(Real(0.0), "1e-300"), "1e-300");
  SqlValue integer;
  integer.type = SqlValue::Type::kInteger;
  integer.integer = 42;
  EXPECT_FALSE(differs(integer, "42.0"));
  EXPECT_EQ(differs(integer, "\"42\""), "'42'");  // text is no number

  EXPECT_FALSE(differs(Text("eu"), "\"eu\""));
  EXPECT_EQ(differs(Text("eu"), "\"EU\""), "'EU'");
  EXPECT_EQ(differs(Text("eu"), "\"eu \""), "'eu '");
  EXPECT_EQ(differs(Text("1"), "1"), "1");

  SqlValue null;
  null.type = SqlValue::Type::kNull;
  EXPECT_FALSE(differs(null, "null"));
  EXPECT_FALSE(differs(SqlValue{}, "null"));  // no row: NULL
  EXPECT_EQ(differs(null, "0"), "0");
  EXPECT_EQ(differs(Real(1), "null"), "null");
  // A missing field never agrees, not even with NULL.
  EXPECT_EQ(ConsumerConfirmer::Disagreement(null, nullptr, "amount"),
            "an answer without the field 'amount'");
}

TEST(ShowTest, ARealIsShownWithEveryDigitItHas) {
  // Six significant digits would show 76219 for 76219.02, a value the
  // warehouse does not hold.
  EXPECT_EQ(ConsumerConfirmer::Show(Real(76219.02)), "76219.02");
  EXPECT_EQ(ConsumerConfirmer::Show(Real(0.1)), "0.1");
  EXPECT_EQ(ConsumerConfirmer::Show(Real(1.0 / 3)),
            "0.3333333333333333");  // Python: repr(1/3)
  EXPECT_EQ(ConsumerConfirmer::Show(Real(1e21)), "1e+21");
  EXPECT_EQ(ConsumerConfirmer::Show(Real(-2.5)), "-2.5");
}

// ---------------------------------------------------------------------------
// Through the manager: CONFIRMING after the publish, ConfirmBackfill, and a
// restart while CONFIRMING.

constexpr char kRunnerPipeline[] = R"yaml(
datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: day, grain: day}
  - name: daily
    kind: derived
    partition: {column: day, grain: day}
    upstream: [{dataset: orders, mapping: identity}]
    transform: "SELECT day, 1 AS n FROM raw_orders WHERE day = :partition"
    contract: {columns: {day: TEXT, n: INTEGER}}
    consumers:
      - name: n_cache
        kind: http
        invalidate: {url: "http://cache/invalidate"}
        probe: {url: "http://cache/n?day={partition}", field: n}
        expect: "SELECT n FROM daily WHERE day = :partition"
        timeout: 10s
)yaml";

// A cache serving `served` for every day; thread-safe.
class SharedCache : public HttpClient {
 public:
  absl::StatusOr<HttpResponse> Send(const HttpRequest& request) override {
    absl::MutexLock lock(&mu_);
    if (request.method == "POST") {
      posts_.push_back(request.body);
      return Answer(200, "{}");
    }
    return Answer(200, absl::StrCat(R"({"n": )", served_, "}"));
  }
  void set_served(int n) {
    absl::MutexLock lock(&mu_);
    served_ = n;
  }
  std::vector<std::string> posts() {
    absl::MutexLock lock(&mu_);
    return posts_;
  }

 private:
  absl::Mutex mu_;
  int served_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> posts_ ABSL_GUARDED_BY(mu_);
};

// The ends a runner reports, in order; thread-safe.
class EndsObserver : public JobObserver {
 public:
  void OnJobFinished(const std::string& job_id, JobState state, double,
                     double) override {
    absl::MutexLock lock(&mu_);
    ends_.push_back(absl::StrCat(job_id, " ", JobStateName(state)));
  }
  std::vector<std::string> ends() {
    absl::MutexLock lock(&mu_);
    return ends_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> ends_ ABSL_GUARDED_BY(mu_);
};

class ConfirmRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = LoadPipelineTexts({{"pipeline.yaml", kRunnerPipeline}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::make_unique<Catalog>(*std::move(catalog));
    QueryShape shape;
    shape.columns = {"n"};
    shape.read_only = true;
    shape.parameters = {":partition"};
    engine_.SetQueryShape("SELECT n FROM daily WHERE day = :partition", shape);
    // What the warehouse holds: n = 1 in every published partition.
    engine_.SetQueryValues([](const std::string&, const std::string&,
                              const std::string&) -> absl::StatusOr<SqlValue> {
      SqlValue v;
      v.type = SqlValue::Type::kInteger;
      v.integer = 1;
      return v;
    });
    Start();
  }
  void TearDown() override {
    if (manager_) manager_->Shutdown();
    manager_.reset();
  }
  void Start() {
    ManagerOptions options;
    options.http = &cache_;
    manager_ = std::make_unique<BackfillManager>(
        catalog_.get(), &store_, &engine_, &clock_, &ends_, options);
    ASSERT_TRUE(manager_->Start().ok());
  }
  Job WaitEnded(const std::string& id) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    absl::StatusOr<Job> job = store_.GetJob(id);
    while (job.ok() && !IsTerminal(job->state) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
      job = store_.GetJob(id);
    }
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : Job{};
  }

  std::unique_ptr<Catalog> catalog_;
  testing::InMemoryStateStore store_;
  testing::FakeEngine engine_;
  ManualClock clock_{absl::FromUnixSeconds(1767225600)};
  SharedCache cache_;
  EndsObserver ends_;
  std::unique_ptr<BackfillManager> manager_;
};

TEST_F(ConfirmRunnerTest, UnhealthyThenConfirmedAgainThenResumedAfterRestart) {
  BackfillRequest r;
  r.dataset = "daily";
  r.from = "2025-01-01";
  r.to = "2025-01-03";
  r.reason = "test";
  auto submitted = manager_->Submit(r, {});
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->job.id;

  // The cache serves 0 where the warehouse has 1.
  Job job = WaitEnded(id);
  EXPECT_EQ(job.state, JobState::kDownstreamUnhealthy);
  EXPECT_THAT(job.message,
              HasSubstr("published, but downstream is unhealthy: consumer "
                        "n_cache of daily still serves 0 for partition "
                        "2025-01-01 where the warehouse has 1 after "));
  EXPECT_THAT(job.message, HasSubstr("(timeout 10s; "));
  EXPECT_THAT(cache_.posts(),
              ElementsAre(absl::StrCat(R"({"dataset":"daily","job":")", id,
                                       R"(","partitions":["2025-01-01",)"
                                       R"("2025-01-02"]})")));

  // Fixed: confirming again ends SUCCEEDED.
  cache_.set_served(1);
  absl::StatusOr<Job> confirming = manager_->Confirm(id);
  ASSERT_TRUE(confirming.ok()) << confirming.status();
  EXPECT_NE(confirming->state, JobState::kDownstreamUnhealthy);
  job = WaitEnded(id);
  EXPECT_EQ(job.state, JobState::kSucceeded);
  EXPECT_EQ(job.message,
            "published and confirmed downstream: consumer n_cache of daily "
            "serves the new numbers (2 partitions probed)");
  EXPECT_EQ(cache_.posts().size(), 2u);

  // A SUCCEEDED job may be confirmed again too, saying why: the audit log
  // keeps who and the reason.
  absl::StatusOr<Job> again = manager_->Confirm(id, "erin", "cache redeployed");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(WaitEnded(id).state, JobState::kSucceeded);
  EXPECT_EQ(cache_.posts().size(), 3u);
  auto events = store_.ListAuditEvents(id);
  ASSERT_TRUE(events.ok()) << events.status();
  bool recorded = false;
  for (const AuditEvent& e : *events) {
    if (e.to_state == JobStateName(JobState::kConfirming) &&
        absl::StrContains(e.message, "cache redeployed") &&
        absl::StrContains(e.message, "erin")) {
      recorded = true;
    }
  }
  EXPECT_TRUE(recorded);
  // A reason too long is refused and changes nothing.
  EXPECT_EQ(
      manager_->Confirm(id, "erin", std::string(5000, 'x')).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.GetJob(id)->state, JobState::kSucceeded);

  EXPECT_EQ(manager_->Confirm("bf-999").status().code(),
            absl::StatusCode::kNotFound);

  // A daemon that stopped while the job was CONFIRMING confirms it again
  // when it starts: the job never stays CONFIRMING.
  manager_->Shutdown();
  manager_.reset();
  ASSERT_TRUE(store_
                  .TransitionJob(id, JobState::kSucceeded,
                                 JobState::kConfirming, "confirming",
                                 clock_.Now())
                  .ok());
  engine_.Restart();
  Start();
  EXPECT_EQ(WaitEnded(id).state, JobState::kSucceeded);
  EXPECT_EQ(cache_.posts().size(), 4u);
  // The job ended once, unhealthy; confirmations asked for later, before
  // and after the restart, are not new ends.
  EXPECT_THAT(ends_.ends(),
              ElementsAre(absl::StrCat(id, " DOWNSTREAM_UNHEALTHY")));
}

TEST_F(ConfirmRunnerTest, AJobRecoveryEndsIsReportedAsEnded) {
  // A job RUNNING when the process died, whose dataset's transform has
  // changed since: recovery fails it, and says so to the observers.
  manager_->Shutdown();
  manager_.reset();
  Job job;
  job.request.dataset = "daily";
  job.request.reason = "test";
  DatasetPlan dp;
  dp.dataset = "daily";
  dp.partitions = {"2025-01-01"};
  dp.transform_version = "an older transform";
  job.plan.datasets.push_back(dp);
  auto created = store_.CreateJob(job, clock_.Now());
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string id = created->job.id;
  ASSERT_TRUE(store_
                  .TransitionJob(id, JobState::kQueued, JobState::kRunning,
                                 "running", clock_.Now())
                  .ok());
  Start();
  const Job ended = WaitEnded(id);
  EXPECT_EQ(ended.state, JobState::kFailed);
  EXPECT_THAT(ended.message, HasSubstr("cannot resume after restart"));
  EXPECT_THAT(ends_.ends(), ElementsAre(absl::StrCat(id, " FAILED")));
}

TEST_F(ConfirmRunnerTest, OnlyPublishedJobsCanBeConfirmed) {
  BackfillRequest r;
  r.dataset = "daily";
  r.from = "2025-01-01";
  r.to = "2025-01-02";
  r.reason = "test";
  cache_.set_served(1);
  auto submitted = manager_->Submit(r, {});
  ASSERT_TRUE(submitted.ok());
  const std::string id = submitted->job.id;
  ASSERT_EQ(WaitEnded(id).state, JobState::kSucceeded);
  // As if it had been rolled back.
  ASSERT_TRUE(store_
                  .TransitionJob(id, JobState::kSucceeded,
                                 JobState::kRolledBack, "rolled back",
                                 clock_.Now())
                  .ok());
  absl::StatusOr<Job> refused = manager_->Confirm(id);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("is ROLLED_BACK: its publication was rolled back"));
  EXPECT_EQ(store_.GetJob(id)->state, JobState::kRolledBack);
}

}  // namespace
}  // namespace core_consumers_test
}  // namespace backfill
