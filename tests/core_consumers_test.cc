// Downstream consumers: the `consumers:` keys, the JSON reader, and the
// confirmer against a fake HTTP client, a fake command runner, FakeEngine's
// expect values and a ManualClock (every wait is the clock's).

#include <cstdlib>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
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
#include "tests/testing/fake_engine.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_consumers_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

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

// ---------------------------------------------------------------------------
// The confirmer

class FakeHttp : public HttpClient {
 public:
  using Handler =
      std::function<absl::StatusOr<HttpResponse>(const HttpRequest& request)>;
  explicit FakeHttp(Handler handler) : handler_(std::move(handler)) {}
  absl::StatusOr<HttpResponse> Send(const HttpRequest& request) override {
    requests.push_back(request);
    return handler_(request);
  }
  std::vector<HttpRequest> requests;

 private:
  Handler handler_;
};

class FakeCommands : public CommandRunner {
 public:
  using Handler = std::function<absl::StatusOr<CommandResult>(
      const CommandRequest& request)>;
  explicit FakeCommands(Handler handler) : handler_(std::move(handler)) {}
  absl::StatusOr<CommandResult> Run(const CommandRequest& request) override {
    runs.push_back(request.argv);
    return handler_(request);
  }
  std::vector<std::vector<std::string>> runs;

 private:
  Handler handler_;
};

