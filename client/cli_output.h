// CliOutput: how backfillctl answers — a result as text or (--json) as
// the message's JSON on stdout, an RPC failure or a usage error as one
// line on stderr in the CLI's own terms, and the exit code that goes with
// each.
//
// Exit codes: 0 success (for `submit --wait` and `watch`: the job
// SUCCEEDED); 1 an RPC failed or the job ended in another state; 2 usage
// error; 130 interrupted while following a job (the job keeps running).
//
// Owns a copy of the global options. Thread-compatible (one command at a
// time writes to the process's streams).

#ifndef BACKFILL_CLIENT_CLI_OUTPUT_H_
#define BACKFILL_CLIENT_CLI_OUTPUT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "client/cli_command_line.h"
#include "google/protobuf/message.h"

namespace backfill {
namespace cli {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInterrupted = 130;

// Prints `backfillctl: MESSAGE` on stderr (one line, control characters
// escaped) and returns `code`.
int Fail(int code, absl::string_view message);

class CliOutput {
 public:
  explicit CliOutput(const GlobalOptions& globals) : globals_(globals) {}

  // Prints an RPC failure as `backfillctl: CODE: message[; hint]` (`more`
  // appended); returns 1.
  int RpcError(const absl::Status& status, absl::string_view more = "") const;
  // Prints `message` as JSON in --json mode, `human` otherwise; returns 0
  // (1 when the JSON cannot be made).
  int Print(const google::protobuf::Message& message,
            const std::string& human) const;

  const GlobalOptions& globals() const { return globals_; }

 private:
  GlobalOptions globals_;
};

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_CLI_OUTPUT_H_
