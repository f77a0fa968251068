// OpenLineageEmitter (openlineage/emitter.h): delivery through a fake
// HttpClient and a ManualClock, so retries and backoff take no real time:
// what is sent and where, retries on 5xx and on no answer with the
// documented backoff, no retry on 4xx, the queue's bound and drop-oldest
// policy, the drain deadline at shutdown, and that the observer callback
// never waits for the network.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/model/pipeline_loader.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "openlineage/emitter.h"
#include "tests/testing/http_test_server.h"
#include "tests/testing/memory_state_store.h"
#include "tests/testing/revenue_pipeline.h"

namespace backfill::openlineage {
namespace core_openlineage_emitter_test {
namespace {

using ::backfill::testing::InMemoryStateStore;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kStoreId[] = "0123456789abcdef0123456789abcdef";

// Answers from a script (then 200), records every request; can hold every
// Send until released.
class FakeHttpClient final : public HttpClient {
 public:
  using Answer = absl::StatusOr<HttpResponse>;

  void Script(std::vector<Answer> answers) {
    absl::MutexLock lock(&mu_);
    script_.assign(answers.begin(), answers.end());
  }
  void Hold() {
    absl::MutexLock lock(&mu_);
    held_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    held_ = false;
  }
  // Waits until `n` requests arrived (they may still be held).
  void AwaitRequests(size_t n) {
    std::pair<FakeHttpClient*, size_t> arg(this, n);
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](std::pair<FakeHttpClient*, size_t>* a)
             ABSL_NO_THREAD_SAFETY_ANALYSIS {
               return a->first->requests_.size() >= a->second;
             },
        &arg));
  }

  absl::StatusOr<HttpResponse> Send(const HttpRequest& request) override {
    absl::MutexLock lock(&mu_);
    requests_.push_back(request);
    mu_.Await(absl::Condition(
        +[](bool* held) { return !*held; }, &held_));
    if (script_.empty()) return HttpResponse{200, "{}"};
    Answer answer = script_.front();
    script_.pop_front();
    return answer;
  }

  std::vector<HttpRequest> requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

 private:
  mutable absl::Mutex mu_;
  std::deque<Answer> script_ ABSL_GUARDED_BY(mu_);
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<HttpRequest> requests_ ABSL_GUARDED_BY(mu_);
};