HttpResponse Answer(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

SqlValue Real(double v) {
  SqlValue s;
  s.type = SqlValue::Type::kReal;
  s.real = v;
  return s;
}

SqlValue Text(std::string v) {
  SqlValue s;
  s.type = SqlValue::Type::kText;
  s.text = std::move(v);
  return s;
}

class RecordingObserver : public JobObserver {
 public:
  void OnConsumerConfirmed(const std::string& dataset,
                           const std::string& consumer, bool healthy,
                           absl::Duration latency) override {
    seen.push_back(absl::StrCat(dataset, "/", consumer, "=", healthy));
  }
  std::vector<std::string> seen;
};

class ConfirmerTest : public ::testing::Test {
 protected:
  ConfirmerTest() : clock_(absl::FromUnixSeconds(1700000000)) {
    dataset_.name = "segment_daily";
    dataset_.kind = DatasetKind::kDerived;
    dataset_.table = "segment_daily";
    PartitionSpec p;
    p.column = "day";
    p.grain = Grain::kDay;
    dataset_.partition = p;
    consumer_.name = "amount_cache";
    consumer_.invalidate_url = "http://cache/invalidate";
    consumer_.probe_url = "http://cache/value?day={partition}";
    consumer_.field = "amount";
    consumer_.expect = "SELECT 1";
    consumer_.timeout = absl::Seconds(30);
  }

  ConsumerResult Run(HttpClient* http,
                     const std::vector<std::string>& partitions,
                     CommandRunner* commands = nullptr) {
    ConsumerConfirmer confirmer(&engine_, http, commands, &clock_, nullptr);
    return confirmer.Confirm(dataset_, consumer_, "bf-9", partitions);
  }

  // The warehouse has `value` in every partition.
  void WarehouseHas(double value) {
    engine_.SetQueryValues(
        [value](const std::string&, const std::string&,
                const std::string&) -> absl::StatusOr<SqlValue> {
          return Real(value);
        });
  }

  // The 30 days of April 2025.
  static std::vector<std::string> AprilDays() {
    std::vector<std::string> days;
    for (int d = 1; d <= 30; ++d) {
      days.push_back(absl::StrCat("2025-04-", d < 10 ? "0" : "", d));
    }
    return days;
  }

  testing::FakeEngine engine_;
  ManualClock clock_;
  DatasetSpec dataset_;
  ConsumerSpec consumer_;
};

TEST_F(ConfirmerTest, InvalidationIsRetriedWithBackoffOn5xxAndErrors) {
  engine_.SetQueryValues([](const std::string&, const std::string&,
                            const std::string& p) -> absl::StatusOr<SqlValue> {
    return Real(p == "2025-03-01" ? 10.5 : 20.25);
  });
  int posts = 0;
  FakeHttp http([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    if (r.method == "POST") {
      ++posts;
      if (posts == 1) return Answer(503, "busy");
      if (posts == 2) return absl::UnavailableError("connection refused");
      return Answer(204, "");
    }
    if (r.url == "http://cache/value?day=2025-03-01") {
      return Answer(200, R"({"amount": 10.5})");
    }
    return Answer(200, R"({"amount": 20.25, "other": 1})");
  });
  const absl::Time start = clock_.Now();
  ConsumerResult r = Run(&http, {"2025-03-01", "2025-03-02"});
  EXPECT_TRUE(r.healthy) << r.message;
  EXPECT_EQ(posts, 3);
  // 200 ms, then 400 ms: the clock's sleeps, nothing else.
  EXPECT_EQ(clock_.Now() - start, absl::Milliseconds(600));
  EXPECT_EQ(r.latency, absl::Milliseconds(600));
  const HttpRequest& post = http.requests[0];
  EXPECT_EQ(post.url, "http://cache/invalidate");
  EXPECT_EQ(post.body,
            R"({"dataset":"segment_daily","job":"bf-9","partitions":)"
            R"(["2025-03-01","2025-03-02"]})");
  EXPECT_THAT(post.headers,
              ElementsAre(Pair("Content-Type", "application/json")));
  EXPECT_EQ(http.requests.size(), 5u);  // 3 POSTs, 2 probes
  EXPECT_EQ(r.message,
            "consumer amount_cache of segment_daily serves the new numbers "
            "(2 partitions probed)");
}

TEST_F(ConfirmerTest, TheExpandedHeaderGoesWithThePostAndEveryProbe) {
  setenv("BF_TEST_CONFIRM_TOKEN", "tok-5ecret", 1);
  consumer_.headers = {{"Authorization", "Bearer ${BF_TEST_CONFIRM_TOKEN}"},
                       {"X-Tenant", "acme"}};
  consumer_.timeout = absl::Seconds(1);
  engine_.SetQueryValues(
      [](const std::string&, const std::string&,
         const std::string&) -> absl::StatusOr<SqlValue> { return Real(2); });
  // A cache that echoes what it was sent: still the value must never reach
  // the message through our own text.
  FakeHttp http([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    if (r.method == "POST") return Answer(200, "{}");
    return Answer(200, R"({"amount": 1})");
  });
  ConsumerResult r = Run(&http, {"2025-03-01", "2025-03-02"});
  EXPECT_FALSE(r.healthy);
  ASSERT_GE(http.requests.size(), 3u);
  EXPECT_EQ(http.requests[0].method, "POST");
  EXPECT_THAT(http.requests[0].headers,
              ElementsAre(Pair("Authorization", "Bearer tok-5ecret"),
                          Pair("X-Tenant", "acme"),
                          Pair("Content-Type", "application/json")));
  for (size_t i = 1; i < http.requests.size(); ++i) {
    EXPECT_EQ(http.requests[i].method, "GET");
    EXPECT_THAT(http.requests[i].headers,
                ElementsAre(Pair("Authorization", "Bearer tok-5ecret"),
                            Pair("X-Tenant", "acme")));
  }
  EXPECT_THAT(r.message, ::testing::Not(HasSubstr("tok-5ecret")));

  // A token that ends in a newline (read from a file) would split the
  // request: nothing is sent, the header is named, the value is not.
  setenv("BF_TEST_CONFIRM_TOKEN", "tok-5ecret\nX-Injected: 1\n", 1);
  http.requests.clear();
  r = Run(&http, {"2025-03-01"});
  EXPECT_FALSE(r.healthy);
  EXPECT_TRUE(http.requests.empty());
  EXPECT_THAT(r.message, HasSubstr("consumer amount_cache of segment_daily: "
                                   "header Authorization: "));
  EXPECT_THAT(r.message, HasSubstr("line break"));
  EXPECT_THAT(r.message, ::testing::Not(HasSubstr("tok-5ecret")));
  EXPECT_THAT(r.message, ::testing::Not(HasSubstr("Injected")));
  unsetenv("BF_TEST_CONFIRM_TOKEN");
}

TEST_F(ConfirmerTest, AWarehouseThatCannotBeReadIsNotTheConsumersFault) {
  // The expect query no longer compiles (a schema change): the consumer is
  // still invalidated, and the message blames the warehouse read.
  engine_.SetQueryValues([](const std::string&, const std::string&,
                            const std::string&) -> absl::StatusOr<SqlValue> {
    return absl::FailedPreconditionError("no such column: amount");
  });
  FakeHttp http([&](const HttpRequest&) -> absl::StatusOr<HttpResponse> {
    return Answer(200, "{}");
  });
  dataset_.consumers = {consumer_};
  RecordingObserver observer;
  JobLayout layout;
  layout.job_id = "bf-9";
  layout.items.push_back({&dataset_, {"2025-03-01"}});
  ConfirmContext context;
  context.engine = &engine_;
  context.http = &http;
  context.clock = &clock_;
  context.observer = &observer;
  absl::StatusOr<ConfirmOutcome> out = ConfirmDownstream(layout, context);
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->healthy);
  ASSERT_EQ(http.requests.size(), 1u);  // the invalidation, no probe
  EXPECT_EQ(http.requests[0].method, "POST");
  EXPECT_EQ(out->message,
            "published, but downstream could not be confirmed: consumer "
            "amount_cache of segment_daily: could not read the warehouse's "
            "value for partition 2025-03-01 (the expect query failed: no "
            "such column: amount); the consumer was invalidated, but whether "
            "it serves the new numbers is unknown");
  EXPECT_TRUE(observer.seen.empty());  // its health gauge is not touched
}

