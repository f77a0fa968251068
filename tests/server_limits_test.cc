// The daemon's limits, each refused with RESOURCE_EXHAUSTED and changing
// nothing: a request larger than --max-message-bytes (counted so in the
// gRPC metrics), one WatchBackfill stream more than
// --max-watch-streams-per-principal (and a slot given back when a stream
// ends), and a submit while --max-queued-jobs jobs are QUEUED (a repeat of
// an existing job is still answered). And the limit on the size of an
// error: refusals that would list many jobs or quote a long value reach a
// client with gRPC's default limits as themselves. A real Daemon (gRPC
// server, manager, SQLite store and warehouse) on a temporary directory.

#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.grpc.pb.h"
#include "client/backfill_client.h"
#include "core/model/pipeline_loader.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "platform/curl_http_client.h"
#include "server/backfill_service_impl.h"
#include "server/daemon.h"
#include "server/grpc_status.h"
#include "tests/testing/prometheus_text.h"
#include "tests/testing/raw_grpc.h"
#include "tests/testing/revenue_pipeline.h"

namespace backfill {
namespace server_limits_test {
namespace {

namespace fs = std::filesystem;
using ::backfill::testing::ParseSamples;
using ::backfill::testing::Refusal;
using ::backfill::testing::SumOf;
using ::backfill::testing::WireError;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSubmit[] = "/backfill.v1.BackfillService/SubmitBackfill";

// Waits (bounded) until `done` holds; false when it never did.
template <typename F>
bool Eventually(F done, absl::Duration timeout = absl::Seconds(60)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return done();
}

// An open WatchBackfill stream that has received its first update (so the
// server admitted it), or the status it was refused with.
struct WatchStream {
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReader<v1::Backfill>> reader;
  bool open = false;
  grpc::Status refused;
};

class DaemonLimitsTest : public ::testing::Test {
 protected:
  // A warehouse with one order a day in February 2025.
  void SetUp() override {
    std::string tmpl =
        (fs::temp_directory_path() / "backfill-daemon-limits-XXXXXX").string();
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
                      "amount, refund) VALUES ('2025-02-",
                      day < 10 ? "0" : "", day, "', 1, 10.0, 0.0);");
    }
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK);
  }

