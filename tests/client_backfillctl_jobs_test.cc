// Runs the real backfillctl binary against an in-process fake
// BackfillService (tests/testing/backfillctl_fixture.h): job decisions
// send their RPCs and print the job, rollback and approve send what was
// typed, list and partitions follow pages up to their limits, diff prints
// every page, and text from the server is escaped on the terminal.

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
namespace client_backfillctl_jobs_test {
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

// ----------------------------------------------- pause, resume, retry, cancel

TEST_F(BackfillctlTest, JobDecisionsSendTheirRpc) {
  struct Case {
    std::string command;
    std::string method;
    std::string state;
  };
  const std::vector<Case> cases = {
      {"pause", "PauseBackfill", "PAUSED"},
      {"resume", "ResumeBackfill", "QUEUED"},
      {"retry", "RetryBackfill", "QUEUED"},
      {"cancel", "CancelBackfill", "CANCELLED"},
  };
  for (const Case& c : cases) {
    RunResult run = Run({c.command, "bf-7", "--reason", "disk maintenance"});
    ASSERT_EQ(run.exit_code, 0) << c.command << ": " << run.err;
    EXPECT_THAT(run.err, IsEmpty());
    // Printed as `status` prints the job.
    EXPECT_EQ(ValueOf(run.out, "Job"), "bf-7");
    EXPECT_EQ(ValueOf(run.out, "State"), c.state);
    EXPECT_EQ(ValueOf(run.out, "Message"), c.method + ": disk maintenance");
  }
  RunResult bare = Run({"pause", "bf-8"});
  ASSERT_EQ(bare.exit_code, 0) << bare.err;
  const std::vector<Decision> decisions = service_.decisions();
  ASSERT_EQ(decisions.size(), 5u);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(decisions[i].method, cases[i].method);
    EXPECT_EQ(decisions[i].id, "bf-7");
    EXPECT_EQ(decisions[i].reason, "disk maintenance");
  }
  EXPECT_EQ(decisions[4].method, "PauseBackfill");
  EXPECT_EQ(decisions[4].id, "bf-8");
  EXPECT_EQ(decisions[4].reason, "");
  EXPECT_THAT(service_.submits(), IsEmpty());
}

TEST_F(BackfillctlTest, JobDecisionsPrintOneJsonDocument) {
  for (const std::string command : {"pause", "resume", "retry"}) {
    RunResult run = Run({command, "bf-7", "--json"});
    ASSERT_EQ(run.exit_code, 0) << command << ": " << run.err;
    v1::Backfill job;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &job).ok())
        << run.out;
    EXPECT_EQ(job.id(), "bf-7");
    // Proto field names, every field present.
    EXPECT_THAT(run.out, HasSubstr("\"idempotency_key\": \"\""));
    EXPECT_THAT(run.out, HasSubstr("\"rows_written\": \"0\""));
    EXPECT_THAT(run.out, Not(HasSubstr("rowsWritten")));
  }
}

TEST_F(BackfillctlTest, JobDecisionErrorsExitOneLikeCancel) {
  for (const std::string command : {"cancel", "pause", "resume", "retry"}) {
    RunResult run = Run({command, "bf-9", "--json"});
    EXPECT_EQ(run.exit_code, 1) << command;
    EXPECT_EQ(run.err,
              "backfillctl: FAILED_PRECONDITION: job bf-9 is SUCCEEDED; it "
              "cannot be changed\n")
        << command;
    EXPECT_THAT(run.out, IsEmpty()) << command;
    run = Run({command, "bf-404"});
    EXPECT_EQ(run.exit_code, 1) << command;
    EXPECT_EQ(run.err, "backfillctl: NOT_FOUND: no job bf-404\n") << command;
  }
}

TEST_F(BackfillctlTest, JobDecisionsCheckTheirArguments) {
  for (const std::string command : {"pause", "resume", "retry"}) {
    RunResult run = Run({command});
    EXPECT_EQ(run.exit_code, 2) << command << ": " << run.err;
    EXPECT_THAT(run.err, HasSubstr("JOB")) << command;
    run = Run({command, "bf-7", "--reason", "stop\xfe"});
    EXPECT_EQ(run.exit_code, 2) << command << ": " << run.err;
    EXPECT_EQ(run.err,
              "backfillctl: --reason is not valid UTF-8 (byte 0xfe at offset "
              "4); text arguments must be UTF-8\n");
  }
  EXPECT_THAT(service_.decisions(), IsEmpty());
}