TEST_F(ConfirmerTest, ABusyWarehouseIsReadAgainUntilTheDeadline) {
  int reads = 0;
  engine_.SetQueryValues([&](const std::string&, const std::string&,
                             const std::string&) -> absl::StatusOr<SqlValue> {
    if (++reads <= 2) return absl::UnavailableError("database is locked");
    return Real(3);
  });
  FakeHttp http([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    if (r.method == "POST") return Answer(200, "{}");
    return Answer(200, R"({"amount": 3})");
  });
  const absl::Time start = clock_.Now();
  ConsumerResult r = Run(&http, {"2025-03-01"});
  EXPECT_TRUE(r.healthy) << r.message;
  EXPECT_EQ(reads, 3);
  EXPECT_EQ(clock_.Now() - start, absl::Milliseconds(200 + 400));

  // Locked for good: read until the time is up, then say so.
  consumer_.timeout = absl::Seconds(3);
  reads = 0;
  engine_.SetQueryValues([&](const std::string&, const std::string&,
                             const std::string&) -> absl::StatusOr<SqlValue> {
    ++reads;
    return absl::UnavailableError("database is locked");
  });
  r = Run(&http, {"2025-03-01"});
  EXPECT_FALSE(r.healthy);
  EXPECT_TRUE(r.warehouse_error);
  // 0, 0.2, 0.6, 1.4 s; a fifth read would have to wait past 3 s.
  EXPECT_EQ(reads, 4);
  EXPECT_THAT(r.message, HasSubstr("could not read the warehouse's value for "
                                   "partition 2025-03-01 (the expect query "
                                   "failed 4 times: database is locked)"));
}

TEST_F(ConfirmerTest, AnHttpInvalidationIsSentInBatches) {
  std::vector<std::string> hours;
  for (int i = 0; i < 2500; ++i) hours.push_back(absl::StrCat("h", 10000 + i));
  consumer_.sample = 1;
  engine_.SetQueryValues(
      [](const std::string&, const std::string&,
         const std::string&) -> absl::StatusOr<SqlValue> { return Real(1); });
  FakeHttp http([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    if (r.method == "POST") return Answer(200, "{}");
    return Answer(200, R"({"amount": 1})");
  });
  ConsumerResult r = Run(&http, hours);
  EXPECT_TRUE(r.healthy) << r.message;
  ASSERT_EQ(http.requests.size(), 3u + 1u);  // 1000 + 1000 + 500, one probe
  std::string last =
      R"({"dataset":"segment_daily","job":"bf-9","partitions":[)";
  for (int i = 2000; i < 2500; ++i) {
    absl::StrAppend(&last, i == 2000 ? "" : ",", "\"h", 10000 + i, "\"");
  }
  absl::StrAppend(&last, "]}");
  EXPECT_EQ(http.requests[2].method, "POST");
  EXPECT_EQ(http.requests[2].body, last);
  EXPECT_THAT(http.requests[0].body, HasSubstr(R"("h10000","h10001",)"));
  EXPECT_THAT(http.requests[0].body, HasSubstr(R"("h10999"]})"));
  EXPECT_THAT(http.requests[1].body, HasSubstr(R"(:["h11000",)"));
  EXPECT_EQ(http.requests[3].method, "GET");
}