  void TearDown() override {
    for (WatchStream& s : streams_) {
      if (s.context != nullptr) s.context->TryCancel();
    }
    streams_.clear();
    if (daemon_ != nullptr) daemon_->Shutdown();
    daemon_.reset();
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // Starts the daemon with one worker; each partition counts a while first,
  // so that a job is still running when the test pauses it.
  void StartDaemon(DaemonOptions options) {
    const std::string condition =
        "        AND (WITH RECURSIVE spin(n) AS (SELECT 1 UNION ALL\n"
        "             SELECT n + 1 FROM spin WHERE n < 1000000)\n"
        "             SELECT COUNT(*) FROM spin) > 0\n";
    absl::StatusOr<Catalog> catalog = LoadPipelineTexts(
        {{"pipeline.yaml", fixtures::RevenuePipelineYaml(condition)}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    options.data_dir = dir_;
    options.listen = "127.0.0.1:0";
    // No /metrics unless the test asks for it.
    if (options.metrics_listen == DaemonOptions().metrics_listen) {
      options.metrics_listen = "none";
    }
    options.workers = 1;
    absl::StatusOr<std::unique_ptr<Daemon>> daemon =
        Daemon::Start(options, *std::move(catalog));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    target_ = daemon_->listen_address();
    client_ = BackfillClient::Connect(target_);
    stub_ = v1::BackfillService::NewStub(
        grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()));
  }

  static v1::BackfillRequest February(const std::string& reason) {
    v1::BackfillRequest request;
    request.set_dataset("daily_revenue");
    request.set_from_partition("2025-02-01");
    request.set_to_partition("2025-03-01");
    request.set_reason(reason);
    request.set_requested_by("server_limits_test");
    return request;
  }

  // Submits February and pauses it: a job that holds its partitions and
  // never ends by itself. Its id.
  std::string SubmitPaused(const std::string& key) {
    absl::StatusOr<v1::SubmitBackfillResponse> submitted =
        client_->Submit(February("held open"), key);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok()) return "";
    const std::string id = submitted->backfill().id();
    absl::StatusOr<v1::Backfill> paused = client_->Pause(id, "held open");
    EXPECT_TRUE(paused.ok()) << paused.status();
    return id;
  }

  // The daemon's /metrics, read over HTTP.
  std::string Scrape() {
    HttpRequest request;
    request.url =
        absl::StrCat("http://127.0.0.1:", daemon_->metrics_port(), "/metrics");
    absl::StatusOr<HttpResponse> response = http_.Send(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->body : "";
  }

  // How many jobs the daemon has.
  int JobCount() {
    v1::ListBackfillsRequest request;
    request.set_page_size(100);
    absl::StatusOr<v1::ListBackfillsResponse> page = client_->List(request);
    EXPECT_TRUE(page.ok()) << page.status();
    return page.ok() ? page->backfills_size() : -1;
  }

  // Opens a watch of `id`, with `token` as the bearer token ("": none);
  // kept in streams_ when it is admitted.
  WatchStream* Watch(const std::string& id, const std::string& token = "") {
    WatchStream s;
    s.context = std::make_unique<grpc::ClientContext>();
    if (!token.empty()) {
      s.context->AddMetadata("authorization", "Bearer " + token);
    }
    v1::WatchBackfillRequest request;
    request.set_id(id);
    s.reader = stub_->WatchBackfill(s.context.get(), request);
    v1::Backfill first;
    s.open = s.reader->Read(&first);
    if (!s.open) s.refused = s.reader->Finish();
    streams_.push_back(std::move(s));
    return &streams_.back();
  }

  std::string dir_;
  std::unique_ptr<Daemon> daemon_;
  std::string target_;
  std::unique_ptr<BackfillClient> client_;
  std::unique_ptr<v1::BackfillService::Stub> stub_;
  std::vector<WatchStream> streams_;
  CurlHttpClient http_;
};

TEST_F(DaemonLimitsTest, ARequestLargerThanMaxMessageBytesIsRefused) {
  DaemonOptions options;
  options.max_message_bytes = 64 << 10;
  options.metrics_listen = "127.0.0.1:0";
  ASSERT_NO_FATAL_FAILURE(StartDaemon(options));

  v1::SubmitBackfillRequest large;
  *large.mutable_request() = February("large");
  large.set_idempotency_key(std::string(100 << 10, 'k'));
  const std::string bytes = large.SerializeAsString();
  ASSERT_GT(bytes.size(), size_t{64 << 10});
  std::string response;
  grpc::Status status =
      backfill::testing::RawCall(target_, kSubmit, bytes, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << status.error_message();
  // The message gives the request's size and the limit.
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrCat(bytes.size(), " vs. ", 64 << 10)));
  EXPECT_EQ(JobCount(), 0);

  // A request under the limit goes through.
  v1::SubmitBackfillRequest small;
  *small.mutable_request() = February("small");
  status = backfill::testing::RawCall(target_, kSubmit,
                                      small.SerializeAsString(), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(JobCount(), 1);

  // The metrics count each call with the code its client received.
  const auto submits = [&](const std::string& code) {
    return SumOf(ParseSamples(Scrape()), "grpc_server_handled_total",
                 {{"grpc_method", "SubmitBackfill"}, {"grpc_code", code}});
  };
  EXPECT_TRUE(Eventually([&] {
    return submits("RESOURCE_EXHAUSTED") == 1 && submits("OK") == 1;
  })) << Scrape();
  // No series of another code (SumOf: -1).
  EXPECT_EQ(submits("INVALID_ARGUMENT"), -1) << Scrape();
  EXPECT_EQ(submits("CANCELLED"), -1) << Scrape();
}

TEST_F(DaemonLimitsTest, OneWatchStreamMoreThanTheLimitIsRefusedUntilOneEnds) {
  DaemonOptions options;
  options.max_watch_streams_per_principal = 2;
  ASSERT_NO_FATAL_FAILURE(StartDaemon(options));
  const std::string id = SubmitPaused("");
  ASSERT_FALSE(id.empty());

  ASSERT_TRUE(Watch(id)->open);
  ASSERT_TRUE(Watch(id)->open);
  WatchStream* third = Watch(id);
  EXPECT_FALSE(third->open);
  EXPECT_EQ(third->refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(third->refused.error_message(),
              HasSubstr("--max-watch-streams-per-principal is 2"));
  EXPECT_THAT(third->refused.error_message(), HasSubstr("peer 127.0.0.1"));
  // Other calls are not limited.
  EXPECT_TRUE(client_->Get(id).ok());

  // Once one of the two ends, a new stream is admitted.
  streams_.front().context->TryCancel();
  streams_.front().reader->Finish().error_code();
  EXPECT_TRUE(Eventually([&] {
    WatchStream* next = Watch(id);
    if (!next->open) {
      EXPECT_EQ(next->refused.error_code(),
                grpc::StatusCode::RESOURCE_EXHAUSTED);
    }
    return next->open;
  }));
  // And the limit holds again: two are open.
  EXPECT_FALSE(Watch(id)->open);
}

// With authentication on, the limit counts the streams of each principal,
// whatever host they come from: one principal at its limit does not stop
// another on the same host.
TEST_F(DaemonLimitsTest, WithTokensTheWatchLimitCountsEachPrincipalApart) {
  // Digests computed apart (sha256sum) of the two tokens below.
  const std::string vera = "tok-vera-limits-0001";
  const std::string otto = "tok-otto-limits-0002";
  const std::string tokens_file = dir_ + "/tokens.yaml";
  std::ofstream(tokens_file)
      << "tokens:\n"
         "  - {principal: vera, roles: [viewer], sha256: "
         "02aee24ea902f50e8d671d89416ca5ab27ce4aaa19eecdf60b06724f979ee627}\n"
         "  - {principal: otto, roles: [operator], sha256: "
         "abd75ace4b8bb2ee3babf1fc39111eb5c74bc00cc977a36492f9a6cd0155531c}"
         "\n";
  DaemonOptions options;
  options.auth_tokens_file = tokens_file;
  options.max_watch_streams_per_principal = 1;
  ASSERT_NO_FATAL_FAILURE(StartDaemon(options));
  client_->set_token(otto);
  const std::string id = SubmitPaused("");
  ASSERT_FALSE(id.empty());

  ASSERT_TRUE(Watch(id, vera)->open);
  WatchStream* second = Watch(id, vera);
  EXPECT_FALSE(second->open);
  EXPECT_EQ(second->refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(second->refused.error_message(),
              HasSubstr("principal vera has 1 open"));
  // Another principal from the same host has its own allowance.
  EXPECT_TRUE(Watch(id, otto)->open);
  EXPECT_FALSE(Watch(id, otto)->open);
  // Without credentials nothing is counted: the call is not admitted.
  WatchStream* anonymous = Watch(id);
  EXPECT_FALSE(anonymous->open);
  EXPECT_EQ(anonymous->refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(DaemonLimitsTest, ASubmitIsRefusedWhileMaxQueuedJobsAreQueued) {
  DaemonOptions options;
  options.max_queued_jobs = 1;
  ASSERT_NO_FATAL_FAILURE(StartDaemon(options));
  const std::string held = SubmitPaused("");
  ASSERT_FALSE(held.empty());
  // It waits behind the paused job: the one place in the queue.
  absl::StatusOr<v1::SubmitBackfillResponse> queued =
      client_->Submit(February("queued"), "queued-key");
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(queued->backfill().state(), v1::BACKFILL_STATE_QUEUED);

  absl::StatusOr<v1::SubmitBackfillResponse> refused =
      client_->Submit(February("one too many"), "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("1 job is QUEUED"));
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("backfilld --max-queued-jobs is 1"));
  EXPECT_EQ(JobCount(), 2);

  // The queued job's own repeat is answered, creating nothing.
  absl::StatusOr<v1::SubmitBackfillResponse> repeat =
      client_->Submit(February("queued"), "queued-key");
  ASSERT_TRUE(repeat.ok()) << repeat.status();
  EXPECT_FALSE(repeat->created());
  EXPECT_EQ(repeat->backfill().id(), queued->backfill().id());
  EXPECT_EQ(JobCount(), 2);
}

// A refusal reaches a client with gRPC's default limits (8 KiB of
// metadata) as itself, not as RESOURCE_EXHAUSTED "received initial metadata
// size exceeds limit", however many jobs it concerns or however long a
// value the request held: its message and details stay within
// kMaxErrorBytes, and the message names the first jobs and counts the rest.
TEST_F(DaemonLimitsTest, RefusalsStayWithinAClientsDefaultMetadataLimit) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(DaemonOptions()));
  // A paused job and 80 jobs queued behind it: a submit with `no_wait`
  // would wait for all 81.
  std::vector<std::string> holders = {SubmitPaused("")};
  ASSERT_FALSE(holders[0].empty());
  constexpr int kQueued = 80;
  for (int i = 0; i < kQueued; ++i) {
    absl::StatusOr<v1::SubmitBackfillResponse> queued =
        client_->Submit(February(absl::StrCat("queued ", i)), "");
    ASSERT_TRUE(queued.ok()) << queued.status();
    ASSERT_EQ(queued->backfill().state(), v1::BACKFILL_STATE_QUEUED);
    holders.push_back(queued->backfill().id());
  }

  v1::SubmitBackfillRequest no_wait;
  *no_wait.mutable_request() = February("no wait");
  no_wait.set_no_wait(true);
  const WireError held = Refusal(target_, "SubmitBackfill", no_wait);
  EXPECT_EQ(held.code, grpc::StatusCode::FAILED_PRECONDITION) << held.message;
  EXPECT_EQ(held.info.reason(), "PARTITIONS_HELD");
  EXPECT_LE(held.message.size() + held.details_bytes, kMaxErrorBytes);
  EXPECT_THAT(held.message,
              HasSubstr(absl::StrCat("held by paused job ", holders[0], " (")));
  EXPECT_THAT(held.message, HasSubstr(absl::StrCat(", ", holders[4], " (")));
  EXPECT_THAT(held.message, Not(HasSubstr(absl::StrCat(holders[5], " ("))));
  EXPECT_THAT(held.message, HasSubstr(absl::StrCat(
                                ", ... and ", kQueued + 1 - 5, " more jobs;")));
  const auto metadata = [&](const std::string& key) {
    auto found = held.info.metadata().find(key);
    return found == held.info.metadata().end() ? std::string("<none>")
                                               : found->second;
  };
  EXPECT_EQ(metadata("backfill_ids"),
            absl::StrCat(holders[0], ",", holders[1], ",", holders[2], ",",
                         holders[3], ",", holders[4]));
  EXPECT_EQ(metadata("backfill_count"), absl::StrCat(kQueued + 1));
  EXPECT_THAT(held.fields, ::testing::ElementsAre("no_wait"));
  EXPECT_EQ(JobCount(), kQueued + 1);

  // An id of 10 KB is quoted cut, not echoed.
  v1::GetBackfillRequest get;
  get.set_id(absl::StrCat("bf-", std::string(10000, '7')));
  const WireError malformed = Refusal(target_, "GetBackfill", get);
  EXPECT_EQ(malformed.code, grpc::StatusCode::INVALID_ARGUMENT)
      << malformed.message;
  EXPECT_EQ(malformed.info.reason(), "BACKFILL_ID_MALFORMED");
  EXPECT_LE(malformed.message.size() + malformed.details_bytes, kMaxErrorBytes);
  EXPECT_THAT(malformed.message,
              HasSubstr(absl::StrCat("malformed backfill id \"bf-",
                                     std::string(61, '7'), "...\" in `id`")));
  EXPECT_THAT(malformed.fields, ::testing::ElementsAre("id"));
}

TEST(DaemonLimitOptionsTest, OutOfRangeValuesAreRefusedNamingTheFlag) {
  DaemonOptions ok;
  EXPECT_TRUE(Daemon::CheckLimitOptions(ok).ok());
  const struct {
    void (*set)(DaemonOptions*);
    const char* flag;
  } cases[] = {
      {[](DaemonOptions* o) { o->max_message_bytes = 0; },
       "--max-message-bytes 0 is out of range"},
      {[](DaemonOptions* o) { o->max_message_bytes = int64_t{8} << 30; },
       "--max-message-bytes 8589934592 is out of range"},
      {[](DaemonOptions* o) { o->max_watch_streams_per_principal = -1; },
       "--max-watch-streams-per-principal -1 is out of range"},
      {[](DaemonOptions* o) { o->max_queued_jobs = 0; },
       "--max-queued-jobs 0 is out of range"},
      {[](DaemonOptions* o) { o->max_queued_jobs = 1000000000; },
       "--max-queued-jobs 1000000000 is out of range"},
      {[](DaemonOptions* o) { o->max_partitions_per_job = 0; },
       "--max-partitions-per-job 0 is out of range"},
      {[](DaemonOptions* o) { o->max_partitions_per_job = 1000000000; },
       "--max-partitions-per-job 1000000000 is out of range"},
  };
  for (const auto& c : cases) {
    DaemonOptions options;
    c.set(&options);
    absl::Status s = Daemon::CheckLimitOptions(options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.flag;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.flag));
  }
}

TEST(PeerHostTest, TheHostOfEachPeerForm) {
  EXPECT_EQ(PeerHost("ipv4:10.0.0.7:5123"), "10.0.0.7");
  EXPECT_EQ(PeerHost("ipv6:[::1]:5123"), "::1");
  EXPECT_EQ(PeerHost("ipv6:[fe80::1%eth0]:80"), "fe80::1%eth0");
  EXPECT_EQ(PeerHost("unix:/run/backfilld.sock"), "unix:/run/backfilld.sock");
}

}  // namespace
}  // namespace server_limits_test
}  // namespace backfill
