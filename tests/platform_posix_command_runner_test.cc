// PosixCommandRunner with real programs: arguments reach the program
// verbatim (no shell), exit statuses and signals, the timeout kills the
// whole process group, output is capped without blocking the program.

#include <signal.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/posix_command_runner.h"

namespace backfill {
namespace {

using ::testing::HasSubstr;

CommandRequest Command(std::vector<std::string> argv) {
  CommandRequest r;
  r.argv = std::move(argv);
  r.timeout = absl::Seconds(20);
  return r;
}

TEST(PosixCommandRunnerTest, ArgumentsAreNeverInterpreted) {
  PosixCommandRunner runner;
  absl::StatusOr<CommandResult> r = runner.Run(
      Command({"printf", "%s|", "$(echo hi)", "a b", "; rm -rf /", "*"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->output, "$(echo hi)|a b|; rm -rf /|*|");
}

TEST(PosixCommandRunnerTest, ExitStatusAndStderrAreReported) {
  PosixCommandRunner runner;
  absl::StatusOr<CommandResult> r =
      runner.Run(Command({"ls", "/no/such/path/at/all"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->exit_code, 0);
  EXPECT_THAT(r->error_output, HasSubstr("/no/such/path/at/all"));
  r = runner.Run(Command({"false"}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 1);
}

TEST(PosixCommandRunnerTest, ASignalIsNotAnExitCode) {
  PosixCommandRunner runner;
  // The test picks a shell as the program; the runner itself uses none.
  absl::StatusOr<CommandResult> r =
      runner.Run(Command({"sh", "-c", "kill -TERM $$"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(r->signal, SIGTERM);
}

TEST(PosixCommandRunnerTest, AMissingProgramIsNotFound) {
  PosixCommandRunner runner;
  EXPECT_EQ(runner.Run(Command({"/no/such/program"})).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(runner.Run(Command({"no-such-program-anywhere"})).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(runner.Run(Command({})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PosixCommandRunnerTest, TheTimeoutKillsTheProgramAndWhatItStarted) {
  PosixCommandRunner runner;
  CommandRequest r = Command({"sleep", "30"});
  r.timeout = absl::Milliseconds(200);
  const absl::Time start = absl::Now();
  absl::StatusOr<CommandResult> result = runner.Run(r);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded)
      << result.status();
  EXPECT_THAT(result.status().message(), HasSubstr("sleep 30"));
  // Well before sleep would have ended on its own.
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  // A program that closes its output but keeps running is still timed out.
  // The time left is rarely whole milliseconds: the message rounds it.
  r.timeout = absl::Milliseconds(159) + absl::Nanoseconds(590051);
  EXPECT_THAT(runner.Run(r).status().message(),
              HasSubstr("`sleep 30` did not finish within 159ms; it was "
                        "killed"));
  r = Command({"sh", "-c", "exec >&- 2>&-; sleep 30"});
  r.timeout = absl::Milliseconds(200);
  EXPECT_EQ(runner.Run(r).status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(PosixCommandRunnerTest, OutputIsCappedAndTheProgramStillEnds) {
  PosixCommandRunner runner;
  CommandRequest r = Command({"seq", "1", "200000"});  // ~1.3 MB
  r.max_output_bytes = 1000;
  absl::StatusOr<CommandResult> result = runner.Run(r);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 0);
  EXPECT_EQ(result->output.size(), 1000u);
  EXPECT_TRUE(result->output_truncated);
  EXPECT_EQ(result->output.substr(0, 6), "1\n2\n3\n");
}

}  // namespace
}  // namespace backfill
