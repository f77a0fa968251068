// What the tests of backfillctl's renderings (client_cli_*_format_test.cc)
// share: fixed times, the lines of a rendering and the value of a
// "label  value" line, a count of top-level JSON values, and sample
// messages (a cost, a job with its counts, a plan of two datasets, a
// running job, the replicas of a group and a daemon alone, with their
// text) built from the proto contract. Stateless; thread-safe.

#ifndef BACKFILL_TESTS_TESTING_CLI_FORMAT_SAMPLES_H_
#define BACKFILL_TESTS_TESTING_CLI_FORMAT_SAMPLES_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "backfill/v1/backfill.pb.h"
#include "client/cli_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace backfill::cli::format_testing {

// 2025-03-01T12:34:56Z.
inline constexpr int64_t kMarch1At123456 = 1740832496;
// 2025-03-01T12:00:00Z.
inline constexpr int64_t kMarch1AtNoon = 1740830400;

inline google::protobuf::RepeatedPtrField<std::string> Partitions(
    std::vector<std::string> values) {
  google::protobuf::RepeatedPtrField<std::string> out;
  for (auto& value : values) out.Add(std::move(value));
  return out;
}

inline std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// The line of `text` starting with `prefix`, or "" when there is none.
inline std::string LineStartingWith(const std::string& text,
                                    const std::string& prefix) {
  for (const std::string& line : Lines(text)) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

// The value of a "label  value" line: what follows the label and the run
// of padding spaces.
inline std::string ValueOf(const std::string& block, const std::string& label) {
  for (const std::string& line : Lines(block)) {
    if (line.rfind(label + "  ", 0) != 0 && line != label) continue;
    std::string rest = line.substr(label.size());
    size_t start = rest.find_first_not_of(' ');
    return start == std::string::npos ? "" : rest.substr(start);
  }
  return "<no line " + label + ">";
}

// Counts top-level JSON values in `text` (strings and escapes respected).
inline int TopLevelJsonValues(const std::string& text) {
  int depth = 0;
  int values = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (depth == 0) ++values;
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return depth == 0 ? values : -1;
}

inline v1::CostEstimate Cost(double backfill, double full_reload,
                             v1::CostUnit unit = v1::COST_UNIT_UNSPECIFIED) {
  v1::CostEstimate cost;
  cost.set_unit(unit);
  cost.set_backfill(backfill);
  cost.set_full_reload(full_reload);
  cost.set_ratio(full_reload > 0 ? backfill / full_reload : 0);
  return cost;
}

inline v1::Backfill Job(const std::string& id, v1::BackfillState state,
                        int64_t published, int64_t staged, int64_t total) {
  v1::Backfill backfill;
  backfill.set_id(id);
  backfill.set_state(state);
  backfill.mutable_partitions()->set_total(total);
  backfill.mutable_partitions()->set_published(published);
  backfill.mutable_partitions()->set_staged(staged);
  backfill.mutable_partitions()->set_pending(total - published - staged);
  return backfill;
}

inline v1::PlanBackfillResponse TwoDatasetPlan() {
  v1::PlanBackfillResponse plan;
  v1::DatasetPlan* orders = plan.add_datasets();
  orders->set_dataset("orders");
  orders->set_grain(v1::GRAIN_DAY);
  *orders->mutable_partitions() =
      Partitions({"2025-03-01", "2025-03-02", "2025-03-03"});
  orders->set_reason("requested");
  *orders->mutable_cost() = Cost(1000, 100000);
  v1::DatasetPlan* revenue = plan.add_datasets();
  revenue->set_dataset("daily_revenue");
  revenue->set_grain(v1::GRAIN_DAY);
  *revenue->mutable_partitions() =
      Partitions({"2025-03-01", "2025-03-02", "2025-03-03", "2025-03-04"});
  revenue->set_reason("downstream of orders");
  *revenue->mutable_cost() = Cost(2000, 50000);
  plan.set_total_partitions(7);
  *plan.mutable_cost() = Cost(3000, 150000);
  return plan;
}

inline v1::Backfill RunningJob() {
  v1::Backfill backfill;
  backfill.set_id("bf-42");
  backfill.set_state(v1::BACKFILL_STATE_RUNNING);
  v1::BackfillRequest* request = backfill.mutable_request();
  request->set_dataset("orders");
  request->set_from_partition("2025-03-01");
  request->set_to_partition("2025-03-08");
  request->set_reason("fix late orders");
  request->set_ticket("OPS-1");
  request->set_requested_by("alice");
  backfill.set_idempotency_key("key-1");
  v1::PartitionCounts* counts = backfill.mutable_partitions();
  counts->set_total(300);
  counts->set_published(100);
  counts->set_staged(35);
  counts->set_running(5);
  counts->set_pending(150);
  counts->set_failed(10);
  v1::DatasetPlan* plan = backfill.add_plan();
  plan->set_dataset("orders");
  *plan->mutable_partitions() = Partitions({"2025-03-01", "2025-03-02"});
  plan->set_reason("requested");
  *backfill.mutable_cost_estimate() = Cost(12300, 345600);
  backfill.set_actual_cost(4567);
  backfill.set_rows_written(1234567);
  backfill.set_message("recomputing");
  backfill.mutable_create_time()->set_seconds(kMarch1AtNoon);
  backfill.mutable_start_time()->set_seconds(kMarch1AtNoon);
  backfill.mutable_update_time()->set_seconds(kMarch1At123456);
  return backfill;
}

// A ListNodes answer of a group of three replicas read at noon, March 1st:
// node-a live with three run leases and a publish, node-b (which answered)
// draining with a validate, node-c missing (its heartbeat 47s old) with an
// expired run lease. kGroupNodesText is how `backfillctl nodes` shows it.
inline v1::ListNodesResponse GroupNodes() {
  v1::ListNodesResponse response;
  response.set_group(true);
  response.mutable_read_time()->set_seconds(kMarch1AtNoon);
  const auto node = [&](const std::string& name, const std::string& address,
                        const std::string& version, int64_t heartbeat_age) {
    v1::Node* n = response.add_nodes();
    n->set_name(name);
    n->set_address(address);
    n->set_version(version);
    n->mutable_started_at()->set_seconds(kMarch1AtNoon - 86400);
    n->mutable_last_heartbeat()->set_seconds(kMarch1AtNoon - heartbeat_age);
    n->set_live(heartbeat_age <= 10);
    return n;
  };
  const auto lease = [](v1::Node* n, const std::string& job,
                        const std::string& step, int64_t token,
                        int64_t expires_in) {
    v1::NodeLease* l = n->add_leases();
    l->set_job_id(job);
    l->set_step(step);
    l->set_token(token);
    l->mutable_claimed_at()->set_seconds(kMarch1AtNoon - 600);
    l->mutable_expires_at()->set_seconds(kMarch1AtNoon + expires_in);
    l->set_live(expires_in > 0);
  };
  v1::Node* a = node("node-a", "10.0.0.5:50051", "0.4.0", 2);
  lease(a, "bf-10", "publish", 3, 9);
  lease(a, "bf-12", "run", 7, 8);
  lease(a, "bf-13", "run", 8, 9);
  lease(a, "bf-14", "run", 9, 7);
  v1::Node* b = node("node-b", "10.0.0.6:50051", "0.4.0", 1);
  b->set_draining(true);
  b->set_self(true);
  lease(b, "bf-11", "validate", 1, 5);
  v1::Node* c = node("node-c", "10.0.0.7:50051", "0.3.9", 47);
  lease(c, "bf-9", "run", 2, -37);
  return response;
}

inline constexpr char kGroupNodesText[] =
    "group of 3 replicas sharing the state store: 1 live, 1 draining, 1 "
    "missing\n"
    "NAME                ADDRESS         VERSION  HEARTBEAT  STATE     LEASES\n"
    "node-a              10.0.0.5:50051  0.4.0    2s ago     live      3 run, "
    "1 publish\n"
    "node-b (answering)  10.0.0.6:50051  0.4.0    1s ago     draining  1 "
    "validate\n"
    "node-c              10.0.0.7:50051  0.3.9    47s ago    missing   1 run\n"
    "\n"
    "JOB    NODE    STEP      TOKEN  EXPIRES\n"
    "bf-10  node-a  publish   3      in 9s\n"
    "bf-12  node-a  run       7      in 8s\n"
    "bf-13  node-a  run       8      in 9s\n"
    "bf-14  node-a  run       9      in 7s\n"
    "bf-11  node-b  validate  1      in 5s\n"
    "bf-9   node-c  run       2      expired 37s ago\n";

// The ListNodes answer of a daemon alone on its state.db, and its text.
inline v1::ListNodesResponse AloneNode() {
  v1::ListNodesResponse response;
  response.mutable_read_time()->set_seconds(kMarch1AtNoon);
  v1::Node* n = response.add_nodes();
  n->set_name("host-1:50051");
  n->set_address("127.0.0.1:50051");
  n->set_version("0.4.0");
  n->mutable_started_at()->set_seconds(kMarch1AtNoon - 3600);
  n->set_live(true);
  n->set_self(true);
  return response;
}

inline constexpr char kAloneNodeText[] =
    "backfilld runs alone on its data dir's state.db: no group, no leases\n"
    "NAME                      ADDRESS          VERSION  HEARTBEAT  STATE  "
    "LEASES\n"
    "host-1:50051 (answering)  127.0.0.1:50051  0.4.0    -          live   -\n";

// True when `text` holds a byte a terminal acts on: C0 controls other than
// the newlines that end lines, DEL, or the UTF-8 of a C1 control.
inline bool HasTerminalControl(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n') || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < text.size() &&
        static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      return true;
    }
  }
  return false;
}

}  // namespace backfill::cli::format_testing

#endif  // BACKFILL_TESTS_TESTING_CLI_FORMAT_SAMPLES_H_
