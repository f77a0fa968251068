// Runs the real backfillctl binary against an in-process fake
// BackfillService (tests/testing/backfillctl_fixture.h) for `policies`:
// the list shows each policy's rules, state, due partitions, frozen ones
// and last job; `check` evaluates without submitting unless --submit, one
// dataset or every policy; `pause` and `resume` send the dataset, the
// reason and who; what makes no sense together is a usage error before any
// RPC; a dataset without a policy is the server's NOT_FOUND.

#include <string>
#include <vector>

#include "backfill/v1/backfill.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/testing/backfillctl_fixture.h"

namespace backfill {
namespace client_backfillctl_policies_test {
namespace {

using testing::BackfillctlTest;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::RunResult;

TEST_F(BackfillctlTest, PoliciesListsEachPolicyWithWhatItsLastLookFound) {
  RunResult run = Run({"policies"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, IsEmpty());
  EXPECT_THAT(run.out, HasSubstr("DATASET"));
  EXPECT_THAT(run.out, HasSubstr("daily_revenue"));
  EXPECT_THAT(run.out, HasSubstr("window 90d, approval auto, every 5m"));
  EXPECT_THAT(run.out, HasSubstr("running"));
  EXPECT_THAT(run.out, HasSubstr("2: 2025-06-30,2025-09-10"));
  EXPECT_THAT(run.out, HasSubstr("bf-11 SUCCEEDED"));
  EXPECT_THAT(run.out,
              HasSubstr("frozen (frozen.before 2025-03-01): 2025-02-10"));
  EXPECT_THAT(run.out, HasSubstr("last evaluation: would submit"));
  EXPECT_EQ(service_.policy_lists(), 1);
  EXPECT_THAT(service_.evaluations(), IsEmpty());

  RunResult json = Run({"--json", "policies"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  v1::ListReplayPoliciesResponse parsed;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(json.out, &parsed).ok())
      << json.out;
  ASSERT_EQ(parsed.policies_size(), 1);
  EXPECT_EQ(parsed.policies(0).last_evaluation().frozen_partitions(0),
            "2025-02-10");
}

TEST_F(BackfillctlTest, CheckEvaluatesAndSubmitsOnlyWithSubmit) {
  RunResult look = Run({"policies", "check", "daily_revenue"});
  ASSERT_EQ(look.exit_code, 0) << look.err;
  EXPECT_THAT(look.out, HasSubstr("Due: 2: 2025-06-30,2025-09-10"));
  EXPECT_THAT(look.out, HasSubstr("Reason: replay policy of daily_revenue"));
  EXPECT_THAT(look.out, HasSubstr("Outcome: would submit"));
  RunResult act = Run({"policies", "check", "daily_revenue", "--submit"});
  ASSERT_EQ(act.exit_code, 0) << act.err;
  EXPECT_THAT(act.out, HasSubstr("Outcome: submitted bf-12"));
  // Every policy: listed, then each evaluated.
  RunResult all = Run({"policies", "check"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_THAT(all.out, HasSubstr("Replay policy of daily_revenue"));

  const std::vector<v1::EvaluateReplayPolicyRequest> evaluations =
      service_.evaluations();
  ASSERT_EQ(evaluations.size(), 3u);
  EXPECT_FALSE(evaluations[0].submit());
  EXPECT_TRUE(evaluations[1].submit());
  EXPECT_FALSE(evaluations[2].submit());
  for (const auto& e : evaluations) EXPECT_EQ(e.dataset(), "daily_revenue");
  EXPECT_EQ(service_.policy_lists(), 1);
}

TEST_F(BackfillctlTest, PauseAndResumeSendTheDatasetTheReasonAndWho) {
  RunResult pause = Run({"policies", "pause", "daily_revenue", "--reason",
                         "quarter close", "--requested-by", "alice"});
  ASSERT_EQ(pause.exit_code, 0) << pause.err;
  EXPECT_THAT(pause.out,
              HasSubstr("paused the replay policy of daily_revenue; nothing "
                        "is submitted for it until `backfillctl policies "
                        "resume daily_revenue`"));
  EXPECT_THAT(pause.out, HasSubstr("paused: paused by alice: quarter close"));
  RunResult resume =
      Run({"policies", "resume", "daily_revenue", "--requested-by", "bob"});
  ASSERT_EQ(resume.exit_code, 0) << resume.err;
  EXPECT_THAT(resume.out, HasSubstr("resumed the replay policy of "
                                    "daily_revenue"));

  ASSERT_EQ(service_.pauses().size(), 1u);
  EXPECT_EQ(service_.pauses()[0].dataset(), "daily_revenue");
  EXPECT_EQ(service_.pauses()[0].reason(), "quarter close");
  EXPECT_EQ(service_.pauses()[0].requested_by(), "alice");
  ASSERT_EQ(service_.resumes().size(), 1u);
  EXPECT_EQ(service_.resumes()[0].requested_by(), "bob");
}

TEST_F(BackfillctlTest, PolicyUsageErrorsAreRefusedBeforeAnyRpc) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"policies", "pause", "daily_revenue"}, "requires --reason"},
      {{"policies", "pause", "daily_revenue", "--reason", "  "},
       "requires --reason"},
      {{"policies", "resume"}, "policies resume needs the DATASET"},
      {{"policies", "check", "daily_revenue", "--reason", "x"},
       "--reason goes with `policies pause"},
      {{"policies", "resume", "daily_revenue", "--submit"},
       "--submit goes with `policies check`"},
      {{"policies", "restart", "daily_revenue"}, "restart"},
  };
  for (const Case& c : cases) {
    RunResult run = Run(c.args);
    EXPECT_EQ(run.exit_code, 2) << c.args[1] << ": " << run.err;
    EXPECT_THAT(run.err, HasSubstr(c.says)) << c.args[1];
  }
  EXPECT_EQ(service_.policy_lists(), 0);
  EXPECT_THAT(service_.evaluations(), IsEmpty());
  EXPECT_THAT(service_.pauses(), IsEmpty());
  EXPECT_THAT(service_.resumes(), IsEmpty());
}

TEST_F(BackfillctlTest, ADatasetWithoutAPolicyIsTheServersNotFound) {
  RunResult run = Run({"policies", "check", "orders"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("NOT_FOUND: dataset \"orders\" declares no "
                                 "replay policy"));
}

}  // namespace
}  // namespace client_backfillctl_policies_test
}  // namespace backfill