// A plain HTTP/1.1 client over a POSIX socket for http://127.0.0.1:PORT
// URLs (one request per connection, the answer read to EOF), so that the
// emitter can talk to the in-process HttpTestServer without libcurl.
class SocketHttpClient final : public HttpClient {
 public:
  absl::StatusOr<HttpResponse> Send(const HttpRequest& request) override {
    const absl::string_view kPrefix = "http://127.0.0.1:";
    if (!absl::StartsWith(request.url, kPrefix)) {
      return absl::InvalidArgumentError("only http://127.0.0.1:PORT URLs");
    }
    const std::string rest(request.url.substr(kPrefix.size()));
    const size_t slash = rest.find('/');
    int port = 0;
    if (!absl::SimpleAtoi(rest.substr(0, slash), &port)) {
      return absl::InvalidArgumentError("bad port");
    }
    const std::string path =
        slash == std::string::npos ? "/" : rest.substr(slash);
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return absl::UnavailableError("socket failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      return absl::UnavailableError("connection refused");
    }
    std::string out = absl::StrCat(request.method, " ", path,
                                   " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    for (const auto& [name, value] : request.headers) {
      absl::StrAppend(&out, name, ": ", value, "\r\n");
    }
    absl::StrAppend(&out, "Content-Length: ", request.body.size(),
                    "\r\nConnection: close\r\n\r\n", request.body);
    for (size_t done = 0; done < out.size();) {
      const ssize_t n = write(fd, out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    std::string in;
    char buffer[4096];
    for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;) {
      in.append(buffer, static_cast<size_t>(n));
    }
    close(fd);
    // "HTTP/1.1 200 OK\r\n..."
    int status = 0;
    const size_t space = in.find(' ');
    if (space == std::string::npos ||
        !absl::SimpleAtoi(in.substr(space + 1, 3), &status)) {
      return absl::UnavailableError("no HTTP answer");
    }
    const size_t body = in.find("\r\n\r\n");
    return HttpResponse{status,
                        body == std::string::npos ? "" : in.substr(body + 4)};
  }
};

HttpResponse Status(int code) { return HttpResponse{code, ""}; }

google::protobuf::Struct ParseJson(const std::string& json) {
  google::protobuf::Struct parsed;
  auto status = google::protobuf::util::JsonStringToMessage(json, &parsed);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return parsed;
}

std::string Field(const std::string& json, const std::string& outer,
                  const std::string& inner) {
  const google::protobuf::Struct e = ParseJson(json);
  return e.fields().at(outer).struct_value().fields().at(inner).string_value();
}

class OpenLineageEmitterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Catalog> catalog =
        LoadPipelineTexts({{"p.yaml", fixtures::RevenuePipelineYaml()}});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = *std::move(catalog);
    options_.url = "http://lineage.example:5000/";
    options_.dataset_namespace = "sqlite:///srv/bf/warehouse.db";
    options_.version = "0.1.0";
    options_.drain_timeout = absl::Hours(1);
  }

  // A job of daily_revenue over two days, in the store.
  std::string NewJob() {
    Job job;
    job.request.dataset = "daily_revenue";
    job.request.reason = "refund bug";
    DatasetPlan plan;
    plan.dataset = "daily_revenue";
    plan.partitions = {"2025-03-01", "2025-03-02"};
    job.plan.datasets.push_back(plan);
    absl::StatusOr<CreateJobResult> created =
        store_.CreateJob(job, clock_.Now());
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? created->job.id : "";
  }

  // Moves the job through `states` in the store (its history), without
  // telling any emitter.
  void Record(const std::string& job, std::vector<JobState> states) {
    for (JobState to : states) {
      absl::Status s =
          store_.TransitionJob(job, std::nullopt, to, "", clock_.Now());
      ASSERT_TRUE(s.ok()) << s;
    }
  }
  // Moves the job to `to` in the store and tells `emitter`, as the job
  // runner does.
  void Move(OpenLineageEmitter& emitter, const std::string& job, JobState to,
            const std::string& message = "") {
    absl::StatusOr<Job> before = store_.GetJob(job);
    ASSERT_TRUE(before.ok()) << before.status();
    ASSERT_NO_FATAL_FAILURE(Record(job, {to}));
    emitter.OnJobTransition(job, before->state, to, message);
  }
  // "EVENTTYPE JOBNAME RUNID" of every request, in order.
  std::vector<std::string> Sent() const {
    std::vector<std::string> seen;
    for (const HttpRequest& r : http_.requests()) {
      const google::protobuf::Struct e = ParseJson(r.body);
      seen.push_back(e.fields().at("eventType").string_value() + " " +
                     Field(r.body, "job", "name") + " " +
                     Field(r.body, "run", "runId"));
    }
    return seen;
  }

  std::unique_ptr<OpenLineageEmitter> NewEmitter() {
    return std::make_unique<OpenLineageEmitter>(options_, &catalog_, &store_,
                                                &http_, &clock_, nullptr);
  }

  Catalog catalog_;
  InMemoryStateStore store_{kStoreId, absl::FromUnixSeconds(1700000000)};
  FakeHttpClient http_;
  ManualClock clock_{absl::FromUnixSeconds(1741168800)};
  EmitterOptions options_;
};

TEST_F(OpenLineageEmitterTest, PostsEachRunsEventAsJsonToTheEndpoint) {
  const std::string job = NewJob();
  auto emitter = NewEmitter();
  ASSERT_TRUE(emitter->Start().ok());
  Move(*emitter, job, JobState::kRunning);
  // Moves that send nothing are not even queued.
  Move(*emitter, job, JobState::kValidating);
  Move(*emitter, job, JobState::kPublishing);
  Move(*emitter, job, JobState::kConfirming);
  Move(*emitter, job, JobState::kSucceeded, "done");
  emitter->Shutdown();

  const std::vector<HttpRequest> requests = http_.requests();
  ASSERT_EQ(requests.size(), 4u);  // (job + 1 dataset) x (START, COMPLETE)
  std::vector<std::string> seen;
  for (const HttpRequest& r : requests) {
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.url, "http://lineage.example:5000/api/v1/lineage");
    EXPECT_THAT(r.headers, ElementsAre(std::pair<std::string, std::string>(
                               "Content-Type", "application/json")));
    const google::protobuf::Struct e = ParseJson(r.body);
    seen.push_back(e.fields().at("eventType").string_value() + " " +
                   Field(r.body, "job", "name") + " " +
                   Field(r.body, "run", "runId"));
  }
  // python3: uuid.uuid5(uuid.UUID('6ceacff3-56ee-5261-b4df-51eb7046a6c4'),
  //   '0123456789abcdef0123456789abcdef/bf-1') and '.../bf-1/daily_revenue'
  EXPECT_THAT(
      seen,
      ElementsAre(
          "START backfill 446266f8-743a-5962-af3d-02228391f4ab",
          "START backfill/daily_revenue 2b407993-177c-5b2d-b90d-e5d2594dbb83",
          "COMPLETE backfill 446266f8-743a-5962-af3d-02228391f4ab",
          "COMPLETE backfill/daily_revenue "
          "2b407993-177c-5b2d-b90d-e5d2594dbb83"));
  const OpenLineageEmitter::Counts counts = emitter->counts();
  EXPECT_EQ(counts.sent, 4);
  EXPECT_EQ(counts.failed_attempts, 0);
  EXPECT_EQ(counts.events_dropped, 0);
  EXPECT_EQ(counts.changes_dropped, 0);
  EXPECT_EQ(clock_.sleeps(), 0);
}

