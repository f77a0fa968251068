// In-process gRPC tests of ListNodes over real storage
// (tests/testing/server_service_fixture.h) with the group's LeaseStore an
// in-memory table written here: a daemon alone answers with itself; a
// group answers with every replica by name, each with the leases it holds,
// live by the age of its heartbeat, the answering one marked; a store that
// cannot be read is the store's error with what could not be read. And the
// conversion itself (server/node_convert.h) at the bounds of `live`.

#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/backfill_client.h"
#include "core/base/error_details.h"
#include "core/ports/lease_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/backfill_service_impl.h"
#include "server/node_convert.h"
#include "server/proto_convert.h"
#include "tests/testing/raw_grpc.h"
#include "tests/testing/server_service_fixture.h"

namespace backfill {
namespace server_nodes_test {
namespace {

using ::backfill::testing::Refusal;
using ::backfill::testing::ServerServiceTest;
using ::backfill::testing::WireError;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A LeaseStore in memory: node records and leases by name and job id,
// under one mutex. Times are what the test sets (Heartbeat stamps
// absl::Now()); every method fails with `failure` once it is set.
class LeaseTable final : public LeaseStore {
 public:
  absl::Status Heartbeat(const NodeRecord& node) override {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return failure_;
    NodeRecord& record = nodes_[node.name] = node;
    record.last_heartbeat = absl::Now();
    return absl::OkStatus();
  }
  absl::Status Leave(const std::string& node) override {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return failure_;
    nodes_.erase(node);
    for (auto it = leases_.begin(); it != leases_.end();) {
      it = it->second.node == node ? leases_.erase(it) : std::next(it);
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<NodeRecord>> ListNodes() override {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return failure_;
    // Not by name: the service must sort.
    std::vector<NodeRecord> out;
    for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
      out.push_back(it->second);
    }
    return out;
  }
  absl::StatusOr<ClaimResult> Claim(const std::string& job_id,
                                    const std::string& node,
                                    const std::string& step,
                                    absl::Duration ttl) override {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return failure_;
    ClaimResult result;
    JobLease& lease = leases_[job_id];
    if (lease.node.empty() || lease.node == node ||
        lease.expires_at < absl::Now()) {
      if (lease.node != node) {
        result.taken_from = lease.node;
        lease.token += 1;
        lease.claimed_at = absl::Now();
      }
      lease.job_id = job_id;
      lease.node = node;
      lease.step = step;
      lease.expires_at = absl::Now() + ttl;
      lease.live = true;
      result.claimed = true;
    }
    result.lease = lease;
    return result;
  }
  absl::StatusOr<std::vector<std::string>> Renew(
      const std::string& node, const std::vector<JobLease>& held,
      absl::Duration ttl) override {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return failure_;
    std::vector<std::string> lost;
    for (const JobLease& h : held) {
      auto it = leases_.find(h.job_id);
      if (it == leases_.end() || it->second.node != node ||
          it->second.token != h.token) {
        lost.push_back(h.job_id);
      } else {
        it->second.expires_at = absl::Now() + ttl;
      }
    }
    return lost;
  }
  absl::Status Release(const JobLease& lease) override {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return failure_;
    auto it = leases_.find(lease.job_id);
    if (it != leases_.end() && it->second.node == lease.node &&
        it->second.token == lease.token) {
      leases_.erase(it);
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<JobLease>> ListLeases() override {
    absl::MutexLock lock(&mu_);
    if (!lease_failure_.ok()) return lease_failure_;
    if (!failure_.ok()) return failure_;
    std::vector<JobLease> out;
    for (const auto& [job, lease] : leases_) out.push_back(lease);
    return out;
  }
  // Requests between replicas: not used by these tests.
  absl::StatusOr<int64_t> SendRequest(const NodeRequest&) override {
    return absl::UnimplementedError("no requests in this test");
  }
  absl::StatusOr<std::vector<NodeRequest>> TakeRequests(
      const std::string&) override {
    return std::vector<NodeRequest>();
  }
  absl::Status AnswerRequest(int64_t, const NodeAnswer&) override {
    return absl::UnimplementedError("no requests in this test");
  }
  absl::StatusOr<std::optional<NodeAnswer>> ReadAnswer(int64_t, bool) override {
    return absl::NotFoundError("no requests in this test");
  }

  // A replica whose last heartbeat was `age` ago.
  void Put(NodeRecord node, absl::Duration age) {
    absl::MutexLock lock(&mu_);
    node.last_heartbeat = absl::Now() - age;
    nodes_[node.name] = std::move(node);
  }
  void Put(JobLease lease) {
    absl::MutexLock lock(&mu_);
    leases_[lease.job_id] = std::move(lease);
  }
  void Fail(absl::Status status) {
    absl::MutexLock lock(&mu_);
    failure_ = std::move(status);
  }
  void FailLeases(absl::Status status) {
    absl::MutexLock lock(&mu_);
    lease_failure_ = std::move(status);
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, NodeRecord> nodes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, JobLease> leases_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  absl::Status lease_failure_ ABSL_GUARDED_BY(mu_);
};

NodeRecord Record(const std::string& name, const std::string& address,
                  bool draining = false) {
  NodeRecord node;
  node.name = name;
  node.address = address;
  node.version = "0.4.0";
  node.started_at = absl::FromUnixSeconds(1748779200);  // 2025-06-01
  node.draining = draining;
  return node;
}

JobLease Lease(const std::string& job, const std::string& node,
               const std::string& step, int64_t token, absl::Duration left) {
  JobLease lease;
  lease.job_id = job;
  lease.node = node;
  lease.step = step;
  lease.token = token;
  lease.claimed_at = absl::Now() - absl::Minutes(1);
  lease.expires_at = absl::Now() + left;
  lease.live = left > absl::ZeroDuration();
  return lease;
}

std::vector<std::string> Names(const v1::ListNodesResponse& response) {
  std::vector<std::string> names;
  for (const v1::Node& node : response.nodes()) names.push_back(node.name());
  return names;
}

std::vector<std::string> Jobs(const v1::Node& node) {
  std::vector<std::string> jobs;
  for (const v1::NodeLease& lease : node.leases()) {
    jobs.push_back(lease.job_id());
  }
  return jobs;
}

class ServerNodesTest : public ServerServiceTest {
 protected:
  // The replicas of a group, node-b answering: node-a and node-b beat
  // recently (node-b drains), node-c stopped a minute ago; node-a holds
  // two jobs, node-b one, node-c one whose lease expired, and node-gone,
  // which has no record, one.
  void SetUpGroup() {
    table_.Put(Record("node-c", "10.0.0.7:50051"), absl::Seconds(60));
    table_.Put(Record("node-a", "10.0.0.5:50051"), absl::Seconds(2));
    table_.Put(Record("node-b", "10.0.0.6:50051", /*draining=*/true),
               absl::Seconds(1));
    table_.Put(Lease("bf-12", "node-a", "run", 7, absl::Seconds(8)));
    table_.Put(Lease("bf-10", "node-a", "publish", 3, absl::Seconds(9)));
    table_.Put(Lease("bf-11", "node-b", "validate", 1, absl::Seconds(5)));
    table_.Put(Lease("bf-9", "node-c", "run", 2, -absl::Seconds(37)));
    table_.Put(Lease("bf-8", "node-gone", "confirm", 4, -absl::Seconds(3)));
    api_->SetGroup(&table_, Record("node-b", "10.0.0.6:50051"),
                   absl::Seconds(10));
  }

  LeaseTable table_;
};

TEST_F(ServerNodesTest, ADaemonAloneAnswersWithItself) {
  NodeRecord self = Record("host-1:50051", "host-1:50051");
  api_->SetGroup(nullptr, self, absl::Seconds(10));
  const absl::Time before = absl::Now();
  absl::StatusOr<v1::ListNodesResponse> response = client_->ListNodes();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_FALSE(response->group());
  ASSERT_EQ(response->nodes_size(), 1);
  const v1::Node& node = response->nodes(0);
  EXPECT_EQ(node.name(), "host-1:50051");
  EXPECT_EQ(node.address(), "host-1:50051");
  EXPECT_EQ(node.version(), "0.4.0");
  EXPECT_EQ(node.started_at().seconds(), 1748779200);
  EXPECT_FALSE(node.has_last_heartbeat());
  EXPECT_TRUE(node.self());
  EXPECT_TRUE(node.live());
  EXPECT_FALSE(node.draining());
  EXPECT_THAT(node.leases(), IsEmpty());
  EXPECT_GE(response->read_time().seconds(), absl::ToUnixSeconds(before));
}

TEST_F(ServerNodesTest, AGroupAnswersEveryReplicaByNameWithItsLeases) {
  SetUpGroup();
  const absl::Time before = absl::Now();
  absl::StatusOr<v1::ListNodesResponse> response = client_->ListNodes();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_TRUE(response->group());
  EXPECT_GE(response->read_time().seconds(), absl::ToUnixSeconds(before));
  ASSERT_THAT(Names(*response),
              ElementsAre("node-a", "node-b", "node-c", "node-gone"));
  const v1::Node& a = response->nodes(0);
  const v1::Node& b = response->nodes(1);
  const v1::Node& c = response->nodes(2);
  const v1::Node& gone = response->nodes(3);

  // Live: the heartbeat is at most the lease time (10s) old.
  EXPECT_TRUE(a.live());
  EXPECT_TRUE(b.live());
  EXPECT_FALSE(c.live());
  EXPECT_FALSE(gone.live());
  EXPECT_FALSE(a.draining());
  EXPECT_TRUE(b.draining());
  // Only the replica that answered is marked.
  EXPECT_FALSE(a.self());
  EXPECT_TRUE(b.self());
  EXPECT_FALSE(c.self());
  EXPECT_FALSE(gone.self());

  EXPECT_EQ(a.address(), "10.0.0.5:50051");
  EXPECT_EQ(a.version(), "0.4.0");
  EXPECT_EQ(a.started_at().seconds(), 1748779200);
  EXPECT_NEAR(static_cast<double>(response->read_time().seconds() -
                                  a.last_heartbeat().seconds()),
              2, 1);
  EXPECT_TRUE(gone.address().empty());
  EXPECT_FALSE(gone.has_last_heartbeat());

  // Leases under their holders, by job id.
  EXPECT_THAT(Jobs(a), ElementsAre("bf-10", "bf-12"));
  EXPECT_THAT(Jobs(b), ElementsAre("bf-11"));
  EXPECT_THAT(Jobs(c), ElementsAre("bf-9"));
  EXPECT_THAT(Jobs(gone), ElementsAre("bf-8"));
  const v1::NodeLease& run = a.leases(1);
  EXPECT_EQ(run.step(), "run");
  EXPECT_EQ(run.token(), 7);
  EXPECT_TRUE(run.live());
  EXPECT_TRUE(run.has_claimed_at());
  EXPECT_NEAR(static_cast<double>(run.expires_at().seconds() -
                                  response->read_time().seconds()),
              8, 1);
  EXPECT_EQ(a.leases(0).step(), "publish");
  EXPECT_EQ(b.leases(0).step(), "validate");
  EXPECT_FALSE(c.leases(0).live());
  EXPECT_EQ(c.leases(0).token(), 2);
}

TEST_F(ServerNodesTest, TheAnsweringReplicaIsListedBeforeItsFirstHeartbeat) {
  table_.Put(Record("node-a", "10.0.0.5:50051"), absl::Seconds(1));
  api_->SetGroup(&table_, Record("node-z", "10.0.0.9:50051"),
                 absl::Seconds(10));
  absl::StatusOr<v1::ListNodesResponse> response = client_->ListNodes();
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_THAT(Names(*response), ElementsAre("node-a", "node-z"));
  const v1::Node& z = response->nodes(1);
  EXPECT_TRUE(z.self());
  EXPECT_FALSE(z.live());
  EXPECT_FALSE(z.has_last_heartbeat());
  EXPECT_EQ(z.address(), "10.0.0.9:50051");
  EXPECT_FALSE(response->nodes(0).self());
}

TEST_F(ServerNodesTest, StoredTextThatIsNotUtf8IsEscapedNotRefused) {
  table_.Put(Record("node-\xff", "10.0.0.5:50051"), absl::Seconds(1));
  table_.Put(Lease("bf-1", "node-\xff", "r\xc3un", 1, absl::Seconds(5)));
  api_->SetGroup(&table_, Record("node-a", "10.0.0.6:50051"),
                 absl::Seconds(10));
  absl::StatusOr<v1::ListNodesResponse> response = client_->ListNodes();
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_THAT(Names(*response), ElementsAre("node-a", "node-\\xff"));
  EXPECT_EQ(response->nodes(1).leases(0).step(), "r\\xc3un");
}

TEST_F(ServerNodesTest, AStoreThatCannotBeReadIsUnavailableSayingWhat) {
  SetUpGroup();
  table_.Fail(absl::UnavailableError(
      "connection to server at \"pg-1\" (10.0.0.2), port 5432 failed"));
  const WireError nodes = Refusal(target_, "ListNodes", v1::ListNodesRequest());
  EXPECT_EQ(nodes.code, grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(nodes.message,
            "cannot read the group's replicas from the state store: "
            "connection to server at \"pg-1\" (10.0.0.2), port 5432 failed");
  EXPECT_EQ(nodes.info.reason(), "UNAVAILABLE");

  table_.Fail(absl::OkStatus());
  table_.FailLeases(absl::UnavailableError("server closed the connection"));
  absl::StatusOr<v1::ListNodesResponse> leases = client_->ListNodes();
  ASSERT_FALSE(leases.ok());
  EXPECT_EQ(leases.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(leases.status().message(),
              HasSubstr("cannot read the job leases from the state store: "
                        "server closed the connection"));

  // The store's own code and reason pass through.
  table_.FailLeases(WithReason(absl::DataLossError("checksum mismatch"),
                               "STATE_RECORD_CORRUPT"));
  const WireError corrupt =
      Refusal(target_, "ListNodes", v1::ListNodesRequest());
  EXPECT_EQ(corrupt.code, grpc::StatusCode::DATA_LOSS);
  EXPECT_EQ(corrupt.info.reason(), "STATE_RECORD_CORRUPT");
  EXPECT_THAT(corrupt.message, HasSubstr("checksum mismatch"));
}

// ---- the conversion, at the bounds of `live` -------------------------------

TEST(GroupNodesToProtoTest, LiveUpToTheLeaseTimeInclusive) {
  const absl::Time now = absl::FromUnixSeconds(1748779200);
  std::vector<NodeRecord> nodes;
  for (const auto& [name, age] :
       std::vector<std::pair<std::string, absl::Duration>>{
           {"at-the-bound", absl::Seconds(10)},
           {"past-it", absl::Seconds(10) + absl::Nanoseconds(1)},
           {"ahead", -absl::Seconds(2)},  // the store's clock runs ahead
           {"fresh", absl::ZeroDuration()}}) {
    NodeRecord node = Record(name, "h:1");
    node.last_heartbeat = now - age;
    nodes.push_back(node);
  }
  NodeRecord never = Record("never", "h:1");  // no heartbeat recorded
  nodes.push_back(never);
  const v1::ListNodesResponse response = GroupNodesToProto(
      nodes, {}, Record("fresh", "h:1"), now, absl::Seconds(10));
  std::map<std::string, bool> live;
  for (const v1::Node& node : response.nodes()) live[node.name()] = node.live();
  EXPECT_EQ(live, (std::map<std::string, bool>{{"ahead", true},
                                               {"at-the-bound", true},
                                               {"fresh", true},
                                               {"never", false},
                                               {"past-it", false}}));
  EXPECT_EQ(response.read_time().seconds(), 1748779200);
}

TEST(AloneNodeToProtoTest, OneLiveNodeThatIsItself) {
  const v1::ListNodesResponse response = AloneNodeToProto(
      Record("solo", "127.0.0.1:50051"), absl::FromUnixSeconds(1748779200));
  EXPECT_FALSE(response.group());
  ASSERT_EQ(response.nodes_size(), 1);
  EXPECT_TRUE(response.nodes(0).self());
  EXPECT_TRUE(response.nodes(0).live());
  EXPECT_EQ(response.nodes(0).name(), "solo");
  EXPECT_EQ(response.read_time().seconds(), 1748779200);
}

}  // namespace
}  // namespace server_nodes_test
}  // namespace backfill