TEST_F(ConfirmerTest, A4xxInvalidationIsNotRetried) {
  FakeHttp http([&](const HttpRequest&) -> absl::StatusOr<HttpResponse> {
    return Answer(404, "no such route");
  });
  ConsumerResult r = Run(&http, {"2025-03-01"});
  EXPECT_FALSE(r.healthy);
  EXPECT_EQ(http.requests.size(), 1u);
  EXPECT_EQ(r.message,
            "consumer amount_cache of segment_daily: invalidation refused: "
            "POST http://cache/invalidate answered HTTP 404: 'no such "
            "route'");
}

TEST_F(ConfirmerTest, AStaleCacheEndsUnhealthyAtTheTimeoutSayingWhat) {
  WarehouseHas(13.75);
  FakeHttp http([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    if (r.method == "POST") return Answer(200, "{}");
    return Answer(200, R"({"amount": 12.5})");
  });
  const absl::Time start = clock_.Now();
  ConsumerResult r = Run(&http, {"2025-03-01"});
  EXPECT_FALSE(r.healthy);
  // It polled with backoff (0.25, 0.5, 1, 2, 4, 5, 5, 5, 5 s: 27.75 s),
  // then waited for the last round up to 1 s before the deadline (1.25 s),
  // leaving that round time for its requests.
  EXPECT_EQ(clock_.Now() - start, absl::Seconds(29));
  EXPECT_EQ(http.requests.size(), 1u + 11u);
  EXPECT_EQ(r.message,
            "consumer amount_cache of segment_daily still serves 12.5 for "
            "partition 2025-03-01 where the warehouse has 13.75 after 29s "
            "(timeout 30s; 11 probe rounds)");
}

TEST_F(ConfirmerTest, TheTimeoutBoundsARoundOfHangingProbes) {
  // 30 partitions, a probe that hangs until its request timeout, a 2 s
  // timeout: the first probe gets the 2 s left, and then the time is up.
  consumer_.timeout = absl::Seconds(2);
  WarehouseHas(10.5);
  const std::vector<std::string> days = AprilDays();
  FakeHttp http([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    if (r.method == "POST") return Answer(200, "{}");
    clock_.Advance(r.timeout);
    return absl::DeadlineExceededError("GET timed out");
  });
  const absl::Time start = clock_.Now();
  ConsumerResult r = Run(&http, days);
  EXPECT_FALSE(r.healthy);
  EXPECT_EQ(clock_.Now() - start, absl::Seconds(2));
  ASSERT_EQ(http.requests.size(), 2u);  // the POST and one probe
  EXPECT_EQ(http.requests[1].timeout, absl::Seconds(2));
  EXPECT_EQ(r.message,
            "consumer amount_cache of segment_daily: the probe failed for "
            "partition 2025-04-01 (the warehouse has 10.5) after 2s (timeout "
            "2s; 1 probe round; 29 of 30 partitions not probed before the "
            "timeout): GET timed out");
}

