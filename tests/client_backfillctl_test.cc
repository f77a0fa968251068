// Runs the real backfillctl binary (CLI11 parsing included) against an
// in-process fake BackfillService that records what it receives: list
// items and text arguments are sent exactly as typed or refused before any
// RPC, with a usage error (exit 2) naming the flag; every submit carries an
// idempotency key and is retried with it; pause, resume and retry send
// their RPCs; text from the server is escaped on the terminal; a mistyped
// flag or subcommand gets the closest one suggested.

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "backfill/v1/backfill.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/testing/backfillctl_fixture.h"

namespace backfill {
namespace client_backfillctl_test {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using testing::BackfillctlTest;
using testing::Decision;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::kUuidV4;
using testing::Lines;
using ::testing::MatchesRegex;
using ::testing::Not;
using testing::Plus;
using testing::RunResult;
using ::testing::StartsWith;
using testing::ValueOf;

TEST_F(BackfillctlTest, HealthReportsTheServiceStatusInItsExitCode) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  ASSERT_NE(health, nullptr);
  health->SetServingStatus("backfill.v1.BackfillService", true);
  RunResult serving = Run({"health"});
  EXPECT_EQ(serving.exit_code, 0) << serving.err;
  EXPECT_EQ(serving.out, "SERVING\n");

