// BackfillctlTest: the fixture of the tests that run the real backfillctl
// binary (client_backfillctl_*_test.cc) against an in-process fake
// BackfillService on 127.0.0.1:0 that records what it receives and answers
// as backfilld would (RecordingService, below), with gRPC's health
// service.
//
// Owned by each test; the service's records are thread-safe (gRPC threads
// write them, the test reads them).

#ifndef BACKFILL_TESTS_TESTING_BACKFILLCTL_FIXTURE_H_
#define BACKFILL_TESTS_TESTING_BACKFILLCTL_FIXTURE_H_

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
#include "tests/testing/executable_dir.h"

namespace backfill::testing {

// A version 4 UUID, as a regular expression.
inline constexpr char kUuidV4[] =
    "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}";

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the build's backfillctl (beside the test, executable_dir.h) with
// `args`; collects its output.
inline RunResult RunBackfillctl(const std::vector<std::string>& args) {
  RunResult result;
  const std::string path = ExecutableDir() + "/backfillctl";
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const std::string& arg : args) {
    argv.push_back(const_cast<char*>(arg.c_str()));
  }
  argv.push_back(nullptr);
  int out_pipe[2];
  int err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) return result;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    close(out_pipe[0]);
    close(err_pipe[0]);
    close(out_pipe[1]);
    close(err_pipe[1]);
    execv(path.c_str(), argv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, 30000) <= 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// One call of a job decision (cancel, pause, resume, retry).
struct Decision {
  std::string method;
  std::string id;
  std::string reason;
};