TEST_F(OpenLineageEmitterTest, DatasetsAreNamedInTheWarehousesNamespace) {
  options_.dataset_namespace = "postgres://db.internal:5432";
  options_.dataset_name_prefix = "analytics.public.";
  const std::string job = NewJob();
  auto emitter = NewEmitter();
  ASSERT_TRUE(emitter->Start().ok());
  Move(*emitter, job, JobState::kRunning);
  emitter->Shutdown();
  const std::vector<HttpRequest> requests = http_.requests();
  ASSERT_EQ(requests.size(), 2u);
  const google::protobuf::Struct dataset_run = ParseJson(requests[1].body);
  const auto& output = dataset_run.fields()
                           .at("outputs")
                           .list_value()
                           .values(0)
                           .struct_value()
                           .fields();
  EXPECT_EQ(output.at("namespace").string_value(),
            "postgres://db.internal:5432");
  EXPECT_EQ(output.at("name").string_value(), "analytics.public.daily_revenue");
}

TEST_F(OpenLineageEmitterTest, RetriesServerErrorsWithDoublingBackoff) {
  const std::string job = NewJob();
  http_.Script({Status(503), absl::UnavailableError("connection refused"),
                Status(500), Status(200)});
  Record(job, {JobState::kRunning, JobState::kFailed});
  auto emitter = NewEmitter();
  ASSERT_TRUE(emitter->Start().ok());
  emitter->OnJobTransition(job, JobState::kRunning, JobState::kFailed, "x");
  emitter->Shutdown();
  const OpenLineageEmitter::Counts counts = emitter->counts();
  EXPECT_EQ(counts.sent, 2);  // the job's run after 4 tries, the dataset's
  EXPECT_EQ(counts.failed_attempts, 3);
  EXPECT_EQ(counts.events_dropped, 0);
  EXPECT_EQ(http_.requests().size(), 5u);
  // 0.5 s, 1 s, 2 s.
  EXPECT_EQ(clock_.slept(), absl::Milliseconds(3500));
  // The same event every time.
  EXPECT_EQ(http_.requests()[0].body, http_.requests()[3].body);
}

TEST_F(OpenLineageEmitterTest, RetriesUntilAcceptedWithCappedBackoff) {
  const std::string job = NewJob();
  options_.initial_backoff = absl::Seconds(1);
  options_.max_backoff = absl::Seconds(3);
  http_.Script(std::vector<FakeHttpClient::Answer>(8, Status(502)));
  Record(job, {JobState::kRunning, JobState::kCancelled});
  auto emitter = NewEmitter();
  ASSERT_TRUE(emitter->Start().ok());
  emitter->OnJobTransition(job, JobState::kRunning, JobState::kCancelled, "");
  emitter->Shutdown();
  const OpenLineageEmitter::Counts counts = emitter->counts();
  EXPECT_EQ(counts.failed_attempts, 8);
  EXPECT_EQ(counts.events_dropped, 0);
  EXPECT_EQ(counts.sent, 2);  // the job's run on the 9th try, the dataset's
  EXPECT_EQ(clock_.slept(), absl::Seconds(1 + 2 + 3 + 3 + 3 + 3 + 3 + 3));
  const std::vector<HttpRequest> requests = http_.requests();
  ASSERT_EQ(requests.size(), 10u);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(requests[i].body, requests[0].body);
}