TEST_F(BackfillctlTest, RollbackSendsReasonWhoAndForceAndPrintsTheJob) {
  RunResult run = Run({"rollback", "bf-7", "--reason", "wrong prices",
                       "--requested-by", "ann"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, IsEmpty());
  EXPECT_EQ(ValueOf(run.out, "State"), "ROLLED_BACK");
  EXPECT_EQ(ValueOf(run.out, "Rolled back"),
            "2025-01-01T00:00:00Z by ann: wrong prices  (3 partitions, 12 "
            "rows restored)");
  run = Run({"rollback", "bf-7", "--reason", "again", "--force", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  v1::Backfill job;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &job).ok())
      << run.out;
  EXPECT_EQ(job.state(), v1::BACKFILL_STATE_ROLLED_BACK);
  EXPECT_THAT(run.out, HasSubstr("\"also_rolled_back\": ["));
  EXPECT_THAT(run.out, HasSubstr("\"rows_restored\": \"12\""));
  const std::vector<v1::RollbackBackfillRequest> sent = service_.rollbacks();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].id(), "bf-7");
  EXPECT_EQ(sent[0].reason(), "wrong prices");
  EXPECT_EQ(sent[0].requested_by(), "ann");
  EXPECT_FALSE(sent[0].force());
  EXPECT_TRUE(sent[1].force());
  EXPECT_FALSE(sent[1].requested_by().empty());  // the user's name
}