  health->SetServingStatus("backfill.v1.BackfillService", false);
  RunResult not_serving = Run({"health"});
  EXPECT_EQ(not_serving.exit_code, 1);
  EXPECT_EQ(not_serving.out, "NOT_SERVING\n");
  // Alive though not serving.
  RunResult answering = Run({"health", "--answering"});
  EXPECT_EQ(answering.exit_code, 0) << answering.err;
  EXPECT_EQ(answering.out, "NOT_SERVING\n");
  // Health sends nothing to the backfill service itself.
  EXPECT_THAT(service_.requests(), IsEmpty());
}

TEST_F(BackfillctlTest, HealthFailsWhenNobodyAnswers) {
  server_->Shutdown();
  RunResult gone = Run({"health", "--answering"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr("UNAVAILABLE"));
}

TEST_F(BackfillctlTest, EmptyPartitionItemsAreRefusedBeforeAnyRpc) {
  struct Case {
    std::string value;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"a,,b", "--partitions: item 2 is empty (\"a,,b\")"},
      {"a,", "--partitions: item 2 is empty (\"a,\")"},
      {",a", "--partitions: item 1 is empty (\",a\")"},
      // CLI11's "[...]" list syntax would drop the empty item too.
      {"[a,,b]", "--partitions: item 2 is empty (\"[a,,b]\")"},
  };
  for (const Case& c : cases) {
    for (const std::string command : {"plan", "submit"}) {
      std::vector<std::string> args = {command, "daily_revenue", "--partitions",
                                       c.value};
      if (command == "submit") args.insert(args.end(), {"--reason", "fix"});
      RunResult run = Run(args);
      EXPECT_EQ(run.exit_code, 2)
          << command << " " << c.value << ": " << run.err;
      EXPECT_EQ(run.err, "backfillctl: " + c.message + "\n") << command;
      EXPECT_THAT(run.out, IsEmpty());
    }
  }
  EXPECT_THAT(service_.requests(), IsEmpty());
}

TEST_F(BackfillctlTest, KeysAreSentAsTypedAndBadItemsRefused) {
  RunResult run = Run({"plan", "daily_revenue", "--from", "2025-03-01", "--to",
                       "2025-03-02", "--keys", "c1,,c2"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_EQ(run.err, "backfillctl: --keys: item 2 is empty (\"c1,,c2\")\n");
  run = Run({"submit", "daily_revenue", "--from", "2025-03-01", "--to",
             "2025-03-02", "--keys", "c1, c2", "--reason", "fix"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_THAT(run.err, HasSubstr("--keys: item 2 \" c2\" has leading or "
                                 "trailing whitespace"));
  run = Run({"plan", "daily_revenue", "--from", "2025-03-01", "--to",
             "2025-03-02", "--keys", "c\xff"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_THAT(run.err, HasSubstr("--keys is not valid UTF-8"));
  EXPECT_THAT(service_.requests(), IsEmpty());

  run = Run({"plan", "daily_revenue", "--from", "2025-03-01", "--to",
             "2025-03-02", "--keys", "c2,new york", "--keys", "c2"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  std::vector<v1::BackfillRequest> requests = service_.requests();
  ASSERT_EQ(requests.size(), 1u);
  // Sent as typed: the server sorts and removes duplicates.
  EXPECT_THAT(requests[0].keys(), ElementsAre("c2", "new york", "c2"));
}

TEST_F(BackfillctlTest, PartitionsAreNeverTrimmedButRefused) {
  RunResult run = Run({"plan", "daily_revenue", "--partitions", "2025-03-01 "});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_EQ(run.err,
            "backfillctl: --partitions: item 1 \"2025-03-01 \" has leading or "
            "trailing whitespace\n");
  run = Run({"submit", "daily_revenue", "--partitions", "2025-03-01",
             "--partitions", "2025-03-02,\t2025-03-03", "--reason", "fix"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_EQ(run.err,
            "backfillctl: --partitions: item 3 \"\\t2025-03-03\" has leading "
            "or trailing whitespace\n");
  EXPECT_THAT(service_.requests(), IsEmpty());

  // A well-formed list goes out item for item, as typed.
  run = Run({"plan", "daily_revenue", "--partitions", "2025-03-01,new york",
             "--partitions", "2025-03-05"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(SentPartitions(),
              ElementsAre("2025-03-01", "new york", "2025-03-05"));
}

TEST_F(BackfillctlTest, TextArgumentsThatAreNotUtf8AreRefusedBeforeAnyRpc) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"submit", "daily_revenue", "--from", "2025-03-01", "--to", "2025-03-02",
        "--reason", "fix\xff"},
       "--reason is not valid UTF-8 (byte 0xff at offset 3)"},
      {{"submit", "daily_revenue", "--from", "2025-03-01", "--to", "2025-03-02",
        "--reason", "fix", "--ticket", "DATA-\xc3"},
       "--ticket is not valid UTF-8 (byte 0xc3 at offset 5)"},
      {{"plan", "daily_\xe9", "--from", "2025-03-01", "--to", "2025-03-02"},
       "DATASET is not valid UTF-8 (byte 0xe9 at offset 6)"},
      {{"plan", "daily_revenue", "--partitions", "2025-03-01,\xc0\xaf"},
       "--partitions is not valid UTF-8 (byte 0xc0 at offset 11)"},
      {{"cancel", "bf-1", "--reason", "stop\xfe"},
       "--reason is not valid UTF-8 (byte 0xfe at offset 4)"},
      {{"status", "bf-\xff"}, "JOB is not valid UTF-8 (byte 0xff at offset 3)"},
  };
  for (const Case& c : cases) {
    RunResult run = Run(c.args);
    EXPECT_EQ(run.exit_code, 2) << c.message << ": " << run.err;
    EXPECT_EQ(run.err,
              "backfillctl: " + c.message + "; text arguments must be UTF-8\n");
  }
  EXPECT_THAT(service_.requests(), IsEmpty());
}

// -------------------------------------------------- submit: idempotency key

const std::vector<std::string> kSubmit = {
    "submit", "daily_revenue", "--from",   "2025-03-01",
    "--to",   "2025-03-08",    "--reason", "fix refunds"};

TEST_F(BackfillctlTest, SubmitSendsARandomUuidKeyWhenNoneIsGiven) {
  RunResult first = Run(kSubmit);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  RunResult second = Run(kSubmit);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const std::vector<v1::SubmitBackfillRequest> submits = service_.submits();
  ASSERT_EQ(submits.size(), 2u);
  EXPECT_THAT(submits[0].idempotency_key(), MatchesRegex(kUuidV4));
  EXPECT_THAT(submits[1].idempotency_key(), MatchesRegex(kUuidV4));
  EXPECT_NE(submits[0].idempotency_key(), submits[1].idempotency_key());
  // Two submits, two jobs; the key is shown with the job.
  EXPECT_THAT(first.out, StartsWith("submitted backfill bf-1\n"));
  EXPECT_THAT(second.out, StartsWith("submitted backfill bf-2\n"));
  EXPECT_EQ(ValueOf(first.out, "Idempotency"), submits[0].idempotency_key());
  EXPECT_THAT(first.err, IsEmpty());
}

TEST_F(BackfillctlTest, SubmitRetriesALostAnswerWithTheSameKey) {
  service_.set_lost_submits(1);
  RunResult run = Run(kSubmit);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<v1::SubmitBackfillRequest> submits = service_.submits();
  ASSERT_EQ(submits.size(), 2u);
  const std::string key = submits[0].idempotency_key();
  EXPECT_THAT(key, MatchesRegex(kUuidV4));
  // The same request, key included, both times.
  EXPECT_TRUE(MessageDifferencer::Equals(submits[0], submits[1]))
      << submits[1].DebugString();
  // One line on stderr for the retry, naming the status and the key.
  EXPECT_EQ(run.err,
            "backfillctl: submit attempt 1 of 5 failed (UNAVAILABLE: "
            "connection reset); retrying in 200ms with the same idempotency "
            "key \"" +
                key + "\"\n");
  // The job the first attempt made, not a second one.
  EXPECT_THAT(run.out,
              StartsWith("submitted backfill bf-1 (by an earlier attempt "
                         "whose answer was lost)\n"));
  EXPECT_EQ(ValueOf(run.out, "Job"), "bf-1");
}

TEST_F(BackfillctlTest, SubmitRetriesWithTheGivenKey) {
  service_.set_lost_submits(2);
  RunResult run =
      Run(Plus(kSubmit, {"--idempotency-key", "incident-42", "--json"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<v1::SubmitBackfillRequest> submits = service_.submits();
  ASSERT_EQ(submits.size(), 3u);
  for (const v1::SubmitBackfillRequest& submit : submits) {
    EXPECT_EQ(submit.idempotency_key(), "incident-42");
  }
  EXPECT_EQ(Lines(run.err).size(), 2u) << run.err;
  EXPECT_THAT(run.err,
              HasSubstr("backfillctl: submit attempt 2 of 5 failed "
                        "(UNAVAILABLE: connection reset); retrying in 400ms "
                        "with the same idempotency key \"incident-42\"\n"));
  // --json: the answer as the server gave it.
  v1::SubmitBackfillResponse response;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(run.out, &response).ok())
      << run.out;
  EXPECT_EQ(response.backfill().id(), "bf-1");
  EXPECT_FALSE(response.created());
}

TEST_F(BackfillctlTest, SubmitGivesUpAfterFiveAttemptsNamingTheKey) {
  service_.set_lost_submits(100);
  RunResult run = Run(kSubmit);
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_THAT(run.out, IsEmpty());
  const std::vector<v1::SubmitBackfillRequest> submits = service_.submits();
  ASSERT_EQ(submits.size(), 5u);
  const std::string key = submits[0].idempotency_key();
  for (const v1::SubmitBackfillRequest& submit : submits) {
    EXPECT_EQ(submit.idempotency_key(), key);
  }
  const std::vector<std::string> lines = Lines(run.err);
  ASSERT_EQ(lines.size(), 5u) << run.err;
  EXPECT_THAT(lines[3], HasSubstr("attempt 4 of 5 failed (UNAVAILABLE"));
  EXPECT_THAT(lines[3], HasSubstr("retrying in 1.6s"));
  EXPECT_THAT(lines[4], StartsWith("backfillctl: UNAVAILABLE: connection "
                                   "reset; is backfilld running at "));
  EXPECT_THAT(lines[4], HasSubstr("gave up after 5 attempts"));
  EXPECT_THAT(lines[4], HasSubstr("--idempotency-key " + key));
}

TEST_F(BackfillctlTest, SubmitSendsNoWaitPriorityAndMaxParallel) {
  RunResult run = Run(
      Plus(kSubmit, {"--no-wait", "--priority", "-5", "--max-parallel", "3"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  run = Run(Plus(kSubmit, {"--priority=1000"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<v1::SubmitBackfillRequest> submits = service_.submits();
  ASSERT_EQ(submits.size(), 2u);
  EXPECT_TRUE(submits[0].no_wait());
  EXPECT_EQ(submits[0].request().priority(), -5);
  EXPECT_EQ(submits[0].request().max_parallel(), 3);
  EXPECT_FALSE(submits[1].no_wait());
  EXPECT_EQ(submits[1].request().priority(), 1000);
  EXPECT_EQ(submits[1].request().max_parallel(), 0);
}

TEST_F(BackfillctlTest, AffectedByIsSentAsTypedAndExcludesOtherScopes) {
  const std::string predicate = "orders:  refund > 0 AND note = 'a,b' ";
  RunResult run = Run({"plan", "daily_revenue", "--affected-by", predicate});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  run = Run({"submit", "daily_revenue", "--affected-by", predicate,
             "--no-downstream", "--reason", "fix"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<v1::BackfillRequest> sent = service_.requests();
  ASSERT_EQ(sent.size(), 2u);
  for (const v1::BackfillRequest& request : sent) {
    EXPECT_EQ(request.affected_by(), predicate);
    EXPECT_TRUE(request.from_partition().empty());
    EXPECT_TRUE(request.to_partition().empty());
    EXPECT_THAT(request.partitions(), IsEmpty());
  }
  EXPECT_TRUE(sent[1].exclude_downstream());

  for (const std::vector<std::string>& scope :
       std::vector<std::vector<std::string>>{
           {"--from", "2025-03-01", "--to", "2025-03-02"},
           {"--partitions", "2025-03-01"}}) {
    std::vector<std::string> args = {"plan", "daily_revenue", "--affected-by",
                                     "orders: refund > 0"};
    args.insert(args.end(), scope.begin(), scope.end());
    run = Run(args);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_THAT(run.err, HasSubstr("--affected-by"));
  }
  EXPECT_EQ(service_.requests().size(), 2u);
}

TEST_F(BackfillctlTest, AutoIsSentAloneAndExcludesOtherScopes) {
  RunResult run = Run({"plan", "daily_revenue", "--auto"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  run = Run({"submit", "daily_revenue", "--auto", "--reason", "stale"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<v1::BackfillRequest> sent = service_.requests();
  ASSERT_EQ(sent.size(), 2u);
  for (const v1::BackfillRequest& request : sent) {
    EXPECT_TRUE(request.auto_detect());
    EXPECT_TRUE(request.from_partition().empty());
    EXPECT_THAT(request.partitions(), IsEmpty());
    EXPECT_TRUE(request.affected_by().empty());
  }
  for (const std::vector<std::string>& scope :
       std::vector<std::vector<std::string>>{
           {"--from", "2025-03-01", "--to", "2025-03-02"},
           {"--partitions", "2025-03-01"},
           {"--affected-by", "orders: refund > 0"}}) {
    std::vector<std::string> args = {"plan", "daily_revenue", "--auto"};
    args.insert(args.end(), scope.begin(), scope.end());
    run = Run(args);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_THAT(run.err, HasSubstr("--auto"));
  }
  EXPECT_EQ(service_.requests().size(), 2u);
}

TEST_F(BackfillctlTest, OutOfRangePriorityAndMaxParallelAreUsageErrors) {
  struct Case {
    std::vector<std::string> flags;
    std::string err;
  };
  const std::vector<Case> cases = {
      {{"--priority", "1001"},
       "backfillctl: --priority 1001 is out of range: use -1000..1000 "
       "(default 0; higher runs first)\n"},
      {{"--priority=-1001"},
       "backfillctl: --priority -1001 is out of range: use -1000..1000 "
       "(default 0; higher runs first)\n"},
      {{"--max-parallel", "0"},
       "backfillctl: --max-parallel 0 is out of range: use 1 or more (leave "
       "it out for no limit of the job's own)\n"},
      {{"--max-parallel=-2"},
       "backfillctl: --max-parallel -2 is out of range: use 1 or more (leave "
       "it out for no limit of the job's own)\n"},
  };
  for (const Case& c : cases) {
    RunResult run = Run(Plus(kSubmit, c.flags));
    EXPECT_EQ(run.exit_code, 2) << c.flags[0] << ": " << run.err;
    EXPECT_EQ(run.err, c.err);
    EXPECT_THAT(run.out, IsEmpty());
  }
  RunResult run = Run(Plus(kSubmit, {"--priority", "high"}));
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_THAT(run.err, HasSubstr("--priority"));
  EXPECT_THAT(service_.submits(), IsEmpty());
}

TEST_F(BackfillctlTest, ATypoGetsTheClosestFlagOrSubcommandSuggested) {
  RunResult run = Run(Plus(kSubmit, {"--wiat"}));
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_THAT(run.err, HasSubstr("--wiat; did you mean --wait? (see "
                                 "backfillctl submit --help)"));
  run = Run({"stauts", "bf-7"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_EQ(run.err,
            "backfillctl: unknown subcommand \"stauts\"; did you mean status? "
            "(see backfillctl --help)\n");
  // Nothing close: no suggestion.
  run = Run({"status", "bf-7", "--bogus"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_THAT(run.err, Not(HasSubstr("did you mean")));
  EXPECT_THAT(service_.submits(), IsEmpty());
}

}  // namespace
}  // namespace client_backfillctl_test
}  // namespace backfill