TEST_F(OpenLineageEmitterTest, AReceiverDownForMinutesLosesNothing) {
  // The in-process receiver answers 503 for the first 5 minutes (of the
  // test's clock), far longer than the old budget of 5 attempts (7.5 s).
  const absl::Time back_at = clock_.Now() + absl::Minutes(5);
  ::backfill::testing::HttpTestServer receiver;
  receiver.SetHandler(
      [this, back_at](const ::backfill::testing::HttpTestServer::Request&) {
        ::backfill::testing::HttpTestServer::Response r;
        r.status = clock_.Now() < back_at ? 503 : 200;
        return r;
      });
  options_.url = receiver.Url("");
  options_.initial_backoff = absl::Milliseconds(100);
  options_.max_backoff = absl::Seconds(2);
  const std::string first = NewJob();
  const std::string second = NewJob();
  SocketHttpClient http;
  OpenLineageEmitter emitter(options_, &catalog_, &store_, &http, &clock_,
                             nullptr);
  ASSERT_TRUE(emitter.Start().ok());
  Move(emitter, first, JobState::kRunning);
  Move(emitter, second, JobState::kRunning);
  Move(emitter, first, JobState::kCancelled);
  emitter.Shutdown();  // drain time: an hour of the test's clock

  EXPECT_EQ(emitter.counts().sent, 6);
  EXPECT_EQ(emitter.counts().events_dropped, 0);
  EXPECT_EQ(emitter.counts().changes_dropped, 0);
  EXPECT_GE(clock_.Now(), back_at);
  // Every event reached the receiver, in order, once accepted.
  std::vector<std::string> accepted;
  std::string last_body;
  int refused = 0;
  for (const auto& r : receiver.requests()) {
    EXPECT_EQ(r.target, "/api/v1/lineage");
    if (r.body == last_body) continue;  // a retry of the same event
    last_body = r.body;
    accepted.push_back(
        ParseJson(r.body).fields().at("eventType").string_value() + " " +
        Field(r.body, "job", "name") + " " +
        ParseJson(r.body)
            .fields()
            .at("run")
            .struct_value()
            .fields()
            .at("facets")
            .struct_value()
            .fields()
            .at("backfilld_backfill")
            .struct_value()
            .fields()
            .at("jobId")
            .string_value());
  }
  for (const auto& r : receiver.requests()) {
    if (r.body == receiver.requests()[0].body) ++refused;
  }
  EXPECT_THAT(
      accepted,
      ElementsAre("START backfill bf-1", "START backfill/daily_revenue bf-1",
                  "START backfill bf-2", "START backfill/daily_revenue bf-2",
                  "ABORT backfill bf-1", "ABORT backfill/daily_revenue bf-1"));
  // The first event was tried all through the outage: 100 ms doubling to
  // 2 s, then every 2 s for 5 minutes.
  EXPECT_GT(refused, 140);
  EXPECT_EQ(emitter.counts().failed_attempts, refused - 1);
}

TEST_F(OpenLineageEmitterTest, ClientErrorsAreFinalButTimeoutAndTooManyRetry) {
  const std::string job = NewJob();
  http_.Script({Status(400), Status(429), Status(408), Status(200)});
  Record(job, {JobState::kRunning});
  auto emitter = NewEmitter();
  ASSERT_TRUE(emitter->Start().ok());
  emitter->OnJobTransition(job, JobState::kQueued, JobState::kRunning, "");
  emitter->Shutdown();
  const OpenLineageEmitter::Counts counts = emitter->counts();
  EXPECT_EQ(counts.events_dropped, 1);  // the 400: not sent again
  EXPECT_EQ(counts.failed_attempts, 3);
  EXPECT_EQ(counts.sent, 1);
  EXPECT_EQ(http_.requests().size(), 4u);
  EXPECT_EQ(clock_.slept(), absl::Milliseconds(1500));
}

TEST_F(OpenLineageEmitterTest, FullQueueDropsProgressBeforeOutcomes) {
  options_.queue_capacity = 3;
  using S = JobState;
  // name -> the move it makes; in the order the changes are heard.
  struct Heard {
    const char* name;
    S from;
    S to;
  };
  const std::vector<Heard> heard = {
      {"A", S::kQueued, S::kRunning},     // queue: A
      {"B", S::kRunning, S::kFailed},     // A B
      {"C", S::kQueued, S::kRunning},     // A B C
      {"D", S::kRunning, S::kCancelled},  // full: A dropped -> B C D
      {"E", S::kQueued, S::kRunning},     // C dropped -> B D E
      {"F", S::kRunning, S::kFailed},     // E dropped -> B D F
      {"G", S::kQueued, S::kRunning},     // all end runs: G dropped
      {"H", S::kRunning, S::kCancelled},  // B, the oldest, dropped -> D F H
  };
  std::map<std::string, std::string> id_of;
  std::map<std::string, std::string> name_of;
  for (const Heard& h : heard) {
    const std::string id = NewJob();
    id_of[h.name] = id;
    name_of[id] = h.name;
    if (h.to == S::kRunning) {
      Record(id, {S::kRunning});
    } else {
      Record(id, {S::kRunning, h.to});
    }
  }
  auto emitter = NewEmitter();
  // Not started yet: changes wait in the queue.
  for (const Heard& h : heard) {
    emitter->OnJobTransition(id_of[h.name], h.from, h.to, "");
  }
  EXPECT_EQ(emitter->queued(), 3u);
  EXPECT_EQ(emitter->counts().changes_dropped, 5);
  ASSERT_TRUE(emitter->Start().ok());
  emitter->Shutdown();
  std::vector<std::string> delivered;
  for (const HttpRequest& r : http_.requests()) {
    if (Field(r.body, "job", "name") != "backfill") continue;
    const google::protobuf::Struct e = ParseJson(r.body);
    const std::string id = e.fields()
                               .at("run")
                               .struct_value()
                               .fields()
                               .at("facets")
                               .struct_value()
                               .fields()
                               .at("backfilld_backfill")
                               .struct_value()
                               .fields()
                               .at("jobId")
                               .string_value();
    delivered.push_back(name_of[id] + " " +
                        e.fields().at("eventType").string_value());
  }
  EXPECT_THAT(delivered, ElementsAre("D ABORT", "F FAIL", "H ABORT"));
  EXPECT_EQ(emitter->counts().sent, 6);
}

