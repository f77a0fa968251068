// End-to-end tests of downstream consumers with the real daemon: a cache
// in front of a dataset (an in-process HTTP server) that honours the
// invalidation lets the job end SUCCEEDED; one that ignores it ends the job
// DOWNSTREAM_UNHEALTHY saying which partition it serves wrong, and
// `backfillctl confirm` after the cache is fixed ends it SUCCEEDED. A
// `kind: command` consumer runs scripts the test wrote, as argv. Expected
// values come from plain SQL over the raw table.

#include <sys/stat.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"
#include "tests/testing/http_test_server.h"
#include "tests/testing/prometheus_text.h"

namespace backfill {
namespace e2e_consumers_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using std::chrono::seconds;
using ::testing::HasSubstr;

std::string PipelineWith(const std::string& consumers) {
  return absl::StrCat(R"yaml(warehouse: {engine: sqlite, path: warehouse.db}
datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: order_date, grain: day}
  - name: segment_daily
    kind: derived
    table: segment_daily
    partition: {column: day, grain: day}
    upstream:
      - {dataset: orders, mapping: identity}
    transform: |
      SELECT order_date AS day, ROUND(TOTAL(amount), 2) AS amount
      FROM raw_orders WHERE order_date = :partition GROUP BY order_date
    contract:
      columns: {day: TEXT, amount: REAL}
      primary_key: [day]
    consumers:
)yaml",
                      consumers);
}

// `text` (a number as the test's SQLite helper prints it, with 17
// significant digits: 407.54000000000002) as the shortest decimal that
// reads back as the same double (407.54): how a person writes it, and how a
// message must show it.
std::string Shortest(const std::string& text) {
  double v = 0;
  EXPECT_TRUE(absl::SimpleAtod(text, &v)) << text;
  for (int digits = 1; digits <= 17; ++digits) {
    std::string s = absl::StrFormat("%.*g", digits, v);
    double back = 0;
    if (absl::SimpleAtod(s, &back) && back == v) return s;
  }
  return text;
}

class ConsumersTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    Sqlite db(warehouse_);
    ASSERT_TRUE(db.error().empty()) << db.error();
    std::string sql =
        "BEGIN; CREATE TABLE raw_orders (order_id INTEGER PRIMARY KEY, "
        "order_date TEXT NOT NULL, amount REAL NOT NULL);";
    // Amounts with cents whose sums are not whole (407.54 on the first
    // day): a message must show them as the warehouse has them.
    for (int day = 1; day <= 3; ++day) {
      for (int i = 0; i < 4; ++i) {
        absl::StrAppend(&sql,
                        "INSERT INTO raw_orders (order_date, amount) VALUES "
                        "('",
                        absl::StrFormat("2025-01-%02d", day), "', ",
                        absl::StrFormat("%d.%02d", day * 100 + i, 13 + 17 * i),
                        ");");
      }
    }
    absl::StrAppend(&sql, "COMMIT;");
    ASSERT_TRUE(db.Exec(sql)) << db.errmsg();
  }

  // What the fixed logic gives for `day`, from the raw rows.
  std::string Expected(const std::string& day) {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto rows = db.Query(absl::StrCat(
        "SELECT ROUND(TOTAL(amount), 2) FROM raw_orders WHERE order_date = '",
        day, "'"));
    EXPECT_TRUE(rows.has_value() && rows->size() == 1) << db.errmsg();
    return rows && rows->size() == 1 ? (*rows)[0][0] : "";
  }
};