TEST_F(ConfirmerTest, SlowProbesGetTheTimeLeftAndTheFirstOfEachAtLeast1s) {
  consumer_.timeout = absl::Seconds(2);
  WarehouseHas(10.5);
  const std::vector<std::string> days = AprilDays();
  // Each probe takes 700 ms and serves the old number.
  FakeHttp http([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    if (r.method == "POST") return Answer(200, "{}");
    clock_.Advance(absl::Milliseconds(700));
    return Answer(200, R"({"amount": 9})");
  });
  const absl::Time start = clock_.Now();
  ConsumerResult r = Run(&http, days);
  EXPECT_FALSE(r.healthy);
  // Probes at 0, 0.7 and 1.4 s; at 2.1 s the time is up.
  EXPECT_EQ(clock_.Now() - start, absl::Milliseconds(2100));
  ASSERT_EQ(http.requests.size(), 4u);
  EXPECT_EQ(http.requests[1].timeout, absl::Seconds(2));
  EXPECT_EQ(http.requests[2].timeout, absl::Milliseconds(1300));
  EXPECT_EQ(http.requests[3].timeout, absl::Seconds(1));  // 0.6 s left
  EXPECT_EQ(r.message,
            "consumer amount_cache of segment_daily still serves 9 for "
            "partition 2025-04-01 where the warehouse has 10.5 after 2.1s "
            "(timeout 2s; 1 probe round; 3 of 30 probed partitions differ; 27 "
            "of 30 partitions not probed before the timeout)");
}

TEST_F(ConfirmerTest, AStopInTheMiddleOfARoundEndsAfterOneRequest) {
  engine_.SetQueryValues(
      [](const std::string&, const std::string&,
         const std::string&) -> absl::StatusOr<SqlValue> { return Real(1); });
  bool stopping = false;
  FakeHttp http([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    if (r.method == "POST") return Answer(200, "{}");
    stopping = true;  // SIGTERM arrives during the first probe
    return Answer(200, R"({"amount": 0})");
  });
  dataset_.consumers = {consumer_};
  JobLayout layout;
  layout.job_id = "bf-9";
  layout.items.push_back(
      {&dataset_, {"2025-03-01", "2025-03-02", "2025-03-03", "2025-03-04"}});
  ConfirmContext context;
  context.engine = &engine_;
  context.http = &http;
  context.clock = &clock_;
  context.stopping = [&] { return stopping; };
  const absl::Time start = clock_.Now();
  absl::StatusOr<ConfirmOutcome> out = ConfirmDownstream(layout, context);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(http.requests.size(), 2u);  // the POST and one probe
  EXPECT_EQ(clock_.Now(), start);       // no wait either
}

TEST_F(ConfirmerTest, AStopBetweenInvalidationBatchesEndsThem) {
  consumer_.kind = ConsumerKind::kCommand;
  consumer_.invalidate_command = {"/opt/flush"};
  consumer_.probe_command = {"/opt/read"};
  std::vector<std::string> hours;
  for (size_t i = 0; i < 3 * kInvalidateBatch; ++i) {
    hours.push_back(absl::StrCat("p", 10000 + i));
  }
  bool stopping = false;
  FakeCommands commands(
      [&](const CommandRequest&) -> absl::StatusOr<CommandResult> {
        stopping = true;
        CommandResult out;
        out.exit_code = 0;
        return out;
      });
  ConsumerConfirmer confirmer(&engine_, nullptr, &commands, &clock_,
                              [&] { return stopping; });
  ConsumerResult r = confirmer.Confirm(dataset_, consumer_, "bf-9", hours);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(commands.runs.size(), 1u);  // one batch of three
}

TEST_F(ConfirmerTest, ACacheThatCatchesUpInTimeIsHealthy) {
  engine_.SetQueryValues(
      [](const std::string&, const std::string&,
         const std::string&) -> absl::StatusOr<SqlValue> { return Real(7); });
  int probes = 0;
  FakeHttp http([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    if (r.method == "POST") return Answer(200, "{}");
    return Answer(200, ++probes < 3 ? R"({"amount": 6})" : R"({"amount": 7})");
  });
  ConsumerResult r = Run(&http, {"2025-03-01"});
  EXPECT_TRUE(r.healthy) << r.message;
  EXPECT_EQ(probes, 3);
  EXPECT_EQ(r.latency, absl::Milliseconds(250 + 500));
}