TEST_F(OpenLineageEmitterTest, ObserverNeverWaitsForAStuckReceiver) {
  options_.queue_capacity = 10;
  const std::string job = NewJob();
  Record(job, {JobState::kRunning, JobState::kFailed});
  http_.Hold();  // the receiver does not answer
  auto emitter = NewEmitter();
  ASSERT_TRUE(emitter->Start().ok());
  emitter->OnJobTransition(job, JobState::kQueued, JobState::kRunning, "");
  http_.AwaitRequests(1);  // the delivery thread is stuck in Send
  // Were the callback to wait for the network, this would never return.
  for (int i = 0; i < 1000; ++i) {
    emitter->OnJobTransition(job, JobState::kRunning, JobState::kFailed, "");
  }
  EXPECT_EQ(emitter->queued(), 10u);
  EXPECT_EQ(emitter->counts().changes_dropped, 990);
  EXPECT_EQ(emitter->counts().sent, 0);
  http_.Release();
  emitter->Shutdown();
  EXPECT_EQ(emitter->counts().sent, 2 + 10 * 2);
}

TEST_F(OpenLineageEmitterTest, ShutdownDrainsUntilItsDeadlineThenDrops) {
  options_.drain_timeout = absl::Seconds(5);
  for (int i = 0; i < 3; ++i) Record(NewJob(), {JobState::kRunning});
  http_.Script(std::vector<FakeHttpClient::Answer>(50, Status(503)));
  http_.Hold();
  auto emitter = NewEmitter();
  for (const char* job : {"bf-1", "bf-2", "bf-3"}) {
    emitter->OnJobTransition(job, JobState::kQueued, JobState::kRunning, "");
  }
  ASSERT_TRUE(emitter->Start().ok());
  http_.AwaitRequests(1);
  std::thread stopper([&] { emitter->Shutdown(); });
  while (!emitter->stopping()) std::this_thread::yield();
  http_.Release();
  stopper.join();
  // bf-1's job run: tries at 0, 0.5, 1.5 and 3.5 s, then the 5 s deadline
  // passes during the 4 s backoff; its dataset run's event is given up
  // without a try; bf-2 and bf-3 are dropped unbuilt.
  const OpenLineageEmitter::Counts counts = emitter->counts();
  EXPECT_EQ(counts.failed_attempts, 4);
  EXPECT_EQ(counts.events_dropped, 2);
  EXPECT_EQ(counts.changes_dropped, 2);
  EXPECT_EQ(counts.sent, 0);
  EXPECT_EQ(http_.requests().size(), 4u);
  EXPECT_EQ(clock_.slept(), absl::Seconds(5));
  // Changes after shutdown are dropped at once.
  emitter->OnJobTransition("bf-1", JobState::kRunning, JobState::kFailed, "");
  EXPECT_EQ(emitter->counts().changes_dropped, 3);
}

TEST_F(OpenLineageEmitterTest, UnknownJobIsDroppedAndDeliveryGoesOn) {
  const std::string job = NewJob();
  Record(job, {JobState::kRunning});
  auto emitter = NewEmitter();
  ASSERT_TRUE(emitter->Start().ok());
  emitter->OnJobTransition("bf-404", JobState::kQueued, JobState::kRunning, "");
  emitter->OnJobTransition(job, JobState::kQueued, JobState::kRunning, "");
  emitter->Shutdown();
  EXPECT_EQ(emitter->counts().changes_dropped, 1);
  EXPECT_EQ(emitter->counts().sent, 2);
}

// python3: uuid.uuid5(uuid.UUID('6ceacff3-56ee-5261-b4df-51eb7046a6c4'),
//   '0123456789abcdef0123456789abcdef/' + name) for bf-1, bf-1/daily_revenue,
//   bf-1/rollback and bf-1/rollback/daily_revenue.
constexpr char kJobRun[] = "backfill 446266f8-743a-5962-af3d-02228391f4ab";
constexpr char kDatasetRun[] =
    "backfill/daily_revenue 2b407993-177c-5b2d-b90d-e5d2594dbb83";
