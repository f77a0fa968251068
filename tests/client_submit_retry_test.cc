// Unit tests of the safe submit of client/backfill_client.h: random UUID
// idempotency keys, and SubmitWithRetries, which retries UNAVAILABLE and
// DEADLINE_EXCEEDED (only those) a bounded number of times with the same
// request and key, against a scripted fake and against an in-process fake
// BackfillService through BackfillClient.

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.grpc.pb.h"
#include "client/backfill_client.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace backfill {
namespace client_submit_retry_test {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;

constexpr char kUuidV4[] =
    "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}";

// ------------------------------------------------------------ NewRandomUuid

TEST(NewRandomUuidTest, IsAVersion4UuidInLowerCaseHex) {
  for (int i = 0; i < 1000; ++i) {
    const std::string uuid = NewRandomUuid();
    ASSERT_EQ(uuid.size(), 36u) << uuid;
    ASSERT_THAT(uuid, MatchesRegex(kUuidV4));
  }
}

TEST(NewRandomUuidTest, IsUniqueAcrossCallsAndThreads) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2000;
  std::vector<std::vector<std::string>> made(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&made, t] {
      for (int i = 0; i < kPerThread; ++i) made[t].push_back(NewRandomUuid());
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::set<std::string> distinct;
  for (const auto& keys : made) distinct.insert(keys.begin(), keys.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kThreads * kPerThread));
}

TEST(NewRandomUuidTest, EveryRandomDigitVaries) {
  // The 30 hex digits that are not fixed (and the variant digit, 8..b)
  // each take many values over a few thousand keys: no digit is stuck,
  // as it would be with a counter, a timestamp or a weak source.
  std::vector<std::set<char>> seen(36);
  for (int i = 0; i < 4000; ++i) {
    const std::string uuid = NewRandomUuid();
    for (size_t j = 0; j < uuid.size(); ++j) seen[j].insert(uuid[j]);
  }
  for (size_t j = 0; j < seen.size(); ++j) {
    if (j == 8 || j == 13 || j == 18 || j == 23) {
      EXPECT_EQ(seen[j], std::set<char>{'-'});
    } else if (j == 14) {
      EXPECT_EQ(seen[j], std::set<char>{'4'});  // version
    } else if (j == 19) {
      EXPECT_EQ(seen[j], (std::set<char>{'8', '9', 'a', 'b'}));  // variant
    } else {
      EXPECT_EQ(seen[j].size(), 16u) << "digit " << j;
    }
  }
}

// -------------------------------------------------------- SubmitWithRetries

v1::SubmitBackfillRequest SubmitRequest(const std::string& key) {
  v1::SubmitBackfillRequest request;
  request.mutable_request()->set_dataset("daily_revenue");
  request.mutable_request()->set_from_partition("2025-03-01");
  request.mutable_request()->set_to_partition("2025-03-08");
  request.mutable_request()->set_reason("fix refunds");
  request.mutable_request()->set_priority(5);
  request.set_idempotency_key(key);
  request.set_no_wait(true);
  return request;
}

// A scripted SubmitBackfill: answers with `errors` in turn, then OK; keeps
// every request it was called with.
class ScriptedSubmit {
 public:
  explicit ScriptedSubmit(std::vector<absl::Status> errors)
      : errors_(std::move(errors)) {}

  SubmitFunction AsFunction() {
    return [this](const v1::SubmitBackfillRequest& request)
               -> absl::StatusOr<v1::SubmitBackfillResponse> {
      calls_.push_back(request);
      if (calls_.size() <= errors_.size()) return errors_[calls_.size() - 1];
      v1::SubmitBackfillResponse response;
      response.mutable_backfill()->set_id("bf-1");
      response.set_created(true);
      return response;
    };
  }

  const std::vector<v1::SubmitBackfillRequest>& calls() const { return calls_; }

 private:
  std::vector<absl::Status> errors_;
  std::vector<v1::SubmitBackfillRequest> calls_;
};

// Options whose waits are recorded instead of slept, and whose retries are
// recorded too.
struct Recorded {
  std::vector<absl::Duration> sleeps;
  std::vector<SubmitRetry> retries;

  SubmitRetryOptions Options() {
    SubmitRetryOptions options;
    options.sleep = [this](absl::Duration d) { sleeps.push_back(d); };
    options.on_retry = [this](const SubmitRetry& r) { retries.push_back(r); };
    return options;
  }
};