// A cache of segment_daily.amount per day: filled from the warehouse on a
// miss, emptied by an invalidation unless it ignores them.
class Cache {
 public:
  explicit Cache(std::string warehouse) : warehouse_(std::move(warehouse)) {
    server_.SetHandler([this](const testing::HttpTestServer::Request& r) {
      return Answer(r);
    });
  }
  std::string Url(const std::string& path) const { return server_.Url(path); }
  void set_ignore_invalidation(bool ignore) {
    absl::MutexLock lock(&mu_);
    ignore_ = ignore;
  }
  // This cache as the `consumers:` item amount_cache of segment_daily.
  std::string ConsumerYaml(const std::string& timeout) const {
    return absl::StrCat(
        "      - name: amount_cache\n"
        "        kind: http\n"
        "        invalidate: {url: \"",
        Url("/invalidate"),
        "\"}\n"
        "        probe: {url: \"",
        Url("/value?day={partition}"),
        "\", field: amount}\n"
        "        expect: \"SELECT amount FROM segment_daily WHERE day = "
        ":partition\"\n"
        "        timeout: ",
        timeout, "\n");
  }
  std::vector<testing::HttpTestServer::Request> requests() const {
    return server_.requests();
  }
  std::vector<testing::HttpTestServer::Request> posts() const {
    std::vector<testing::HttpTestServer::Request> out;
    for (const auto& r : server_.requests()) {
      if (r.method == "POST") out.push_back(r);
    }
    return out;
  }

 private:
  testing::HttpTestServer::Response Answer(
      const testing::HttpTestServer::Request& r) {
    testing::HttpTestServer::Response out;
    absl::MutexLock lock(&mu_);
    if (r.method == "POST") {
      if (!ignore_) cached_.clear();
      out.body = "{}";
      return out;
    }
    const std::string prefix = "/value?day=";
    if (r.target.rfind(prefix, 0) != 0) {
      out.status = 404;
      return out;
    }
    const std::string day = r.target.substr(prefix.size());
    auto it = cached_.find(day);
    if (it == cached_.end()) {
      Sqlite db(warehouse_, /*read_only=*/true);
      auto rows = db.Query(absl::StrCat(
          "SELECT amount FROM segment_daily WHERE day = '", day, "'"));
      if (!rows || rows->size() != 1) {
        out.status = 404;
        out.body = R"({"error": "no such day"})";
        return out;
      }
      it = cached_.emplace(day, (*rows)[0][0]).first;
    }
    out.body =
        absl::StrCat(R"({"day": ")", day, R"(", "amount": )", it->second, "}");
    return out;
  }

  const std::string warehouse_;
  testing::HttpTestServer server_;
  absl::Mutex mu_;
  bool ignore_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::string> cached_ ABSL_GUARDED_BY(mu_);
};