constexpr char kRollbackRun[] = "backfill 2c72c472-57ec-59bd-b059-31e8d480a50e";
constexpr char kRollbackDatasetRun[] =
    "backfill/daily_revenue 3dfc57ef-6ff9-52ad-b0d3-277cc766ecdf";

std::string Ev(const char* type, const char* run) {
  return std::string(type) + " " + run;
}

// Every run got exactly one START, before anything else, and at most one of
// COMPLETE, FAIL, ABORT.
void ExpectOneStartAndAtMostOneEnd(const std::vector<std::string>& sent) {
  std::map<std::string, std::pair<int, int>> per_run;  // starts, ends
  for (const std::string& line : sent) {
    const std::string type = line.substr(0, line.find(' '));
    const std::string run = line.substr(line.find(' ') + 1);
    auto& [starts, ends] = per_run[run];
    if (type == "START") {
      ++starts;
    } else {
      EXPECT_EQ(starts, 1) << line << " before the run's START";
    }
    if (type == "COMPLETE" || type == "FAIL" || type == "ABORT") ++ends;
  }
  for (const auto& [run, counts] : per_run) {
    EXPECT_EQ(counts.first, 1) << run;
    EXPECT_LE(counts.second, 1) << run;
  }
}

TEST_F(OpenLineageEmitterTest,
       PauseResumeReconfirmAndRollbackKeepOneLifecycle) {
  const std::string job = NewJob();
  ASSERT_EQ(job, "bf-1");
  auto emitter = NewEmitter();
  ASSERT_TRUE(emitter->Start().ok());
  using S = JobState;
  for (S to : {S::kRunning, S::kPaused, S::kQueued, S::kRunning, S::kValidating,
               S::kPublishing, S::kConfirming, S::kDownstreamUnhealthy,
               S::kConfirming, S::kSucceeded, S::kRolledBack}) {
    Move(*emitter, job, to);
  }
  emitter->Shutdown();
  const std::vector<std::string> sent = Sent();
  EXPECT_THAT(
      sent,
      ElementsAre(Ev("START", kJobRun), Ev("START", kDatasetRun),
                  // resumed
                  Ev("RUNNING", kJobRun), Ev("RUNNING", kDatasetRun),
                  // DOWNSTREAM_UNHEALTHY
                  Ev("FAIL", kJobRun), Ev("COMPLETE", kDatasetRun),
                  // confirm: CONFIRMING, then SUCCEEDED
                  Ev("OTHER", kJobRun), Ev("OTHER", kDatasetRun),
                  Ev("OTHER", kJobRun), Ev("OTHER", kDatasetRun),
                  // rollback: its own runs
                  Ev("START", kRollbackRun), Ev("START", kRollbackDatasetRun),
                  Ev("COMPLETE", kRollbackDatasetRun),
                  Ev("COMPLETE", kRollbackRun)));
  ExpectOneStartAndAtMostOneEnd(sent);
  // Only the first report of the publication carries the rows.
  const std::vector<HttpRequest> requests = http_.requests();
  ASSERT_EQ(requests.size(), 14u);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(absl::StrContains(requests[i].body, "outputStatistics"), i == 5)
        << i << ": " << requests[i].body;
  }
}

TEST_F(OpenLineageEmitterTest, RetryOfAFailedJobSendsNoSecondStartOrEnd) {
  const std::string job = NewJob();
  auto emitter = NewEmitter();
  ASSERT_TRUE(emitter->Start().ok());
  using S = JobState;
  for (S to : {S::kRunning, S::kFailed, S::kQueued, S::kRunning, S::kValidating,
               S::kPublishing, S::kConfirming, S::kSucceeded}) {
    Move(*emitter, job, to);
  }
  emitter->Shutdown();
  const std::vector<std::string> sent = Sent();
  EXPECT_THAT(sent,
              ElementsAre(Ev("START", kJobRun), Ev("START", kDatasetRun),
                          Ev("FAIL", kJobRun), Ev("FAIL", kDatasetRun),
                          // the retry runs, then succeeds
                          Ev("OTHER", kJobRun), Ev("OTHER", kDatasetRun),
                          Ev("OTHER", kJobRun), Ev("OTHER", kDatasetRun)));
  ExpectOneStartAndAtMostOneEnd(sent);
}

