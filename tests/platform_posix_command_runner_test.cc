// PosixCommandRunner with real programs: arguments reach the program
// verbatim (no shell), exit statuses and signals, the timeout kills the
// whole process group, output is capped without blocking the program.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/posix_command_runner.h"

namespace backfill {
namespace platform_posix_command_runner_test {
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

TEST(PosixCommandRunnerTest, TheProgramGetsAMinimalEnvironmentAndNoFds) {
  setenv("BF_TEST_SECRET_TOKEN", "s3cr3t", 1);
  setenv("LANG", "C.UTF-8", 1);
  // A descriptor the daemon holds open without close-on-exec.
  const int null = open("/dev/null", O_RDONLY);
  ASSERT_GE(null, 0);
  const int fd = fcntl(null, F_DUPFD, 100);  // high, apart from ls's own
  close(null);
  ASSERT_GE(fd, 100);
  PosixCommandRunner runner;
  absl::StatusOr<CommandResult> r = runner.Run(Command({"env"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->output, ::testing::Not(HasSubstr("BF_TEST_SECRET_TOKEN")));
  EXPECT_THAT(r->output, HasSubstr("LANG=C.UTF-8\n"));
  EXPECT_THAT(r->output, HasSubstr(absl::StrCat("PATH=", getenv("PATH"))));
  const std::vector<std::string> lines =
      absl::StrSplit(r->output, '\n', absl::SkipEmpty());
  for (const std::string& line : lines) {
    const std::string name = line.substr(0, line.find('='));
    EXPECT_TRUE(name == "PATH" || name == "LANG" || name == "HOME") << line;
  }
  // The program's own descriptors: 0, 1, 2 and the one `ls` opens itself.
  r = runner.Run(Command({"ls", "/proc/self/fd"}));
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::string> fds =
      absl::StrSplit(r->output, '\n', absl::SkipEmpty());
  EXPECT_LE(fds.size(), 4u) << r->output;
  EXPECT_THAT(fds, ::testing::Not(::testing::Contains(std::to_string(fd))));
  close(fd);
  unsetenv("BF_TEST_SECRET_TOKEN");
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
}  // namespace platform_posix_command_runner_test
}  // namespace backfill
