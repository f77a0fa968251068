// Runs the real backfillctl binary (CLI11 parsing included) against an
// in-process fake BackfillService that records what it receives: list
// items and text arguments are sent exactly as typed or refused before any
// RPC, with a usage error (exit 2) naming the flag.

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backfill/v1/backfill.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace backfill {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

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

// Records the BackfillRequest of every Plan and Submit; answers OK.
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
    response->mutable_backfill()->set_id("bf-1");
    response->mutable_backfill()->set_state(v1::BACKFILL_STATE_QUEUED);
    response->set_created(true);
    return grpc::Status::OK;
  }

  std::vector<v1::BackfillRequest> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void Record(const v1::BackfillRequest& request) {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(request);
  }

  std::mutex mu_;
  std::vector<v1::BackfillRequest> requests_;
};

class BackfillctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
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

}  // namespace
}  // namespace backfill
