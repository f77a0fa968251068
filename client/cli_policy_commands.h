// PolicyCommands: `backfillctl policies` and its actions — list the replay
// policies, evaluate one (or every one) now and print what would be
// submitted (`check`, `--submit` to act), pause one with a reason, resume
// one — over the replay policy RPCs of BackfillClient, printed by
// client/policy_format.h and answered through CliOutput.
//
// Owns its connection to the server. Not thread-safe: one command per
// process.

#ifndef BACKFILL_CLIENT_CLI_POLICY_COMMANDS_H_
#define BACKFILL_CLIENT_CLI_POLICY_COMMANDS_H_

#include <memory>

#include "client/backfill_client.h"
#include "client/cli_command_line.h"
#include "client/cli_output.h"

namespace backfill {
namespace cli {

class PolicyCommands {
 public:
  explicit PolicyCommands(const GlobalOptions& globals);

  // Runs `options.action` ("" lists). Usage errors (a pause without
  // --reason, pause or resume without DATASET, --submit or --reason with
  // another action) are the caller's to refuse first (CheckPolicyOptions).
  int Run(const PolicyOptions& options);

 private:
  int List();
  int Check(const PolicyOptions& options);
  int Pause(const PolicyOptions& options);
  int Resume(const PolicyOptions& options);

  CliOutput output_;
  std::unique_ptr<BackfillClient> client_;
};

// The usage error of `options` ("" when they make sense together).
std::string CheckPolicyOptions(const PolicyOptions& options);

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_CLI_POLICY_COMMANDS_H_