TEST(SubmitWithRetriesTest, RetriesUnavailableWithTheSameRequestAndKey) {
  ScriptedSubmit fake({absl::UnavailableError("connection refused"),
                       absl::UnavailableError("connection reset")});
  Recorded recorded;
  const v1::SubmitBackfillRequest request = SubmitRequest("key-1");
  absl::StatusOr<v1::SubmitBackfillResponse> response =
      SubmitWithRetries(request, recorded.Options(), fake.AsFunction());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->backfill().id(), "bf-1");
  ASSERT_EQ(fake.calls().size(), 3u);
  for (const v1::SubmitBackfillRequest& sent : fake.calls()) {
    EXPECT_EQ(sent.idempotency_key(), "key-1");
    EXPECT_TRUE(MessageDifferencer::Equals(sent, request))
        << sent.DebugString();
  }
  EXPECT_THAT(recorded.sleeps,
              ElementsAre(absl::Milliseconds(200), absl::Milliseconds(400)));
  ASSERT_EQ(recorded.retries.size(), 2u);
  EXPECT_EQ(recorded.retries[0].attempt, 1);
  EXPECT_EQ(recorded.retries[0].max_attempts, 5);
  EXPECT_EQ(recorded.retries[0].status.message(), "connection refused");
  EXPECT_EQ(recorded.retries[0].idempotency_key, "key-1");
  EXPECT_EQ(recorded.retries[0].backoff, absl::Milliseconds(200));
  EXPECT_EQ(recorded.retries[1].attempt, 2);
  EXPECT_EQ(recorded.retries[1].status.code(), absl::StatusCode::kUnavailable);
}

TEST(SubmitWithRetriesTest, RetriesDeadlineExceeded) {
  ScriptedSubmit fake({absl::DeadlineExceededError("Deadline Exceeded")});
  Recorded recorded;
  absl::StatusOr<v1::SubmitBackfillResponse> response = SubmitWithRetries(
      SubmitRequest("key-2"), recorded.Options(), fake.AsFunction());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(fake.calls().size(), 2u);
  EXPECT_EQ(fake.calls()[1].idempotency_key(), "key-2");
}

TEST(SubmitWithRetriesTest, OtherErrorsAreReturnedAtOnce) {
  for (const absl::Status& error :
       {absl::InvalidArgumentError("unknown dataset \"foo\""),
        absl::FailedPreconditionError("held by bf-1"),
        absl::NotFoundError("no such job"), absl::InternalError("bug"),
        absl::ResourceExhaustedError("too big"), absl::AbortedError("aborted"),
        absl::CancelledError("cancelled"), absl::UnknownError("unknown")}) {
    ScriptedSubmit fake({error, error});
    Recorded recorded;
    absl::StatusOr<v1::SubmitBackfillResponse> response = SubmitWithRetries(
        SubmitRequest("key-3"), recorded.Options(), fake.AsFunction());
    EXPECT_EQ(response.status(), error);
    EXPECT_EQ(fake.calls().size(), 1u) << error;
    EXPECT_THAT(recorded.sleeps, IsEmpty()) << error;
    EXPECT_THAT(recorded.retries, IsEmpty()) << error;
  }
}

TEST(SubmitWithRetriesTest, AttemptsAreBoundedAndTheLastErrorIsReturned) {
  std::vector<absl::Status> errors;
  for (int i = 1; i <= 20; ++i) {
    errors.push_back(absl::UnavailableError(absl::StrCat("down ", i)));
  }
  ScriptedSubmit fake(errors);
  Recorded recorded;
  absl::StatusOr<v1::SubmitBackfillResponse> response = SubmitWithRetries(
      SubmitRequest("key-4"), recorded.Options(), fake.AsFunction());
  EXPECT_EQ(response.status(), absl::UnavailableError("down 5"));
  EXPECT_EQ(fake.calls().size(), 5u);
  // Doubling from 0.2 s: 3 s of waiting in all.
  EXPECT_THAT(recorded.sleeps,
              ElementsAre(absl::Milliseconds(200), absl::Milliseconds(400),
                          absl::Milliseconds(800), absl::Milliseconds(1600)));
  EXPECT_EQ(recorded.retries.size(), 4u);
}

TEST(SubmitWithRetriesTest, BackoffDoublesUpToItsCeiling) {
  ScriptedSubmit fake(std::vector<absl::Status>(
      10, absl::DeadlineExceededError("Deadline Exceeded")));
  Recorded recorded;
  SubmitRetryOptions options = recorded.Options();
  options.max_attempts = 8;
  absl::StatusOr<v1::SubmitBackfillResponse> response =
      SubmitWithRetries(SubmitRequest("key-5"), options, fake.AsFunction());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(fake.calls().size(), 8u);
  EXPECT_THAT(
      recorded.sleeps,
      ElementsAre(absl::Milliseconds(200), absl::Milliseconds(400),
                  absl::Milliseconds(800), absl::Milliseconds(1600),
                  absl::Seconds(3), absl::Seconds(3), absl::Seconds(3)));
}

TEST(SubmitWithRetriesTest, AtLeastOneAttempt) {
  ScriptedSubmit fake({absl::UnavailableError("down")});
  Recorded recorded;
  SubmitRetryOptions options = recorded.Options();
  options.max_attempts = 0;
  absl::StatusOr<v1::SubmitBackfillResponse> response =
      SubmitWithRetries(SubmitRequest("key-6"), options, fake.AsFunction());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(fake.calls().size(), 1u);
  EXPECT_THAT(recorded.sleeps, IsEmpty());
}

TEST(SubmitWithRetriesTest, RefusesARequestWithoutAKeyAndSendsNothing) {
  ScriptedSubmit fake({});
  Recorded recorded;
  absl::StatusOr<v1::SubmitBackfillResponse> response = SubmitWithRetries(
      SubmitRequest(""), recorded.Options(), fake.AsFunction());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(response.status().message(),
              ::testing::HasSubstr("idempotency key"));
  EXPECT_THAT(fake.calls(), IsEmpty());
}