TEST_F(ConfirmerTest, SampleProbesEvenlySpacedPartitionsIncludingBothEnds) {
  std::vector<std::string> all;
  for (int d = 1; d <= 10; ++d) {
    all.push_back(absl::StrCat("2025-03-", d < 10 ? "0" : "", d));
  }
  EXPECT_THAT(ConsumerConfirmer::ProbedPartitions(all, 3),
              ElementsAre("2025-03-01", "2025-03-05", "2025-03-10"));
  EXPECT_THAT(ConsumerConfirmer::ProbedPartitions(all, 1),
              ElementsAre("2025-03-10"));
  EXPECT_EQ(ConsumerConfirmer::ProbedPartitions(all, 0).size(), 10u);
  EXPECT_EQ(ConsumerConfirmer::ProbedPartitions(all, 50).size(), 10u);
  // The order given does not matter.
  std::vector<std::string> reversed(all.rbegin(), all.rend());
  EXPECT_EQ(ConsumerConfirmer::ProbedPartitions(reversed, 3),
            ConsumerConfirmer::ProbedPartitions(all, 3));

  consumer_.sample = 2;
  engine_.SetQueryValues(
      [](const std::string&, const std::string&,
         const std::string&) -> absl::StatusOr<SqlValue> { return Real(1); });
  FakeHttp http([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    return Answer(200, R"({"amount": 1})");
  });
  ConsumerResult r = Run(&http, all);
  EXPECT_TRUE(r.healthy);
  ASSERT_EQ(http.requests.size(), 3u);
  EXPECT_EQ(http.requests[1].url, "http://cache/value?day=2025-03-01");
  EXPECT_EQ(http.requests[2].url, "http://cache/value?day=2025-03-10");
  EXPECT_EQ(r.message,
            "consumer amount_cache of segment_daily serves the new numbers "
            "(2 of 10 partitions probed, sampled)");
}

JsonValue Json(const std::string& text) { return *ParseJson(text); }

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

TEST_F(ConfirmerTest, InvalidJsonAndAMissingFieldAreReported) {
  engine_.SetQueryValues(
      [](const std::string&, const std::string&,
         const std::string&) -> absl::StatusOr<SqlValue> { return Real(1); });
  consumer_.timeout = absl::Seconds(1);
  FakeHttp bad([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    if (r.method == "POST") return Answer(200, "");
    return Answer(200, "<html>oops</html>");
  });
  ConsumerResult r = Run(&bad, {"2025-03-01"});
  EXPECT_FALSE(r.healthy);
  EXPECT_EQ(r.message,
            "consumer amount_cache of segment_daily: the probe failed for "
            "partition 2025-03-01 (the warehouse has 1) after 625ms (timeout "
            "1s; 3 probe rounds): an answer that is not JSON (not valid JSON "
            "at byte 0: a value was expected): '<html>oops</html>'");
  FakeHttp missing([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    return Answer(200, R"({"amt": 1})");
  });
  r = Run(&missing, {"2025-03-01"});
  EXPECT_FALSE(r.healthy);
  EXPECT_THAT(r.message,
              HasSubstr("still serves an answer without the field 'amount' "
                        "for partition 2025-03-01"));
}

TEST_F(ConfirmerTest, TheMessageIsBounded) {
  engine_.SetQueryValues([](const std::string&, const std::string&,
                            const std::string&) -> absl::StatusOr<SqlValue> {
    return Text(std::string(5000, 'x'));
  });
  consumer_.timeout = absl::Seconds(1);
  FakeHttp http([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    return Answer(
        200, absl::StrCat(R"({"amount": ")", std::string(5000, 'y'), R"("})"));
  });
  ConsumerResult r = Run(&http, {"2025-03-01"});
  EXPECT_FALSE(r.healthy);
  EXPECT_LE(r.message.size(), kMaxConsumerMessage + 3);
  EXPECT_THAT(r.message, HasSubstr("still serves 'yyyy"));
}