TEST_F(OpenLineageEmitterTest, AJobThatNeverStartedSendsNothing) {
  const std::string cancelled = NewJob();
  const std::string failed = NewJob();
  auto emitter = NewEmitter();
  ASSERT_TRUE(emitter->Start().ok());
  Move(*emitter, cancelled, JobState::kPaused);
  Move(*emitter, cancelled, JobState::kCancelled);
  Move(*emitter, failed, JobState::kFailed);
  Move(*emitter, failed, JobState::kCancelled);
  emitter->Shutdown();
  EXPECT_THAT(Sent(), ::testing::IsEmpty());
  EXPECT_EQ(emitter->counts().changes_dropped, 0);
}

TEST_F(OpenLineageEmitterTest, AfterARestartTheHistoryTellsWhatWasSent) {
  const std::string job = NewJob();
  // Before this emitter started: the job ran, was paused and queued again
  // (an earlier daemon sent its START).
  Record(job, {JobState::kRunning, JobState::kPaused, JobState::kQueued});
  clock_.Advance(absl::Seconds(30));
  auto emitter = NewEmitter();
  ASSERT_TRUE(emitter->Start().ok());
  Move(*emitter, job, JobState::kRunning);
  Move(*emitter, job, JobState::kCancelled);
  emitter->Shutdown();
  EXPECT_THAT(Sent(),
              ElementsAre(Ev("RUNNING", kJobRun), Ev("RUNNING", kDatasetRun),
                          Ev("ABORT", kJobRun), Ev("ABORT", kDatasetRun)));
}

TEST_F(OpenLineageEmitterTest, DelayedDeliveryStillMatchesEachChange) {
  // The receiver is stuck while the job starts, pauses and resumes: when
  // the first change is delivered, the history already holds the second
  // start. Each change is still reported as what it was.
  const std::string job = NewJob();
  http_.Hold();
  auto emitter = NewEmitter();
  ASSERT_TRUE(emitter->Start().ok());
  Move(*emitter, job, JobState::kRunning);
  http_.AwaitRequests(1);
  Move(*emitter, job, JobState::kPaused);
  Move(*emitter, job, JobState::kQueued);
  Move(*emitter, job, JobState::kRunning);
  Move(*emitter, job, JobState::kFailed);
  http_.Release();
  emitter->Shutdown();
  EXPECT_THAT(Sent(),
              ElementsAre(Ev("START", kJobRun), Ev("START", kDatasetRun),
                          Ev("RUNNING", kJobRun), Ev("RUNNING", kDatasetRun),
                          Ev("FAIL", kJobRun), Ev("FAIL", kDatasetRun)));
}

// The in-memory store, whose job reads fail with UNAVAILABLE a given
// number of times first (a busy or failing state store).
class FlakyReadStore final : public InMemoryStateStore {
 public:
  using InMemoryStateStore::InMemoryStateStore;
  void FailNextReads(int n) {
    absl::MutexLock lock(&mu_);
    fail_next_ = n;
  }
  absl::StatusOr<Job> GetJob(const std::string& id) override {
    {
      absl::MutexLock lock(&mu_);
      if (fail_next_ > 0) {
        --fail_next_;
        return absl::UnavailableError("database is locked");
      }
    }
    return InMemoryStateStore::GetJob(id);
  }

 private:
  absl::Mutex mu_;
  int fail_next_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST_F(OpenLineageEmitterTest, ATransientStoreReadErrorIsRetried) {
  FlakyReadStore store(kStoreId, absl::FromUnixSeconds(1700000000));
  Job job;
  job.request.dataset = "daily_revenue";
  DatasetPlan plan;
  plan.dataset = "daily_revenue";
  plan.partitions = {"2025-03-01"};
  job.plan.datasets.push_back(plan);
  absl::StatusOr<CreateJobResult> created = store.CreateJob(job, clock_.Now());
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(store
                  .TransitionJob(created->job.id, JobState::kQueued,
                                 JobState::kRunning, "", clock_.Now())
                  .ok());
  store.FailNextReads(3);
  OpenLineageEmitter emitter(options_, &catalog_, &store, &http_, &clock_,
                             nullptr);
  ASSERT_TRUE(emitter.Start().ok());
  emitter.OnJobTransition(created->job.id, JobState::kQueued,
                          JobState::kRunning, "");
  emitter.Shutdown();
  EXPECT_EQ(emitter.counts().changes_dropped, 0);
  EXPECT_THAT(Sent(),
              ElementsAre(Ev("START", kJobRun), Ev("START", kDatasetRun)));
  // Read again after 0.5 s, 1 s and 2 s.
  EXPECT_EQ(clock_.slept(), absl::Milliseconds(3500));
}

// Records what the emitter tells it, and on which thread.
class RecordingListener final : public DeliveryListener {
 public:
  void OnChangesDropped(int64_t count, const std::string& summary) override {
    absl::MutexLock lock(&mu_);
    threads_.push_back(std::this_thread::get_id());
    dropped_ += count;
    if (!summary.empty()) summaries_.push_back(summary);
  }
  int64_t dropped() const {
    absl::MutexLock lock(&mu_);
    return dropped_;
  }
  std::vector<std::string> summaries() const {
    absl::MutexLock lock(&mu_);
    return summaries_;
  }
  std::vector<std::thread::id> threads() const {
    absl::MutexLock lock(&mu_);
    return threads_;
  }