// Records the BackfillRequest of every Plan and Submit, the whole
// SubmitBackfillRequest of every Submit, every job decision and every
// ListBackfills. A submit makes a job per new idempotency key and answers
// with it like backfilld (created false for a known key); the first
// `lost_submits` submits make their job but answer UNAVAILABLE, as when the
// answer is lost on the way back. Decisions answer with the job in the
// state the decision leads to, its message quoting the reason; job
// "bf-404" is NOT_FOUND, job "bf-9" FAILED_PRECONDITION.
class RecordingService final : public v1::BackfillService::Service {
 public:
  grpc::Status PlanBackfill(grpc::ServerContext*,
                            const v1::PlanBackfillRequest* request,
                            v1::PlanBackfillResponse*) override {
    Record(request->request());
    return grpc::Status::OK;
  }
  grpc::Status SubmitBackfill(grpc::ServerContext*,
                              const v1::SubmitBackfillRequest* request,
                              v1::SubmitBackfillResponse* response) override {
    Record(request->request());
    std::lock_guard<std::mutex> lock(mu_);
    submits_.push_back(*request);
    auto [job, created] = jobs_.try_emplace(
        request->idempotency_key(), absl::StrCat("bf-", jobs_.size() + 1));
    if (static_cast<int>(submits_.size()) <= lost_submits_) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset");
    }
    response->mutable_backfill()->set_id(job->second);
    response->mutable_backfill()->set_state(v1::BACKFILL_STATE_QUEUED);
    *response->mutable_backfill()->mutable_request() = request->request();
    response->mutable_backfill()->set_idempotency_key(
        request->idempotency_key());
    response->set_created(created);
    return grpc::Status::OK;
  }
  grpc::Status CancelBackfill(grpc::ServerContext*,
                              const v1::CancelBackfillRequest* request,
                              v1::Backfill* response) override {
    return Decide("CancelBackfill", request->id(), request->reason(),
                  v1::BACKFILL_STATE_CANCELLED, response);
  }
  grpc::Status PauseBackfill(grpc::ServerContext*,
                             const v1::PauseBackfillRequest* request,
                             v1::Backfill* response) override {
    return Decide("PauseBackfill", request->id(), request->reason(),
                  v1::BACKFILL_STATE_PAUSED, response);
  }
  grpc::Status ResumeBackfill(grpc::ServerContext*,
                              const v1::ResumeBackfillRequest* request,
                              v1::Backfill* response) override {
    return Decide("ResumeBackfill", request->id(), request->reason(),
                  v1::BACKFILL_STATE_QUEUED, response);
  }
  grpc::Status RetryBackfill(grpc::ServerContext*,
                             const v1::RetryBackfillRequest* request,
                             v1::Backfill* response) override {
    return Decide("RetryBackfill", request->id(), request->reason(),
                  v1::BACKFILL_STATE_QUEUED, response);
  }
  grpc::Status RollbackBackfill(grpc::ServerContext*,
                                const v1::RollbackBackfillRequest* request,
                                v1::Backfill* response) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      rollbacks_.push_back(*request);
    }
    grpc::Status status =
        Decide("RollbackBackfill", request->id(), request->reason(),
               v1::BACKFILL_STATE_ROLLED_BACK, response);
    if (!status.ok()) return status;
    v1::RollbackInfo* info = response->mutable_rollback();
    info->set_requested_by(request->requested_by());
    info->set_reason(request->reason());
    info->mutable_time()->set_seconds(1735689600);  // 2025-01-01 00:00 UTC
    info->set_forced(request->force());
    if (request->force()) info->add_also_rolled_back("bf-8");
    info->set_partitions_restored(3);
    info->set_rows_restored(12);
    return grpc::Status::OK;
  }
  // One job, bf-3; or, after set_listed_jobs(n), jobs bf-n .. bf-1 in
  // pages of at most 30 (the token: the number of the page's last job).
  grpc::Status ListBackfills(grpc::ServerContext*,
                             const v1::ListBackfillsRequest* request,
                             v1::ListBackfillsResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    lists_.push_back(*request);
    if (listed_jobs_ == 0) {
      v1::Backfill* job = response->add_backfills();
      job->set_id("bf-3");
      job->set_state(v1::BACKFILL_STATE_QUEUED);
      job->mutable_request()->set_dataset("daily_revenue");
      job->mutable_request()->set_reason("late\x1b[2J\ndata");
      return grpc::Status::OK;
    }
    int next = listed_jobs_;
    if (!request->page_token().empty())
      next = std::stoi(request->page_token()) - 1;
    const int size =
        std::min(request->page_size() == 0 ? 50 : request->page_size(), 30);
    for (int i = 0; i < size && next >= 1; ++i, --next) {
      v1::Backfill* job = response->add_backfills();
      job->set_id(absl::StrCat("bf-", next));
      job->set_state(v1::BACKFILL_STATE_SUCCEEDED);
      job->set_view(request->view());
      job->mutable_request()->set_dataset("daily_revenue");
    }
    if (next >= 1) response->set_next_page_token(absl::StrCat(next + 1));
    return grpc::Status::OK;
  }
  // Partitions 2025-06-01 .. 2025-06-05 of daily_revenue, in pages of at
  // most 2 (the token: the index of the next one); bf-404 is NOT_FOUND.
  grpc::Status ListPartitions(grpc::ServerContext*,
                              const v1::ListPartitionsRequest* request,
                              v1::ListPartitionsResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    partition_lists_.push_back(*request);
    if (request->backfill_id() == "bf-404") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no job bf-404");
    }
    int next =
        request->page_token().empty() ? 1 : std::stoi(request->page_token());
    for (int i = 0; i < 2 && next <= 5; ++i, ++next) {
      v1::BackfillPartition* p = response->add_partitions();
      p->set_dataset("daily_revenue");
      p->set_partition(absl::StrCat("2025-06-0", next));
      p->set_state(next == 3 ? v1::PARTITION_STATE_FAILED
                             : v1::PARTITION_STATE_PUBLISHED);
      p->set_attempts(next == 3 ? 3 : 1);
      p->set_rows_written(next == 3 ? 0 : 4);
      p->set_reason("requested");
      if (next == 3) p->set_last_error("disk \x1b[2Jfull");
    }
    if (next <= 5) response->set_next_page_token(absl::StrCat(next));
    return grpc::Status::OK;
  }

  // daily_revenue's published partitions in two pages: 2025-06-01
  // (current) and 2025-06-02 (stale, its reason with an escape sequence),
  // token "p2", then 2025-06-03 (due, restored by a rollback, confirmed by
  // a later job) and 2025-06-04 (frozen, held by bf-9); each page only
  // those of the freshness asked for, with the counts of all four. Dataset
  // "orders" is FAILED_PRECONDITION (a source), any other NOT_FOUND.
  grpc::Status ListDatasetPartitions(
      grpc::ServerContext*, const v1::ListDatasetPartitionsRequest* request,
      v1::ListDatasetPartitionsResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    dataset_partition_lists_.push_back(*request);
    if (request->dataset() == "orders") {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "orders is a source dataset: backfilld publishes "
                          "none of its partitions");
    }
    if (request->dataset() != "daily_revenue") {
      return grpc::Status(
          grpc::StatusCode::NOT_FOUND,
          absl::StrCat("unknown dataset \"", request->dataset(), "\""));
    }
    const bool second = request->page_token() == "p2";
    v1::ListDatasetPartitionsResponse left_out;  // not of the freshness asked
    const auto add = [&](const std::string& partition,
                         v1::PartitionFreshness freshness,
                         const std::string& job) -> v1::DatasetPartition* {
      const bool asked =
          request->freshness().empty() ||
          std::find(request->freshness().begin(), request->freshness().end(),
                    freshness) != request->freshness().end();
      v1::DatasetPartition* p =
          (asked ? response : &left_out)->add_partitions();
      p->set_partition(partition);
      p->set_freshness(freshness);
      p->set_backfill_id(job);
      p->set_kind(v1::VERSION_KIND_BACKFILL);
      p->mutable_time()->set_seconds(1735689600);  // 2025-01-01 00:00 UTC
      p->set_rows(4);
      p->set_transform_version("3f1c0b6e0a9d2c55");
      return p;
    };
    if (!second) {
      add("2025-06-01", v1::PARTITION_FRESHNESS_CURRENT, "bf-3");
      add("2025-06-02", v1::PARTITION_FRESHNESS_STALE, "bf-3")
          ->set_stale_reason("input orders/2025-06-02 changed\x1b[2J");
      response->set_next_page_token("p2");
    } else {
      v1::DatasetPartition* due =
          add("2025-06-03", v1::PARTITION_FRESHNESS_DUE, "bf-5");
      due->set_kind(v1::VERSION_KIND_ROLLBACK);
      due->set_confirmed_by_backfill_id("bf-7");
      due->set_stale_reason("transform version changed");
      v1::DatasetPartition* frozen =
          add("2025-06-04", v1::PARTITION_FRESHNESS_FROZEN, "bf-1");
      frozen->set_frozen(true);
      frozen->set_held_by_backfill_id("bf-9");
      frozen->set_stale_reason("input orders/2025-06-04 changed");
    }
    response->set_dataset(request->dataset());
    response->set_total(4);
    response->set_current(1);
    response->set_stale(1);
    response->set_due(1);
    response->set_frozen(1);
    response->set_frozen_rule("frozen.before 2025-06-04");
    response->mutable_evaluate_time()->set_seconds(1735689600);
    return grpc::Status::OK;
  }
  std::vector<v1::ListDatasetPartitionsRequest> dataset_partition_lists() {
    std::lock_guard<std::mutex> lock(mu_);
    return dataset_partition_lists_;
  }

  grpc::Status ApproveBackfill(grpc::ServerContext*,
                               const v1::ApproveBackfillRequest* request,
                               v1::Backfill* response) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      approvals_.push_back(*request);
    }
    v1::Approval approval;
    approval.set_approved_by(request->approved_by());
    approval.set_reason(request->reason());
    approval.set_override_validation(request->override_validation());
    approval.set_approved_state(request->override_validation()
                                    ? v1::BACKFILL_STATE_VALIDATION_FAILED
                                    : v1::BACKFILL_STATE_AWAITING_APPROVAL);
    grpc::Status status =
        Decide("ApproveBackfill", request->id(), request->reason(),
               v1::BACKFILL_STATE_PUBLISHING, response);
    if (status.ok()) *response->mutable_approval() = approval;
    return status;
  }
  // Two pages: 2025-06-01 (token ""), then 2025-06-02 and 2025-06-03.
  grpc::Status DiffBackfill(grpc::ServerContext*,
                            const v1::DiffBackfillRequest* request,
                            v1::DiffBackfillResponse* response) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      diffs_.push_back(*request);
    }
    if (request->id() == "bf-404") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no job bf-404");
    }
    response->set_id(request->id());
    response->set_state(v1::BACKFILL_STATE_AWAITING_APPROVAL);
    v1::DatasetDiff* d = response->add_datasets();
    d->set_dataset("daily_revenue");
    d->set_by_primary_key(true);
    d->add_key_columns("ds");
    d->add_key_columns("region");
    d->add_value_columns("revenue");
    d->add_value_columns("orders");
    d->set_partitions(3);
    d->set_partitions_changed(1);
    d->set_rows_before(12);
    d->set_rows_after(12);
    d->set_changed(2);
    d->set_unchanged(10);
    v1::MeasureDelta* m = d->add_measures();
    m->set_column("revenue");
    m->set_before(1000);
    m->set_after(987.5);
    m->set_delta(-12.5);
    auto add = [&](const std::string& day, int changed, double delta) {
      v1::PartitionDiff* p = response->add_partitions();
      p->set_dataset("daily_revenue");
      p->set_partition(day);
      p->set_rows_before(4);
      p->set_rows_after(4);
      p->set_changed(changed);
      p->set_unchanged(4 - changed);
      v1::MeasureDelta* pm = p->add_measures();
      pm->set_column("revenue");
      pm->set_delta(delta);
      if (changed > 0) {
        v1::DiffSampleRow* row = p->add_samples();
        row->set_change("changed");
        row->add_key("'2025-06-01'");
        row->add_key("'north\x1b[2J'");
        row->add_before("100");
        row->add_before("3");
        row->add_after("87.5");
        row->add_after("3");
      }
    };
    if (request->page_token().empty()) {
      add("2025-06-01", 2, -12.5);
      response->set_next_page_token("1");
    } else {
      add("2025-06-02", 0, 0);
      add("2025-06-03", 0, 0);
    }
    return grpc::Status::OK;
  }

  std::vector<v1::ApproveBackfillRequest> approvals() {
    std::lock_guard<std::mutex> lock(mu_);
    return approvals_;
  }
  std::vector<v1::DiffBackfillRequest> diffs() {
    std::lock_guard<std::mutex> lock(mu_);
    return diffs_;
  }

  void set_lost_submits(int count) {
    std::lock_guard<std::mutex> lock(mu_);
    lost_submits_ = count;
  }
  std::vector<v1::BackfillRequest> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::vector<v1::SubmitBackfillRequest> submits() {
    std::lock_guard<std::mutex> lock(mu_);
    return submits_;
  }
  std::vector<Decision> decisions() {
    std::lock_guard<std::mutex> lock(mu_);
    return decisions_;
  }
  std::vector<v1::ListBackfillsRequest> lists() {
    std::lock_guard<std::mutex> lock(mu_);
    return lists_;
  }
  // The replay policies: one, daily_revenue (paused when a pause was
  // recorded last), whose last evaluation found two partitions due and one
  // frozen; any other dataset is NOT_FOUND.
  grpc::Status ListReplayPolicies(
      grpc::ServerContext*, const v1::ListReplayPoliciesRequest*,
      v1::ListReplayPoliciesResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++policy_lists_;
    *response->add_policies() = PolicyLocked();
    return grpc::Status::OK;
  }
  grpc::Status EvaluateReplayPolicy(
      grpc::ServerContext*, const v1::EvaluateReplayPolicyRequest* request,
      v1::ReplayEvaluation* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    evaluations_.push_back(*request);
    if (request->dataset() != "daily_revenue") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("dataset \"", request->dataset(),
                                       "\" declares no replay policy"));
    }
    *response = EvaluationOf(request->submit());
    return grpc::Status::OK;
  }
  grpc::Status PauseReplayPolicy(grpc::ServerContext*,
                                 const v1::PauseReplayPolicyRequest* request,
                                 v1::ReplayPolicy* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    pauses_.push_back(*request);
    paused_reason_ = absl::StrCat("paused by ", request->requested_by(), ": ",
                                  request->reason());
    *response = PolicyLocked();
    return grpc::Status::OK;
  }
  grpc::Status ResumeReplayPolicy(grpc::ServerContext*,
                                  const v1::ResumeReplayPolicyRequest* request,
                                  v1::ReplayPolicy* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    resumes_.push_back(*request);
    paused_reason_.clear();
    *response = PolicyLocked();
    return grpc::Status::OK;
  }
  int policy_lists() {
    std::lock_guard<std::mutex> lock(mu_);
    return policy_lists_;
  }
  std::vector<v1::EvaluateReplayPolicyRequest> evaluations() {
    std::lock_guard<std::mutex> lock(mu_);
    return evaluations_;
  }
  std::vector<v1::PauseReplayPolicyRequest> pauses() {
    std::lock_guard<std::mutex> lock(mu_);
    return pauses_;
  }
  std::vector<v1::ResumeReplayPolicyRequest> resumes() {
    std::lock_guard<std::mutex> lock(mu_);
    return resumes_;
  }

  // The replicas: what set_nodes() set (an empty answer before), or
  // UNAVAILABLE with the message set_nodes_error() set.
  grpc::Status ListNodes(grpc::ServerContext*, const v1::ListNodesRequest*,
                         v1::ListNodesResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++node_lists_;
    if (!nodes_error_.empty()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, nodes_error_);
    }
    *response = nodes_;
    return grpc::Status::OK;
  }
  void set_nodes(const v1::ListNodesResponse& nodes) {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_ = nodes;
  }
  void set_nodes_error(const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_error_ = message;
  }
  int node_lists() {
    std::lock_guard<std::mutex> lock(mu_);
    return node_lists_;
  }

  void set_listed_jobs(int count) {
    std::lock_guard<std::mutex> lock(mu_);
    listed_jobs_ = count;
  }
  std::vector<v1::ListPartitionsRequest> partition_lists() {
    std::lock_guard<std::mutex> lock(mu_);
    return partition_lists_;
  }
  std::vector<v1::RollbackBackfillRequest> rollbacks() {
    std::lock_guard<std::mutex> lock(mu_);
    return rollbacks_;
  }

 private:
  void Record(const v1::BackfillRequest& request) {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(request);
  }
  grpc::Status Decide(const std::string& method, const std::string& id,
                      const std::string& reason, v1::BackfillState state,
                      v1::Backfill* response) {
    std::lock_guard<std::mutex> lock(mu_);
    decisions_.push_back({method, id, reason});
    if (id == "bf-404") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no job bf-404");
    }
    if (id == "bf-9") {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "job bf-9 is SUCCEEDED; it cannot be changed");
    }
    response->set_id(id);
    response->set_state(state);
    response->mutable_request()->set_dataset("daily_revenue");
    response->mutable_request()->set_reason("fix refunds");
    response->set_message(absl::StrCat(method, ": ", reason));
    return grpc::Status::OK;
  }

  static v1::ReplayEvaluation EvaluationOf(bool submit) {
    v1::ReplayEvaluation ev;
    ev.set_dataset("daily_revenue");
    ev.mutable_evaluated_at()->set_seconds(1735689600);
    ev.add_due_partitions("2025-06-30");
    ev.add_due_partitions("2025-09-10");
    ev.add_frozen_partitions("2025-02-10");
    ev.set_reason(
        "replay policy of daily_revenue: input_change: 2 partitions whose "
        "inputs changed since their last publish");
    ev.set_outcome(submit ? "submitted bf-12" : "would submit");
    if (submit) ev.set_backfill_id("bf-12");
    ev.set_created(submit);
    return ev;
  }
  v1::ReplayPolicy PolicyLocked() const {
    v1::ReplayPolicy p;
    p.set_dataset("daily_revenue");
    p.add_triggers("input_change");
    p.set_window("90d");
    p.set_check_every("5m");
    p.set_frozen("frozen.before 2025-03-01");
    p.set_paused(!paused_reason_.empty());
    p.set_paused_reason(paused_reason_);
    *p.mutable_last_evaluation() = EvaluationOf(false);
    p.set_last_backfill_id("bf-11");
    p.set_last_backfill_state(v1::BACKFILL_STATE_SUCCEEDED);
    return p;
  }

  std::mutex mu_;
  int lost_submits_ = 0;
  v1::ListNodesResponse nodes_;
  std::string nodes_error_;
  int node_lists_ = 0;
  int policy_lists_ = 0;
  std::vector<v1::EvaluateReplayPolicyRequest> evaluations_;
  std::vector<v1::PauseReplayPolicyRequest> pauses_;
  std::vector<v1::ResumeReplayPolicyRequest> resumes_;
  std::string paused_reason_;
  std::vector<v1::BackfillRequest> requests_;
  std::vector<v1::SubmitBackfillRequest> submits_;
  std::map<std::string, std::string> jobs_;  // idempotency key -> job id
  std::vector<Decision> decisions_;
  std::vector<v1::ListBackfillsRequest> lists_;
  int listed_jobs_ = 0;
  std::vector<v1::ListPartitionsRequest> partition_lists_;
  std::vector<v1::ListDatasetPartitionsRequest> dataset_partition_lists_;
  std::vector<v1::RollbackBackfillRequest> rollbacks_;
  std::vector<v1::ApproveBackfillRequest> approvals_;
  std::vector<v1::DiffBackfillRequest> diffs_;
};

// The value of a "label  value" line of a job block.
inline std::string ValueOf(const std::string& block, const std::string& label) {
  for (absl::string_view line : absl::StrSplit(block, '\n')) {
    if (!absl::StartsWith(line, label + "  ")) continue;
    line.remove_prefix(label.size());
    return std::string(absl::StripLeadingAsciiWhitespace(line));
  }
  return "<no line " + label + ">";
}

// The lines of `text`, without empty ones.
inline std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

class BackfillctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The gRPC health service, as backfilld serves it (for `health`).
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  void TearDown() override { server_->Shutdown(); }

  // backfillctl --server ADDRESS --timeout 10 ARGS...
  RunResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", address_, "--timeout", "10"});
    return RunBackfillctl(args);
  }

  // The partitions of the one request the service received.
  std::vector<std::string> SentPartitions() {
    std::vector<v1::BackfillRequest> requests = service_.requests();
    EXPECT_EQ(requests.size(), 1u);
    if (requests.size() != 1) return {};
    return {requests[0].partitions().begin(), requests[0].partitions().end()};
  }

  RecordingService service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

// `args` followed by `more`.
inline std::vector<std::string> Plus(std::vector<std::string> args,
                                     const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_BACKFILLCTL_FIXTURE_H_