TEST_F(ConfirmerTest, CommandConsumersRunArgvAndReadStdout) {
  consumer_.kind = ConsumerKind::kCommand;
  consumer_.invalidate_command = {"/opt/flush", "--now"};
  consumer_.probe_command = {"/opt/read"};
  engine_.SetQueryValues(
      [](const std::string&, const std::string&,
         const std::string& p) -> absl::StatusOr<SqlValue> { return Text(p); });
  FakeCommands commands(
      [&](const CommandRequest& r) -> absl::StatusOr<CommandResult> {
        CommandResult out;
        out.exit_code = 0;
        if (r.argv[0] == "/opt/read") {
          out.output = absl::StrCat(R"({"amount": ")", r.argv[1], R"("})");
        }
        return out;
      });
  ConsumerResult r = Run(nullptr, {"2025-03-02", "2025-03-01"}, &commands);
  EXPECT_TRUE(r.healthy) << r.message;
  EXPECT_THAT(commands.runs,
              ElementsAre(ElementsAre("/opt/flush", "--now", "segment_daily",
                                      "bf-9", "2025-03-02", "2025-03-01"),
                          ElementsAre("/opt/read", "2025-03-01"),
                          ElementsAre("/opt/read", "2025-03-02")));
}

TEST_F(ConfirmerTest, AFailingProbeCommandSaysHowItExited) {
  consumer_.kind = ConsumerKind::kCommand;
  consumer_.invalidate_command = {"/opt/flush"};
  consumer_.probe_command = {"/opt/read"};
  consumer_.timeout = absl::Seconds(1);
  FakeCommands commands(
      [&](const CommandRequest& r) -> absl::StatusOr<CommandResult> {
        CommandResult out;
        out.exit_code = r.argv[0] == "/opt/read" ? 3 : 0;
        out.error_output = "cannot connect\n";
        return out;
      });
  ConsumerResult r = Run(nullptr, {"2025-03-01"}, &commands);
  EXPECT_FALSE(r.healthy);
  EXPECT_THAT(r.message,
              HasSubstr("consumer amount_cache of segment_daily: the probe "
                        "failed for partition 2025-03-01 (the warehouse has "
                        "NULL (the expect query returned no row)) after "));
  EXPECT_THAT(r.message, HasSubstr("): the command exited with status 3 "
                                   "('cannot connect')"));
}

TEST_F(ConfirmerTest, TheStepConfirmsEveryConsumerAndReportsEach) {
  ConsumerSpec second = consumer_;
  second.name = "stale_cache";
  second.probe_url = "http://stale/value?day={partition}";
  second.timeout = absl::Seconds(2);
  dataset_.consumers = {consumer_, second};
  engine_.SetQueryValues(
      [](const std::string&, const std::string&,
         const std::string&) -> absl::StatusOr<SqlValue> { return Real(5); });
  FakeHttp http([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    if (r.url.find("stale") != std::string::npos) {
      return Answer(200, R"({"amount": 4})");
    }
    return Answer(200, R"({"amount": 5})");
  });
  RecordingObserver observer;
  JobLayout layout;
  layout.job_id = "bf-9";
  layout.items.push_back({&dataset_, {"2025-03-01"}});
  ConfirmContext context;
  context.engine = &engine_;
  context.http = &http;
  context.clock = &clock_;
  context.observer = &observer;
  absl::StatusOr<ConfirmOutcome> out = ConfirmDownstream(layout, context);
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->healthy);
  EXPECT_THAT(observer.seen, ElementsAre("segment_daily/amount_cache=1",
                                         "segment_daily/stale_cache=0"));
  EXPECT_THAT(out->message,
              HasSubstr("published, but downstream is unhealthy: consumer "
                        "stale_cache of segment_daily still serves 4 for "
                        "partition 2025-03-01 where the warehouse has 5"));

  // Nothing republished (all cut off): nothing to confirm.
  layout.items.clear();
  out = ConfirmDownstream(layout, context);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->healthy);
  EXPECT_TRUE(out->results.empty());

  // Stopping: CANCELLED, so that recovery confirms again.
  layout.items.push_back({&dataset_, {"2025-03-01"}});
  context.stopping = [] { return true; };
  out = ConfirmDownstream(layout, context);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled);
}

