#include "server/node_convert.h"

#include <algorithm>
#include <map>
#include <utility>

#include "google/protobuf/timestamp.pb.h"
#include "server/proto_convert.h"
#include "server/wire_text.h"

namespace backfill {
namespace {

// Sets the field `mutable_field` returns to `time`, and leaves it unset
// (not even created) for a time that means "never" (InfinitePast).
template <typename Message>
void SetTime(absl::Time time, Message* message,
             google::protobuf::Timestamp* (Message::*mutable_field)()) {
  google::protobuf::Timestamp timestamp;
  if (TimeToProto(time, &timestamp)) *(message->*mutable_field)() = timestamp;
}

v1::NodeLease LeaseToProto(const JobLease& lease) {
  v1::NodeLease out;
  out.set_job_id(lease.job_id);
  out.set_step(lease.step);
  out.set_token(lease.token);
  SetTime(lease.expires_at, &out, &v1::NodeLease::mutable_expires_at);
  SetTime(lease.claimed_at, &out, &v1::NodeLease::mutable_claimed_at);
  out.set_live(lease.live);
  return out;
}

// The node's record, without its leases or the flags the answer decides.
v1::Node RecordToProto(const NodeRecord& record) {
  v1::Node out;
  out.set_name(record.name);
  out.set_address(record.address);
  out.set_version(record.version);
  SetTime(record.started_at, &out, &v1::Node::mutable_started_at);
  SetTime(record.last_heartbeat, &out, &v1::Node::mutable_last_heartbeat);
  out.set_draining(record.draining);
  return out;
}

bool Live(const NodeRecord& record, absl::Time now, absl::Duration lease_time) {
  if (record.last_heartbeat == absl::InfinitePast()) return false;
  return now - record.last_heartbeat <= lease_time;
}

}  // namespace

v1::ListNodesResponse GroupNodesToProto(const std::vector<NodeRecord>& nodes,
                                        const std::vector<JobLease>& leases,
                                        const NodeRecord& self_record,
                                        absl::Time now,
                                        absl::Duration lease_time) {
  // By name; a name twice (which the store's key forbids) keeps the first.
  std::map<std::string, v1::Node> by_name;
  for (const NodeRecord& record : nodes) {
    v1::Node node = RecordToProto(record);
    node.set_live(Live(record, now, lease_time));
    by_name.emplace(record.name, std::move(node));
  }
  if (by_name.count(self_record.name) == 0) {
    NodeRecord unrecorded = self_record;
    unrecorded.last_heartbeat = absl::InfinitePast();
    by_name.emplace(self_record.name, RecordToProto(unrecorded));
  }
  by_name[self_record.name].set_self(true);

  std::vector<JobLease> sorted = leases;
  std::stable_sort(
      sorted.begin(), sorted.end(),
      [](const JobLease& a, const JobLease& b) { return a.job_id < b.job_id; });
  for (const JobLease& lease : sorted) {
    auto [it, added] = by_name.try_emplace(lease.node);
    if (added) it->second.set_name(lease.node);
    *it->second.add_leases() = LeaseToProto(lease);
  }

  v1::ListNodesResponse response;
  response.set_group(true);
  SetTime(now, &response, &v1::ListNodesResponse::mutable_read_time);
  for (auto& [name, node] : by_name) {
    *response.add_nodes() = std::move(node);
  }
  MakeStringsUtf8(&response);
  return response;
}

v1::ListNodesResponse AloneNodeToProto(const NodeRecord& self_record,
                                       absl::Time now) {
  v1::ListNodesResponse response;
  response.set_group(false);
  SetTime(now, &response, &v1::ListNodesResponse::mutable_read_time);
  v1::Node* node = response.add_nodes();
  *node = RecordToProto(self_record);
  node->set_live(true);
  node->set_self(true);
  MakeStringsUtf8(&response);
  return response;
}

}  // namespace backfill
