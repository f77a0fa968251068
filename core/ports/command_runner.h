// CommandRunner: runs a program with arguments (a `kind: command` consumer's
// invalidate or probe), never through a shell, with a timeout and a bound
// on the output it keeps. The core sees only this interface;
// platform/posix_command_runner.h implements it. Implementations are
// thread-safe.

#ifndef BACKFILL_CORE_PORTS_COMMAND_RUNNER_H_
#define BACKFILL_CORE_PORTS_COMMAND_RUNNER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace backfill {

struct CommandRequest {
  // argv[0] is the program: a path, or a name looked up in PATH. Each
  // element reaches the program as one argument, exactly as written.
  std::vector<std::string> argv;
  absl::Duration timeout = absl::Seconds(30);
  size_t max_output_bytes = size_t{64} << 10;  // of stdout; stderr keeps 4 KiB
};

struct CommandResult {
  int exit_code = -1;  // -1 when a signal ended it (see signal)
  int signal = 0;
  std::string output;  // stdout, at most max_output_bytes
  bool output_truncated = false;
  std::string error_output;  // stderr, at most 4 KiB
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;

  // The program's exit status and output, whatever the status. Errors:
  //   INVALID_ARGUMENT   empty argv
  //   NOT_FOUND          the program does not exist (or is not executable)
  //   DEADLINE_EXCEEDED  it ran past the timeout (it and its process group
  //                      were killed)
  //   INTERNAL           the system could not start or watch it
  virtual absl::StatusOr<CommandResult> Run(const CommandRequest& request) = 0;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_PORTS_COMMAND_RUNNER_H_
