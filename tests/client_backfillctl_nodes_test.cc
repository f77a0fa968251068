// Runs the real backfillctl binary against an in-process fake
// BackfillService (tests/testing/backfillctl_fixture.h) for `nodes`: the
// replicas of a group and of a daemon alone printed as the format unit
// renders them, --json printing the answer's canonical JSON, and the
// server's UNAVAILABLE as a failure on stderr.

#include <string>

#include "absl/status/statusor.h"
#include "backfill/v1/backfill.pb.h"
#include "client/cli_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/testing/backfillctl_fixture.h"
#include "tests/testing/cli_format_samples.h"

namespace backfill {
namespace client_backfillctl_nodes_test {
namespace {

using ::backfill::cli::format_testing::AloneNode;
using ::backfill::cli::format_testing::GroupNodes;
using ::backfill::cli::format_testing::kAloneNodeText;
using ::backfill::cli::format_testing::kGroupNodesText;
using ::backfill::testing::BackfillctlTest;
using ::backfill::testing::RunResult;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST_F(BackfillctlTest, NodesPrintsTheReplicasOfTheGroupAndTheirLeases) {
  service_.set_nodes(GroupNodes());
  RunResult run = Run({"nodes"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, IsEmpty());
  EXPECT_EQ(run.out, kGroupNodesText);
  EXPECT_EQ(service_.node_lists(), 1);
}

TEST_F(BackfillctlTest, NodesOfADaemonAloneSayItRunsAlone) {
  service_.set_nodes(AloneNode());
  RunResult run = Run({"nodes"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, kAloneNodeText);
}

TEST_F(BackfillctlTest, NodesJsonIsTheAnswersCanonicalJson) {
  service_.set_nodes(GroupNodes());
  RunResult run = Run({"--json", "nodes"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  absl::StatusOr<std::string> json = cli::ToJson(GroupNodes());
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(run.out, *json);
  v1::ListNodesResponse parsed;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(run.out, &parsed).ok())
      << run.out;
  EXPECT_TRUE(
      google::protobuf::util::MessageDifferencer::Equals(parsed, GroupNodes()));
  // The flag after the subcommand is the same.
  EXPECT_EQ(Run({"nodes", "--json"}).out, *json);
}

TEST_F(BackfillctlTest, NodesFailsWithTheServersErrorWhenTheStoreIsAway) {
  service_.set_nodes_error(
      "cannot read the group's replicas from the state store: connection "
      "refused");
  RunResult run = Run({"nodes"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.out, IsEmpty());
  EXPECT_THAT(run.err,
              HasSubstr("UNAVAILABLE: cannot read the group's replicas from "
                        "the state store: connection refused"));
}

TEST_F(BackfillctlTest, NodesTakesNoArguments) {
  RunResult run = Run({"nodes", "node-a"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("node-a"));
  EXPECT_EQ(service_.node_lists(), 0);
}

}  // namespace
}  // namespace client_backfillctl_nodes_test
}  // namespace backfill