 private:
  mutable absl::Mutex mu_;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> summaries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
};

TEST_F(OpenLineageEmitterTest, DropsAreToldFromTheDeliveryThreadRateLimited) {
  options_.queue_capacity = 2;
  const std::string job = NewJob();
  Record(job, {JobState::kRunning});
  http_.Script({Status(503), Status(503)});
  http_.Hold();
  RecordingListener listener;
  OpenLineageEmitter emitter(options_, &catalog_, &store_, &http_, &clock_,
                             &listener);
  ASSERT_TRUE(emitter.Start().ok());
  emitter.OnJobTransition(job, JobState::kQueued, JobState::kRunning, "");
  http_.AwaitRequests(1);  // the delivery thread is stuck in Send
  for (int i = 0; i < 500; ++i) {
    emitter.OnJobTransition(job, JobState::kQueued, JobState::kRunning, "");
  }
  // Counted at once, but the job's thread told nobody.
  EXPECT_EQ(emitter.counts().changes_dropped, 498);
  EXPECT_EQ(listener.dropped(), 0);
  EXPECT_THAT(listener.threads(), ::testing::IsEmpty());
  http_.Release();
  emitter.Shutdown();
  EXPECT_EQ(listener.dropped(), 498);
  // One line for the first drops, one at shutdown for the rest: not one
  // per drop.
  const std::vector<std::string> summaries = listener.summaries();
  ASSERT_GE(summaries.size(), 1u);
  EXPECT_LE(summaries.size(), 2u);
  EXPECT_THAT(summaries[0], HasSubstr("the OpenLineage queue is full"));
}

TEST(OpenLineageUrl, EndpointAndValidation) {
  EXPECT_EQ(*LineageEndpoint("http://127.0.0.1:5000"),
            "http://127.0.0.1:5000/api/v1/lineage");
  EXPECT_EQ(*LineageEndpoint("https://marquez.example/base/"),
            "https://marquez.example/base/api/v1/lineage");
  // A URL that already names the endpoint is used as is, not doubled.
  EXPECT_EQ(*LineageEndpoint("http://marquez:5000/api/v1/lineage"),
            "http://marquez:5000/api/v1/lineage");
  EXPECT_EQ(*LineageEndpoint("http://marquez:5000/api/v1/lineage/"),
            "http://marquez:5000/api/v1/lineage");
  EXPECT_EQ(*LineageEndpoint("https://proxy.example/ol/api/v1/lineage"),
            "https://proxy.example/ol/api/v1/lineage");
  EXPECT_EQ(*LineageEndpoint("http://marquez:5000/api/v1"),
            "http://marquez:5000/api/v1/api/v1/lineage");
  EXPECT_EQ(WarehouseNamespace("DB1.example", "/srv/bf/warehouse.db"),
            "sqlite://db1.example/srv/bf/warehouse.db");
  EXPECT_EQ(WarehouseNamespace("", "/srv/bf/warehouse.db"),
            "sqlite://localhost/srv/bf/warehouse.db");
  for (const char* bad :
       {"", "marquez:5000", "ftp://x", "http://", "http://:80", "http://a b",
        "http://host/?q=1", "http://host/#f", "http://user:secret@host"}) {
    absl::StatusOr<std::string> e = LineageEndpoint(bad);
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(e.status().message(), HasSubstr("--openlineage-url")) << bad;
  }
  EXPECT_TRUE(ValidateNamespace("backfilld").ok());
  EXPECT_TRUE(ValidateNamespace("prod/backfilld-2").ok());
  for (const char* bad : {"", "a b", "tab\t", "\xc3\xa9"}) {
    EXPECT_EQ(ValidateNamespace(bad).code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(OpenLineageUrl, StartRefusesABadUrl) {
  Catalog catalog;
  InMemoryStateStore store;
  FakeHttpClient http;
  ManualClock clock(absl::UnixEpoch());
  EmitterOptions options;
  options.url = "file:///etc/passwd";
  OpenLineageEmitter emitter(options, &catalog, &store, &http, &clock, nullptr);
  EXPECT_EQ(emitter.Start().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace core_openlineage_emitter_test
}  // namespace backfill::openlineage