TEST_F(ConfirmerTest, EveryConsumerIsInvalidatedBeforeAnyIsProbed) {
  // Two datasets, three consumers: a stale one declared first (10 s), a
  // fresh one, and a stale one on the second dataset (10 s).
  ConsumerSpec stale = consumer_;
  stale.name = "stale_a";
  stale.invalidate_url = "http://a/invalidate";
  stale.probe_url = "http://a/value?day={partition}";
  stale.timeout = absl::Seconds(10);
  ConsumerSpec fresh = consumer_;
  fresh.name = "fresh_b";
  fresh.invalidate_url = "http://b/invalidate";
  fresh.probe_url = "http://b/value?day={partition}";
  dataset_.consumers = {stale, fresh};
  DatasetSpec other = dataset_;
  other.name = "segment_monthly";
  ConsumerSpec stale_c = stale;
  stale_c.name = "stale_c";
  stale_c.invalidate_url = "http://c/invalidate";
  stale_c.probe_url = "http://c/value?day={partition}";
  other.consumers = {stale_c};
  engine_.SetQueryValues(
      [](const std::string&, const std::string&,
         const std::string&) -> absl::StatusOr<SqlValue> { return Real(5); });
  int first_post_retry = 0;
  FakeHttp http([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    if (r.method == "POST") {
      // a's first invalidation fails once: b and c are not kept waiting.
      if (r.url == "http://a/invalidate" && first_post_retry++ == 0) {
        return Answer(503, "busy");
      }
      return Answer(200, "{}");
    }
    if (r.url.rfind("http://b/", 0) == 0)
      return Answer(200, R"({"amount": 5})");
    return Answer(200, R"({"amount": 4})");
  });
  RecordingObserver observer;
  JobLayout layout;
  layout.job_id = "bf-9";
  layout.items.push_back({&dataset_, {"2025-03-01"}});
  layout.items.push_back({&other, {"2025-03-01"}});
  ConfirmContext context;
  context.engine = &engine_;
  context.http = &http;
  context.clock = &clock_;
  context.observer = &observer;
  const absl::Time start = clock_.Now();
  absl::StatusOr<ConfirmOutcome> out = ConfirmDownstream(layout, context);
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->healthy);
  // The first four requests: a (refused 503), b, c, then a again after its
  // 200 ms backoff; only then probes.
  ASSERT_GE(http.requests.size(), 5u);
  EXPECT_EQ(http.requests[0].url, "http://a/invalidate");
  EXPECT_EQ(http.requests[1].url, "http://b/invalidate");
  EXPECT_EQ(http.requests[2].url, "http://c/invalidate");
  for (size_t i = 3; i < http.requests.size(); ++i) {
    if (http.requests[i].url == "http://a/invalidate") {
      EXPECT_EQ(http.requests[i].method, "POST");
      break;
    }
    EXPECT_EQ(http.requests[i].method, "GET") << i;
  }
  EXPECT_EQ(first_post_retry, 2);
  // Side by side: the two stale consumers took about one timeout (each
  // ends up to 1 s before its own), not two.
  EXPECT_GE(clock_.Now() - start, absl::Seconds(9));
  EXPECT_LE(clock_.Now() - start, absl::Seconds(10));
  // Reported as each was decided: b first.
  EXPECT_THAT(observer.seen,
              ElementsAre("segment_daily/fresh_b=1", "segment_daily/stale_a=0",
                          "segment_monthly/stale_c=0"));
  // Results in declaration order.
  ASSERT_EQ(out->results.size(), 3u);
  EXPECT_EQ(out->results[0].consumer, "stale_a");
  EXPECT_EQ(out->results[1].consumer, "fresh_b");
  EXPECT_EQ(out->results[2].consumer, "stale_c");
  EXPECT_THAT(out->message, HasSubstr("consumer stale_a of segment_daily "
                                      "still serves 4 for partition "
                                      "2025-03-01 where the warehouse has 5"));
  EXPECT_THAT(out->message, HasSubstr("(1 other consumer is unhealthy too"));
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

  // A SUCCEEDED job may be confirmed again too.
  ASSERT_TRUE(manager_->Confirm(id).ok());
  EXPECT_EQ(WaitEnded(id).state, JobState::kSucceeded);
  EXPECT_EQ(cache_.posts().size(), 3u);

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