TEST_F(ConsumersTest, ACacheIsInvalidatedAndConfirmedOrReportedStale) {
  Cache cache(warehouse_);
  ASSERT_NO_FATAL_FAILURE(WriteFile(pipelines_dir_ + "/e2e.yaml",
                                    PipelineWith(cache.ConsumerYaml("3s"))));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());

  RunResult r = daemon.CtlJson({"datasets"});
  EXPECT_THAT(r.out, HasSubstr("\"name\": \"amount_cache\""));

  // 1. The initial load: the cache is invalidated and serves the numbers.
  const std::string first = SubmitSucceeded(
      daemon, {"segment_daily", "--from", "2025-01-01", "--to", "2025-01-04"},
      "initial load");
  ASSERT_FALSE(first.empty());
  std::vector<testing::HttpTestServer::Request> posts = cache.posts();
  ASSERT_EQ(posts.size(), 1u);
  EXPECT_EQ(posts[0].target, "/invalidate");
  EXPECT_EQ(posts[0].headers["content-type"], "application/json");
  EXPECT_EQ(posts[0].body,
            absl::StrCat(R"({"dataset":"segment_daily","job":")", first,
                         R"(","partitions":["2025-01-01","2025-01-02",)"
                         R"("2025-01-03"]})"));
  r = daemon.CtlJson({"status", first});
  EXPECT_THAT(r.out, HasSubstr("consumer amount_cache of segment_daily serves "
                               "the new numbers (3 partitions probed)"));

  // 2. The raw data is fixed; the cache now ignores invalidations.
  const std::string before = Expected("2025-01-02");  // what it caches
  Sqlite db(warehouse_);
  ASSERT_TRUE(
      db.Exec("UPDATE raw_orders SET amount = amount + 1000 WHERE "
              "order_date = '2025-01-02'"))
      << db.errmsg();
  const std::string want = Shortest(Expected("2025-01-02"));
  ASSERT_NE(want, before);
  // Not a whole number: StrCat(double)'s six digits would lose its cents.
  ASSERT_NE(want.find('.'), std::string::npos) << want;
  cache.set_ignore_invalidation(true);
  r = daemon.CtlJson({"submit", "segment_daily", "--partitions", "2025-01-02",
                      "--reason", "amounts fixed", "--wait"},
                     seconds(120));
  EXPECT_NE(r.exit_code, 0) << r;
  EXPECT_EQ(JsonString(r.out, "state"), "BACKFILL_STATE_DOWNSTREAM_UNHEALTHY")
      << r;
  const std::string second = JsonString(r.out, "id");
  EXPECT_THAT(JsonString(r.out, "message"),
              HasSubstr(absl::StrCat(
                  "published, but downstream is unhealthy: consumer "
                  "amount_cache of segment_daily still serves ",
                  before, " for partition 2025-01-02 where the warehouse has ",
                  want, " after ")))
      << r;
  EXPECT_THAT(JsonString(r.out, "message"), HasSubstr("(timeout 3s; ")) << r;

  // 3. A job that is not published cannot be confirmed; an unknown one is
  // not found.
  r = daemon.Ctl({"confirm", "bf-999"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND"));

  // 4. The cache is fixed: confirming again ends SUCCEEDED.
  cache.set_ignore_invalidation(false);
  r = daemon.CtlJson({"confirm", second}, seconds(120));
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(JsonString(r.out, "state"), "BACKFILL_STATE_SUCCEEDED") << r;
  EXPECT_THAT(JsonString(r.out, "message"),
              HasSubstr("serves the new numbers (1 partition probed)"));
  posts = cache.posts();
  ASSERT_GE(posts.size(), 3u);
  EXPECT_EQ(posts.back().body,
            absl::StrCat(R"({"dataset":"segment_daily","job":")", second,
                         R"(","partitions":["2025-01-02"]})"));

  // 5. Rolled back: nothing left to confirm.
  r = daemon.Ctl({"rollback", second, "--reason", "check"});
  ASSERT_EQ(r.exit_code, 0) << r;
  r = daemon.Ctl({"confirm", second});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(r.err, HasSubstr("rolled back"));
}

TEST_F(ConsumersTest, ACommandConsumerRunsItsProgramsWithoutAShell) {
  const std::string dir = root_ + "/consumer";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const std::string invalidate = dir + "/invalidate";
  const std::string probe = dir + "/probe";
  // The invalidation records its arguments; the probe answers what the
  // test stored for the partition it is given.
  WriteFile(invalidate, absl::StrCat("#!/bin/sh\nfor a in \"$@\"; do echo "
                                     "\"$a\"; done > ",
                                     dir, "/invalidated\n"));
  WriteFile(probe, absl::StrCat("#!/bin/sh\ncat ", dir, "/value-\"$2\"\n"));
  ASSERT_EQ(chmod(invalidate.c_str(), 0755), 0);
  ASSERT_EQ(chmod(probe.c_str(), 0755), 0);
  for (const char* day : {"2025-01-01", "2025-01-02"}) {
    WriteFile(absl::StrCat(dir, "/value-", day),
              absl::StrCat("{\"amount\": ", Expected(day), "}\n"));
  }
  ASSERT_NO_FATAL_FAILURE(WriteFile(
      pipelines_dir_ + "/e2e.yaml",
      PipelineWith(absl::StrCat("      - name: report\n"
                                "        kind: command\n"
                                "        invalidate: {command: [\"",
                                invalidate,
                                "\", \"--flush\"]}\n"
                                "        probe: {command: [\"",
                                probe,
                                "\", \"--day\", \"{partition}\"], field: "
                                "amount}\n"
                                "        expect: \"SELECT amount FROM "
                                "segment_daily WHERE day = :partition\"\n"
                                "        timeout: 5s\n"))));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  const std::string job = SubmitSucceeded(
      daemon, {"segment_daily", "--from", "2025-01-01", "--to", "2025-01-03"},
      "initial load");
  ASSERT_FALSE(job.empty());
  EXPECT_EQ(ReadFile(dir + "/invalidated"),
            absl::StrCat("--flush\nsegment_daily\n", job,
                         "\n2025-01-01\n2025-01-02\n"));

  // A probe that serves something else leaves the job unhealthy.
  WriteFile(dir + "/value-2025-01-01", "{\"amount\": \"stale\"}\n");
  RunResult r = daemon.CtlJson({"confirm", job}, seconds(120));
  EXPECT_NE(r.exit_code, 0) << r;
  EXPECT_EQ(JsonString(r.out, "state"), "BACKFILL_STATE_DOWNSTREAM_UNHEALTHY");
  const std::string want = Shortest(Expected("2025-01-01"));
  ASSERT_NE(want.find('.'), std::string::npos) << want;
  EXPECT_THAT(JsonString(r.out, "message"),
              HasSubstr(absl::StrCat("consumer report of segment_daily still "
                                     "serves 'stale' for partition "
                                     "2025-01-01 where the warehouse has ",
                                     want)));
}

