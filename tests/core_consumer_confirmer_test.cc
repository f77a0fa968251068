// The confirmer of downstream consumers against a fake HTTP client, a fake
// command runner (tests/testing/consumer_fakes.h), FakeEngine's expect
// values and a ManualClock (every wait is the clock's): invalidation with
// retries and batches, probes until the deadline, what an unhealthy end
// says, and the confirm step over every consumer.

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
#include "tests/testing/consumer_fakes.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_consumer_confirmer_test {
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

}  // namespace
}  // namespace core_consumer_confirmer_test
}  // namespace backfill