TEST(IsRetryableSubmitErrorTest, OnlyUnavailableAndDeadlineExceeded) {
  EXPECT_TRUE(IsRetryableSubmitError(absl::UnavailableError("")));
  EXPECT_TRUE(IsRetryableSubmitError(absl::DeadlineExceededError("")));
  EXPECT_FALSE(IsRetryableSubmitError(absl::OkStatus()));
  EXPECT_FALSE(IsRetryableSubmitError(absl::InvalidArgumentError("")));
  EXPECT_FALSE(IsRetryableSubmitError(absl::FailedPreconditionError("")));
  EXPECT_FALSE(IsRetryableSubmitError(absl::InternalError("")));
}

// ----------------------------------- BackfillClient::SubmitWithRetries, gRPC

// A BackfillService whose SubmitBackfill fails with `code` the first
// `failures` times, but makes the job anyway (the answer is what is lost),
// and then answers like the real service: the job of a known key, with
// created false.
class FlakySubmitService final : public v1::BackfillService::Service {
 public:
  FlakySubmitService(grpc::StatusCode code, int failures)
      : code_(code), failures_(failures) {}

  grpc::Status SubmitBackfill(grpc::ServerContext*,
                              const v1::SubmitBackfillRequest* request,
                              v1::SubmitBackfillResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    received_.push_back(*request);
    const auto [it, created] = jobs_.try_emplace(
        request->idempotency_key(), absl::StrCat("bf-", jobs_.size() + 1));
    if (static_cast<int>(received_.size()) <= failures_) {
      return grpc::Status(code_, "answer lost");
    }
    response->mutable_backfill()->set_id(it->second);
    response->mutable_backfill()->set_idempotency_key(
        request->idempotency_key());
    response->set_created(created);
    return grpc::Status::OK;
  }

  std::vector<v1::SubmitBackfillRequest> received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  size_t jobs() {
    std::lock_guard<std::mutex> lock(mu_);
    return jobs_.size();
  }

 private:
  const grpc::StatusCode code_;
  const int failures_;
  std::mutex mu_;
  std::vector<v1::SubmitBackfillRequest> received_;
  std::map<std::string, std::string> jobs_;  // key -> job id
};

class ClientSubmitWithRetriesTest : public ::testing::Test {
 protected:
  void Serve(FlakySubmitService* service) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    client_ = BackfillClient::Connect(absl::StrCat("127.0.0.1:", port));
    client_->set_rpc_timeout(absl::Seconds(10));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<BackfillClient> client_;
};

TEST_F(ClientSubmitWithRetriesTest, TwoLostAnswersThenOneJob) {
  FlakySubmitService service(grpc::StatusCode::UNAVAILABLE, 2);
  ASSERT_NO_FATAL_FAILURE(Serve(&service));
  Recorded recorded;
  const std::string key = NewRandomUuid();
  absl::StatusOr<v1::SubmitBackfillResponse> response =
      client_->SubmitWithRetries(SubmitRequest(key), recorded.Options());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->backfill().id(), "bf-1");
  EXPECT_EQ(response->backfill().idempotency_key(), key);
  EXPECT_FALSE(response->created());  // the first attempt made it
  const std::vector<v1::SubmitBackfillRequest> received = service.received();
  ASSERT_EQ(received.size(), 3u);
  for (const v1::SubmitBackfillRequest& sent : received) {
    EXPECT_TRUE(MessageDifferencer::Equals(sent, SubmitRequest(key)))
        << sent.DebugString();
  }
  EXPECT_EQ(service.jobs(), 1u);
  EXPECT_EQ(recorded.sleeps.size(), 2u);
}

TEST_F(ClientSubmitWithRetriesTest, InvalidArgumentIsNotRetried) {
  FlakySubmitService service(grpc::StatusCode::INVALID_ARGUMENT, 100);
  ASSERT_NO_FATAL_FAILURE(Serve(&service));
  Recorded recorded;
  absl::StatusOr<v1::SubmitBackfillResponse> response =
      client_->SubmitWithRetries(SubmitRequest("k"), recorded.Options());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(service.received().size(), 1u);
  EXPECT_THAT(recorded.sleeps, IsEmpty());
}

TEST_F(ClientSubmitWithRetriesTest, GivesUpAfterMaxAttempts) {
  FlakySubmitService service(grpc::StatusCode::UNAVAILABLE, 100);
  ASSERT_NO_FATAL_FAILURE(Serve(&service));
  Recorded recorded;
  SubmitRetryOptions options = recorded.Options();
  options.max_attempts = 3;
  absl::StatusOr<v1::SubmitBackfillResponse> response =
      client_->SubmitWithRetries(SubmitRequest("k"), options);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(response.status().message(), "answer lost");
  EXPECT_EQ(service.received().size(), 3u);
  EXPECT_EQ(service.jobs(), 1u);
}

}  // namespace
}  // namespace client_submit_retry_test
}  // namespace backfill
