// Unit tests of `backfillctl nodes`' rendering (client/node_format.h) of
// ListNodes: the exact text of a group and of a daemon alone, ages and
// expiries measured from the answer's read_time, the states a replica can
// be in, lease counts by kind, text from the server escaped, and the
// canonical JSON of --json. Expectations come from the header and the
// proto contract (backfill/v1/nodes.proto).

#include <string>

#include "absl/status/statusor.h"
#include "backfill/v1/backfill.pb.h"
#include "client/cli_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/testing/cli_format_samples.h"

namespace backfill {
namespace cli {
namespace client_nodes_format_test {
namespace {

using ::backfill::cli::format_testing::AloneNode;
using ::backfill::cli::format_testing::GroupNodes;
using ::backfill::cli::format_testing::HasTerminalControl;
using ::backfill::cli::format_testing::kAloneNodeText;
using ::backfill::cli::format_testing::kGroupNodesText;
using ::backfill::cli::format_testing::kMarch1AtNoon;
using ::backfill::cli::format_testing::LineStartingWith;
using ::backfill::cli::format_testing::TopLevelJsonValues;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(FormatNodesTest, AGroupIsATableOfReplicasThenOneLinePerLease) {
  EXPECT_EQ(FormatNodes(GroupNodes()), kGroupNodesText);
}

TEST(FormatNodesTest, ADaemonAloneSaysSoAndShowsItself) {
  EXPECT_EQ(FormatNodes(AloneNode()), kAloneNodeText);
}

TEST(FormatNodesTest, AgesAndExpiriesAreMeasuredFromTheReadTime) {
  v1::ListNodesResponse response = GroupNodes();
  // An hour later by the answer's clock, whatever this machine's says.
  response.mutable_read_time()->set_seconds(kMarch1AtNoon + 3600);
  const std::string text = FormatNodes(response);
  EXPECT_THAT(LineStartingWith(text, "node-a "), HasSubstr("1h00m ago"));
  EXPECT_THAT(LineStartingWith(text, "node-c "), HasSubstr("1h00m ago"));
  EXPECT_THAT(LineStartingWith(text, "bf-9 "), HasSubstr("expired 1h00m ago"));

  response.mutable_read_time()->set_seconds(kMarch1AtNoon + 200);
  EXPECT_THAT(LineStartingWith(FormatNodes(response), "node-c "),
              HasSubstr("4m07s ago"));
  response.mutable_read_time()->set_seconds(kMarch1AtNoon + 3 * 86400);
  EXPECT_THAT(LineStartingWith(FormatNodes(response), "node-a "),
              HasSubstr("3d00h ago"));

  // The store's clock ahead of the answering replica's: never negative.
  response.mutable_read_time()->set_seconds(kMarch1AtNoon - 30);
  const std::string ahead = FormatNodes(response);
  EXPECT_THAT(LineStartingWith(ahead, "node-a "), HasSubstr(" 0s ago"));
  EXPECT_THAT(LineStartingWith(ahead, "bf-12 "),
              ::testing::EndsWith(" in 38s"));
}

TEST(FormatNodesTest, AMissingReplicaIsMissingEvenWhenItWasDraining) {
  v1::ListNodesResponse response = GroupNodes();
  response.mutable_nodes(2)->set_draining(true);
  EXPECT_THAT(LineStartingWith(FormatNodes(response), "node-c "),
              HasSubstr(" missing "));
  EXPECT_THAT(FormatNodes(response),
              HasSubstr("group of 3 replicas sharing the state store: 1 live, "
                        "1 draining, 1 missing\n"));
  response.mutable_nodes(2)->set_live(true);
  response.mutable_nodes(2)->set_draining(false);
  EXPECT_THAT(FormatNodes(response),
              HasSubstr("group of 3 replicas sharing the state store: 2 live, "
                        "1 draining\n"));
}

TEST(FormatNodesTest, LeasesAreCountedByKindInStepOrder) {
  v1::ListNodesResponse response;
  response.set_group(true);
  response.mutable_read_time()->set_seconds(kMarch1AtNoon);
  v1::Node* node = response.add_nodes();
  node->set_name("node-a");
  node->set_live(true);
  for (const char* step : {"rollback", "resample", "confirm", "run", "rollback",
                           "validate", "publish", "resample"}) {
    v1::NodeLease* lease = node->add_leases();
    lease->set_job_id("bf-1");
    lease->set_step(step);
    lease->set_live(true);
  }
  EXPECT_THAT(LineStartingWith(FormatNodes(response), "node-a "),
              HasSubstr("1 run, 1 validate, 1 publish, 1 confirm, 2 "
                        "rollback, 2 resample"));
  // No expiry known: "-".
  EXPECT_THAT(LineStartingWith(FormatNodes(response), "bf-1 "),
              ::testing::EndsWith(" -"));
  node->clear_leases();
  EXPECT_THAT(LineStartingWith(FormatNodes(response), "node-a "),
              ::testing::EndsWith(" live   -"));
  EXPECT_THAT(FormatNodes(response), Not(HasSubstr("JOB")));
}

TEST(FormatNodesTest, TextFromTheServerIsEscaped) {
  v1::ListNodesResponse response = GroupNodes();
  response.mutable_nodes(0)->set_name("node-\x1b[2J\nevil");
  response.mutable_nodes(0)->set_version("0.4\r");
  response.mutable_nodes(0)->mutable_leases(0)->set_job_id("bf-\x1b]0;x\x07");
  response.mutable_nodes(0)->mutable_leases(1)->set_step("r\x1bun");
  const std::string text = FormatNodes(response);
  EXPECT_FALSE(HasTerminalControl(text)) << text;
  EXPECT_THAT(text, HasSubstr("node-\\x1b[2J\\nevil"));
  EXPECT_THAT(text, HasSubstr("1 r\\x1bun"));
}

TEST(FormatNodesTest, NoReplicasAtAll) {
  v1::ListNodesResponse response;
  response.set_group(true);
  EXPECT_EQ(FormatNodes(response),
            "group of 0 replicas sharing the state store: 0 live\n"
            "no replicas\n");
}

TEST(FormatNodesTest, JsonIsTheCanonicalProtobufJson) {
  absl::StatusOr<std::string> json = ToJson(AloneNode());
  ASSERT_TRUE(json.ok()) << json.status();
  // Proto field names, every scalar and repeated field (false and empty
  // included), timestamps in RFC 3339, an unset timestamp left out.
  for (const char* field :
       {"\"name\": \"host-1:50051\"", "\"address\": \"127.0.0.1:50051\"",
        "\"version\": \"0.4.0\"", "\"started_at\": \"2025-03-01T11:00:00Z\"",
        "\"draining\": false", "\"live\": true", "\"self\": true",
        "\"leases\": []", "\"group\": false",
        "\"read_time\": \"2025-03-01T12:00:00Z\""}) {
    EXPECT_THAT(*json, HasSubstr(field));
  }
  EXPECT_THAT(*json, Not(HasSubstr("last_heartbeat")));
  EXPECT_THAT(*json, Not(HasSubstr("readTime")));
  EXPECT_EQ(TopLevelJsonValues(*json), 1);

  absl::StatusOr<std::string> group = ToJson(GroupNodes());
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_THAT(*group, HasSubstr("\"token\": \"7\""));  // int64: a string
  EXPECT_THAT(*group, HasSubstr("\"expires_at\": \"2025-03-01T12:00:08Z\""));
  EXPECT_THAT(*group,
              HasSubstr("\"last_heartbeat\": \"2025-03-01T11:59:58Z\""));
  v1::ListNodesResponse parsed;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(*group, &parsed).ok());
  EXPECT_TRUE(
      google::protobuf::util::MessageDifferencer::Equals(parsed, GroupNodes()));
}

}  // namespace
}  // namespace client_nodes_format_test
}  // namespace cli
}  // namespace backfill