// backfill_downstream_healthy comes from state.db: a consumer a
// DOWNSTREAM_UNHEALTHY job found stale stays 0 after a restart, `status`
// lists what the confirmation found, and a rollback of that job clears it.
TEST_F(ConsumersTest, AnUnhealthyConsumerStaysUnhealthyAcrossARestart) {
  Cache cache(warehouse_);
  ASSERT_NO_FATAL_FAILURE(WriteFile(pipelines_dir_ + "/e2e.yaml",
                                    PipelineWith(cache.ConsumerYaml("2s"))));
  const std::map<std::string, std::string> labels = {
      {"dataset", "segment_daily"}, {"consumer", "amount_cache"}};
  std::string job;
  {
    Daemon& daemon = NewDaemon();
    ASSERT_TRUE(daemon.Start());
    ASSERT_FALSE(SubmitSucceeded(daemon,
                                 {"segment_daily", "--from", "2025-01-01",
                                  "--to", "2025-01-03"},
                                 "initial load")
                     .empty());
    Sqlite db(warehouse_);
    ASSERT_TRUE(
        db.Exec("UPDATE raw_orders SET amount = amount + 7 WHERE "
                "order_date = '2025-01-02'"))
        << db.errmsg();
    cache.set_ignore_invalidation(true);
    RunResult r = daemon.CtlJson({"submit", "segment_daily", "--partitions",
                                  "2025-01-02", "--reason", "fix", "--wait"},
                                 seconds(120));
    ASSERT_EQ(JsonString(r.out, "state"), "BACKFILL_STATE_DOWNSTREAM_UNHEALTHY")
        << r;
    job = JsonString(r.out, "id");
    EXPECT_EQ(testing::SumOf(testing::ParseSamples(
                                 HttpGet(daemon.metrics_port(), "/metrics")),
                             "backfill_downstream_healthy", labels),
              0);
    ExpectCleanSigterm(daemon);
  }
  Daemon& again = NewDaemon();
  ASSERT_TRUE(again.Start());
  EXPECT_EQ(testing::SumOf(testing::ParseSamples(
                               HttpGet(again.metrics_port(), "/metrics")),
                           "backfill_downstream_healthy", labels),
            0);
  RunResult status = again.Ctl({"status", job});
  ASSERT_EQ(status.exit_code, 0) << status;
  EXPECT_THAT(status.out,
              HasSubstr("Consumers 1 consumer: 0 healthy, 1 unhealthy"));
  EXPECT_THAT(status.out, HasSubstr("UNHEALTHY  consumer amount_cache of "
                                    "segment_daily still serves"));
  RunResult rollback = again.Ctl({"rollback", job, "--reason", "undo"});
  ASSERT_EQ(rollback.exit_code, 0) << rollback;
  EXPECT_EQ(testing::SumOf(testing::ParseSamples(
                               HttpGet(again.metrics_port(), "/metrics")),
                           "backfill_downstream_healthy", labels),
            1);
}

}  // namespace
}  // namespace e2e_consumers_test
}  // namespace backfill
