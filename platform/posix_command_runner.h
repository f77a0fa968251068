// PosixCommandRunner: CommandRunner with posix_spawnp. The program runs in
// its own process group with stdin from /dev/null and stdout and stderr
// read through pipes; no shell is involved, so arguments are never
// interpreted. At the timeout the whole process group is killed (SIGKILL)
// and reaped. Output over the limit is read and dropped, so a chatty
// program never blocks on a full pipe. The program gets a minimal
// environment (PATH, LANG and HOME, when the daemon has them; nothing
// else) and no descriptor of the daemon but stdin, stdout and stderr.
// Thread-safe: each Run owns its process and pipes.

#ifndef BACKFILL_PLATFORM_POSIX_COMMAND_RUNNER_H_
#define BACKFILL_PLATFORM_POSIX_COMMAND_RUNNER_H_

#include "core/ports/command_runner.h"

namespace backfill {

class PosixCommandRunner final : public CommandRunner {
 public:
  absl::StatusOr<CommandResult> Run(const CommandRequest& request) override;
};

}  // namespace backfill

#endif  // BACKFILL_PLATFORM_POSIX_COMMAND_RUNNER_H_
