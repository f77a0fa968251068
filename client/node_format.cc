#include "client/node_format.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/text_table.h"
#include "client/value_format.h"
#include "google/protobuf/timestamp.pb.h"

namespace backfill {
namespace cli {
namespace {

// The step kinds of a lease, in the order the LEASES column counts them.
constexpr const char* kStepKinds[] = {"run", "validate", "publish", "confirm",
                                      "rollback"};

bool IsSet(const google::protobuf::Timestamp& t) {
  return t.seconds() != 0 || t.nanos() != 0;
}

// `to` - `from` in whole seconds (rounded down).
int64_t SecondsBetween(const google::protobuf::Timestamp& from,
                       const google::protobuf::Timestamp& to) {
  const double seconds = static_cast<double>(to.seconds() - from.seconds()) +
                         static_cast<double>(to.nanos() - from.nanos()) / 1e9;
  return static_cast<int64_t>(std::floor(seconds));
}

// "0s", "45s", "3m20s", "2h05m", "3d04h"; a negative span (clocks apart)
// is "0s".
std::string SpanText(int64_t seconds) {
  const int64_t s = seconds < 0 ? 0 : seconds;
  if (s < 60) return absl::StrFormat("%ds", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, (s % 86400) / 3600);
}

// "live", "draining" or "missing" (its heartbeat is older than the lease
// time: its jobs go to the other replicas once their leases expire).
std::string StateText(const v1::Node& node) {
  if (!node.live()) return "missing";
  return node.draining() ? "draining" : "live";
}

// "3 run, 1 publish"; "-" for none.
std::string LeasesText(const v1::Node& node) {
  std::map<std::string, int> counts;
  std::vector<std::string> others;  // kinds outside kStepKinds, first seen
  for (const v1::NodeLease& lease : node.leases()) {
    if (++counts[lease.step()] != 1) continue;
    bool known = false;
    for (const char* kind : kStepKinds) known = known || lease.step() == kind;
    if (!known) others.push_back(lease.step());
  }
  std::vector<std::string> parts;
  for (const char* kind : kStepKinds) {
    const auto it = counts.find(kind);
    if (it != counts.end())
      parts.push_back(absl::StrCat(it->second, " ", kind));
  }
  for (const std::string& kind : others) {
    parts.push_back(absl::StrCat(counts[kind], " ",
                                 kind.empty() ? "-" : TerminalText(kind)));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, ", ");
}

std::string HeartbeatText(const v1::Node& node,
                          const google::protobuf::Timestamp& now) {
  if (!IsSet(node.last_heartbeat()) || !IsSet(now)) return "-";
  return absl::StrCat(SpanText(SecondsBetween(node.last_heartbeat(), now)),
                      " ago");
}

// "in 8s" for a live lease, "expired 37s ago" for one that is not.
std::string ExpiresText(const v1::NodeLease& lease,
                        const google::protobuf::Timestamp& now) {
  if (!IsSet(lease.expires_at()) || !IsSet(now)) {
    return lease.live() ? "-" : "expired";
  }
  const int64_t left = SecondsBetween(now, lease.expires_at());
  if (lease.live()) return absl::StrCat("in ", SpanText(left));
  return absl::StrCat("expired ", SpanText(-left), " ago");
}

// "group of 3 replicas sharing the state store: 1 live, 1 draining, 1
// missing".
std::string GroupLine(const v1::ListNodesResponse& response) {
  int live = 0;
  int draining = 0;
  int missing = 0;
  for (const v1::Node& node : response.nodes()) {
    const std::string state = StateText(node);
    if (state == "live") ++live;
    if (state == "draining") ++draining;
    if (state == "missing") ++missing;
  }
  std::vector<std::string> parts = {absl::StrCat(live, " live")};
  if (draining > 0) parts.push_back(absl::StrCat(draining, " draining"));
  if (missing > 0) parts.push_back(absl::StrCat(missing, " missing"));
  return absl::StrCat("group of ", Plural(response.nodes_size(), "replica"),
                      " sharing the state store: ", absl::StrJoin(parts, ", "),
                      "\n");
}

}  // namespace

std::string FormatNodes(const v1::ListNodesResponse& response) {
  const google::protobuf::Timestamp& now = response.read_time();
  std::string out =
      response.group()
          ? GroupLine(response)
          : "backfilld runs alone on its data dir's state.db: no group, no "
            "leases\n";
  if (response.nodes().empty()) return absl::StrCat(out, "no replicas\n");
  TextTable nodes(
      {"NAME", "ADDRESS", "VERSION", "HEARTBEAT", "STATE", "LEASES"});
  for (const v1::Node& node : response.nodes()) {
    nodes.AddRow({absl::StrCat(SafeOrDash(node.name()),
                               node.self() ? " (answering)" : ""),
                  SafeOrDash(node.address()), SafeOrDash(node.version()),
                  HeartbeatText(node, now), StateText(node), LeasesText(node)});
  }
  absl::StrAppend(&out, nodes.Render());

  TextTable leases({"JOB", "NODE", "STEP", "TOKEN", "EXPIRES"});
  int held = 0;
  for (const v1::Node& node : response.nodes()) {
    for (const v1::NodeLease& lease : node.leases()) {
      ++held;
      leases.AddRow({SafeOrDash(lease.job_id()), SafeOrDash(node.name()),
                     SafeOrDash(lease.step()), absl::StrCat(lease.token()),
                     ExpiresText(lease, now)});
    }
  }
  if (held > 0) absl::StrAppend(&out, "\n", leases.Render());
  return out;
}

}  // namespace cli
}  // namespace backfill