TEST_F(BackfillctlTest, RollbackNeedsAReasonAndReportsRefusals) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"rollback", "bf-7"}, {"rollback", "bf-7", "--reason", " "}}) {
    RunResult run = Run(args);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_THAT(run.err, HasSubstr("rollback requires --reason"));
  }
  RunResult run = Run({"rollback"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_THAT(service_.rollbacks(), IsEmpty());
  run = Run({"rollback", "bf-9", "--reason", "x"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err,
            "backfillctl: FAILED_PRECONDITION: job bf-9 is SUCCEEDED; it "
            "cannot be changed\n");
  run = Run({"rollback", "bf-404", "--reason", "x"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err, "backfillctl: NOT_FOUND: no job bf-404\n");
}

TEST_F(BackfillctlTest, TextFromTheServerIsEscapedOnTheTerminal) {
  RunResult run = Run({"pause", "bf-7", "--reason", "x\x1b[2J\ny"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.find('\x1b'), std::string::npos) << run.out;
  EXPECT_EQ(ValueOf(run.out, "Message"), "PauseBackfill: x\\x1b[2J\\ny");
  // JSON is exact: its own escapes, the text unchanged.
  run = Run({"pause", "bf-7", "--reason", "x\x1b[2J\ny", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.find('\x1b'), std::string::npos) << run.out;
  v1::Backfill job;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &job).ok());
  EXPECT_EQ(job.message(), "PauseBackfill: x\x1b[2J\ny");

  run = Run({"list"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.find('\x1b'), std::string::npos) << run.out;
  EXPECT_THAT(run.out, HasSubstr("late\\x1b[2J\\ndata"));
}

// ------------------------------------------------------------- list --state

TEST_F(BackfillctlTest, StateItemsAreSplitStrictly) {
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const std::vector<Case> cases = {
      {{"--state", "running,,failed"},
       "backfillctl: --state: item 2 is empty (\"running,,failed\")\n"},
      {{"--state", "running,"},
       "backfillctl: --state: item 2 is empty (\"running,\")\n"},
      {{"--state", "running", "--state", ""},
       "backfillctl: --state: item 2 is empty (\"\")\n"},
      {{"--state", "[running,,failed]"},
       "backfillctl: --state: item 2 is empty (\"[running,,failed]\")\n"},
      {{"--state", "running, failed"},
       "backfillctl: --state: item 2 \" failed\" has leading or trailing "
       "whitespace\n"},
      {{"--state", "running,nope"},
       "backfillctl: --state: unknown state \"nope\"; known states: QUEUED, "
       "RUNNING, VALIDATING, AWAITING_APPROVAL, PUBLISHING, CONFIRMING, "
       "SUCCEEDED, FAILED, CANCELLED, PAUSED, ROLLED_BACK, "
       "VALIDATION_FAILED, DOWNSTREAM_UNHEALTHY\n"},
  };
  for (const Case& c : cases) {
    RunResult run = Run(Plus({"list"}, c.args));
    EXPECT_EQ(run.exit_code, 2) << c.args[1] << ": " << run.err;
    EXPECT_EQ(run.err, c.err);
    EXPECT_THAT(run.out, IsEmpty());
  }
  EXPECT_THAT(service_.lists(), IsEmpty());

  RunResult run =
      Run({"list", "--state", "running,FAILED", "--state", "queued"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<v1::ListBackfillsRequest> lists = service_.lists();
  ASSERT_EQ(lists.size(), 1u);
  EXPECT_THAT(lists[0].states(),
              ElementsAre(v1::BACKFILL_STATE_RUNNING, v1::BACKFILL_STATE_FAILED,
                          v1::BACKFILL_STATE_QUEUED));
}

TEST_F(BackfillctlTest, ApproveSendsReasonOverrideAndWhoAndPrintsTheJob) {
  RunResult run = Run({"approve", "bf-7", "--reason", "diff reviewed",
                       "--override", "--approved-by", "alice"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("approved backfill bf-7; it is PUBLISHING"));
  EXPECT_EQ(ValueOf(run.out, "State"), "PUBLISHING");
  EXPECT_THAT(ValueOf(run.out, "Approved"), HasSubstr("by alice"));
  EXPECT_THAT(ValueOf(run.out, "Approved"),
              HasSubstr("OVERRIDING the failed validation"));
  EXPECT_THAT(ValueOf(run.out, "Approved"), HasSubstr("diff reviewed"));
  std::vector<v1::ApproveBackfillRequest> sent = service_.approvals();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].id(), "bf-7");
  EXPECT_EQ(sent[0].reason(), "diff reviewed");
  EXPECT_TRUE(sent[0].override_validation());
  EXPECT_EQ(sent[0].approved_by(), "alice");

  // Without --override, and by default the user's name.
  RunResult plain = Run({"approve", "bf-8", "--reason", "ok"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  sent = service_.approvals();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_FALSE(sent[1].override_validation());
  EXPECT_FALSE(sent[1].approved_by().empty());

  // --json: one document with the approval.
  RunResult json = Run({"approve", "bf-8", "--reason", "ok", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  v1::Backfill job;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &job).ok())
      << json.out;
  EXPECT_EQ(job.approval().reason(), "ok");
  EXPECT_THAT(json.out, HasSubstr("\"override_validation\": false"));

  // A reason is required; nothing is sent without one.
  RunResult missing = Run({"approve", "bf-8"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("--reason"));
  RunResult blank = Run({"approve", "bf-8", "--reason", "  "});
  EXPECT_EQ(blank.exit_code, 2);
  EXPECT_EQ(service_.approvals().size(), 3u);
  // Server refusals exit 1 with the server's message.
  RunResult refused = Run({"approve", "bf-9", "--reason", "ok"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("FAILED_PRECONDITION: job bf-9"));
}

TEST_F(BackfillctlTest, DiffPrintsEveryPageAsATableWithSampleRows) {
  RunResult run = Run({"diff", "bf-7", "--samples", "2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::string> lines = Lines(run.out);
  EXPECT_THAT(lines[0], HasSubstr("Diff of bf-7 (AWAITING_APPROVAL)"));
  EXPECT_THAT(run.out,
              HasSubstr("daily_revenue  rows matched by primary key (ds, "
                        "region)"));
  EXPECT_THAT(run.out, HasSubstr("3 partitions, 1 with changes; rows 12 -> 12: "
                                 "+0 added, -0 removed, ~2 changed, 10 "
                                 "unchanged; revenue -12.5 (1000 -> 987.5)"));
  EXPECT_THAT(lines, ::testing::Contains(
                         "PARTITION   BEFORE  AFTER  ADDED  REMOVED  CHANGED  "
                         "UNCHANGED  revenue delta"));
  EXPECT_THAT(lines,
              ::testing::Contains(
                  "2025-06-01  4       4      0      0        2        2      "
                  "    -12.5"));
  EXPECT_THAT(lines,
              ::testing::Contains(
                  "2025-06-03  4       4      0      0        0        4 "
                  "         0"));
  EXPECT_THAT(run.out, HasSubstr("Sample rows (values as SQL literals):"));
  // Only the values that differ; server text escaped.
  EXPECT_THAT(run.out, HasSubstr("    changed  ('2025-06-01', 'north\\x1b[2J')"
                                 "  revenue 100 -> 87.5\n"));
  EXPECT_THAT(run.out, Not(HasSubstr("\x1b")));
  std::vector<v1::DiffBackfillRequest> sent = service_.diffs();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].sample_rows(), 2);
  EXPECT_TRUE(sent[0].has_sample_rows());
  EXPECT_EQ(sent[0].page_token(), "");
  EXPECT_EQ(sent[1].page_token(), "1");

  // --json: the pages merged into one document.
  RunResult json =
      Run({"diff", "bf-7", "--json", "--dataset", "daily_revenue"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  v1::DiffBackfillResponse merged;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(json.out, &merged).ok())
      << json.out;
  EXPECT_EQ(merged.partitions_size(), 3);
  EXPECT_EQ(merged.next_page_token(), "");
  EXPECT_EQ(service_.diffs()[2].dataset(), "daily_revenue");
  EXPECT_EQ(service_.diffs()[2].sample_rows(), 3);  // the default

  RunResult bad = Run({"diff", "bf-7", "--samples", "11"});
  EXPECT_EQ(bad.exit_code, 2);
  RunResult unknown = Run({"diff", "bf-404"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("NOT_FOUND"));
}

TEST_F(BackfillctlTest, ListFollowsPagesUpToTheLimit) {
  service_.set_listed_jobs(120);
  // The default: the newest 50, in basic view.
  RunResult run = Run({"list"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(Lines(run.out).size(), 1u + 50);  // the header and 50 jobs
  EXPECT_THAT(Lines(run.out)[1], StartsWith("bf-120 "));
  EXPECT_THAT(Lines(run.out).back(), StartsWith("bf-71 "));
  EXPECT_THAT(run.err, HasSubstr("the newest 50 jobs are shown; more match "
                                 "(--limit N or --all for more)"));
  std::vector<v1::ListBackfillsRequest> lists = service_.lists();
  ASSERT_EQ(lists.size(), 2u);  // 30 + 20
  EXPECT_EQ(lists[0].page_size(), 50);
  EXPECT_EQ(lists[0].page_token(), "");
  EXPECT_EQ(lists[0].view(), v1::BACKFILL_VIEW_BASIC);
  EXPECT_EQ(lists[1].page_size(), 20);
  EXPECT_EQ(lists[1].page_token(), "91");

  // --limit: as many as asked, over as many pages as it takes.
  run = Run({"list", "--limit", "70", "--dataset", "daily_revenue", "--state",
             "succeeded"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(Lines(run.out).size(), 1u + 70);
  lists = service_.lists();
  ASSERT_EQ(lists.size(), 2u + 3);
  for (size_t i = 2; i < lists.size(); ++i) {
    EXPECT_EQ(lists[i].dataset(), "daily_revenue");
    EXPECT_THAT(lists[i].states(), ElementsAre(v1::BACKFILL_STATE_SUCCEEDED));
  }
  EXPECT_EQ(lists[2].page_size(), 70);
  EXPECT_EQ(lists[3].page_size(), 40);
  EXPECT_EQ(lists[4].page_size(), 10);

  // --all: every job, pages of 1000 asked for; nothing more to say.
  run = Run({"list", "--all", "--full", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, IsEmpty());
  v1::ListBackfillsResponse all;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &all).ok())
      << run.out;
  ASSERT_EQ(all.backfills_size(), 120);
  EXPECT_EQ(all.backfills(0).id(), "bf-120");
  EXPECT_EQ(all.backfills(119).id(), "bf-1");
  EXPECT_EQ(all.next_page_token(), "");
  lists = service_.lists();
  ASSERT_EQ(lists.size(), 5u + 4);
  for (size_t i = 5; i < lists.size(); ++i) {
    EXPECT_EQ(lists[i].page_size(), 1000);
    EXPECT_EQ(lists[i].view(), v1::BACKFILL_VIEW_FULL);
  }

  // Fewer jobs than the limit: no note.
  run = Run({"list", "--limit", "500"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(Lines(run.out).size(), 1u + 120);
  EXPECT_THAT(run.err, IsEmpty());
}

TEST_F(BackfillctlTest, ListLimitAndAllAreChecked) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"list", "--limit", "-1"},
           {"list", "--limit", "x"},
           {"list", "--all", "--limit", "5"}}) {
    RunResult run = Run(args);
    EXPECT_EQ(run.exit_code, 2) << args.back() << ": " << run.err;
    EXPECT_THAT(run.out, IsEmpty());
  }
  EXPECT_THAT(service_.lists(), IsEmpty());
}

TEST_F(BackfillctlTest, PartitionsPagesThroughAJobsPartitions) {
  RunResult run =
      Run({"partitions", "bf-7", "--dataset", "daily_revenue", "--state",
           "failed,PUBLISHED", "--state", "partition_state_skipped"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<v1::ListPartitionsRequest> lists =
      service_.partition_lists();
  ASSERT_EQ(lists.size(), 3u);  // 2 + 2 + 1
  for (const v1::ListPartitionsRequest& r : lists) {
    EXPECT_EQ(r.backfill_id(), "bf-7");
    EXPECT_EQ(r.dataset(), "daily_revenue");
    EXPECT_EQ(r.page_size(), 1000);
    EXPECT_THAT(r.states(), ElementsAre(v1::PARTITION_STATE_FAILED,
                                        v1::PARTITION_STATE_PUBLISHED,
                                        v1::PARTITION_STATE_SKIPPED));
  }
  EXPECT_EQ(lists[0].page_token(), "");
  EXPECT_EQ(lists[1].page_token(), "3");
  EXPECT_EQ(lists[2].page_token(), "5");
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_EQ(lines.size(), 1u + 5 + 1) << run.out;
  EXPECT_THAT(lines[0], StartsWith("DATASET        PARTITION   STATE"));
  EXPECT_THAT(lines[3], HasSubstr("2025-06-03  FAILED"));
  EXPECT_THAT(lines[3], HasSubstr("disk \\x1b[2Jfull"));  // escaped
  EXPECT_EQ(lines.back(), "5 partitions");

  run = Run({"--json", "partitions", "bf-7"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  v1::ListPartitionsResponse all;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(run.out, &all).ok())
      << run.out;
  ASSERT_EQ(all.partitions_size(), 5);
  EXPECT_EQ(all.partitions(2).state(), v1::PARTITION_STATE_FAILED);
  EXPECT_EQ(all.partitions(2).last_error(), "disk \x1b[2Jfull");
  EXPECT_EQ(all.next_page_token(), "");
  EXPECT_THAT(run.out, HasSubstr("\"last_error\""));  // proto field names

  run = Run({"partitions", "bf-404"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("NOT_FOUND: no job bf-404"));
}

TEST_F(BackfillctlTest, PartitionsChecksItsArgumentsBeforeAnyRpc) {
  RunResult run = Run({"partitions", "bf-7", "--state", "staged,nope"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "backfillctl: --state: unknown partition state \"nope\"; known "
            "states: PENDING, RUNNING, STAGED, PUBLISHED, FAILED, CANCELLED, "
            "UNCHANGED, SKIPPED\n");
  run = Run({"partitions", "bf-7", "--state", "staged,,failed"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--state: item 2 is empty"));
  run = Run({"partitions"});
  EXPECT_EQ(run.exit_code, 2);
  run = Run({"partitions", "bf-7", "--dataset", "\xff"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--dataset is not valid UTF-8"));
  EXPECT_THAT(service_.partition_lists(), IsEmpty());
}

}  // namespace
}  // namespace client_backfillctl_jobs_test
}  // namespace backfill
