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

namespace backfill {
namespace client_backfillctl_test {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kUuidV4[] =
    "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}";

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs BACKFILL_BIN_DIR/backfillctl with `args`; collects its output.
RunResult RunBackfillctl(const std::vector<std::string>& args) {
  RunResult result;
  const std::string path = std::string(BACKFILL_BIN_DIR) + "/backfillctl";
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

  std::mutex mu_;
  int lost_submits_ = 0;
  std::vector<v1::BackfillRequest> requests_;
  std::vector<v1::SubmitBackfillRequest> submits_;
  std::map<std::string, std::string> jobs_;  // idempotency key -> job id
  std::vector<Decision> decisions_;
  std::vector<v1::ListBackfillsRequest> lists_;
  int listed_jobs_ = 0;
  std::vector<v1::ListPartitionsRequest> partition_lists_;
  std::vector<v1::RollbackBackfillRequest> rollbacks_;
  std::vector<v1::ApproveBackfillRequest> approvals_;
  std::vector<v1::DiffBackfillRequest> diffs_;
};

// The value of a "label  value" line of a job block.
std::string ValueOf(const std::string& block, const std::string& label) {
  for (absl::string_view line : absl::StrSplit(block, '\n')) {
    if (!absl::StartsWith(line, label + "  ")) continue;
    line.remove_prefix(label.size());
    return std::string(absl::StripLeadingAsciiWhitespace(line));
  }
  return "<no line " + label + ">";
}

// The lines of `text`, without empty ones.
std::vector<std::string> Lines(const std::string& text) {
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

std::vector<std::string> Plus(std::vector<std::string> args,
                              const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

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
}  // namespace client_backfillctl_test
}  // namespace backfill
