#include "client/cli_policy_commands.h"

#include <iostream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/cli_format.h"

namespace backfill {
namespace cli {

std::string CheckPolicyOptions(const PolicyOptions& options) {
  const std::string& action = options.action;
  if (options.submit && action != "check") {
    return "--submit goes with `policies check` (evaluate now and submit "
           "what is due)";
  }
  if (!options.reason.empty() && action != "pause") {
    return "--reason goes with `policies pause DATASET --reason R`";
  }
  if (action.empty() && !options.dataset.empty()) {
    return absl::StrCat("unknown action \"", options.dataset,
                        "\": use check, pause or resume (or no action to "
                        "list the policies)");
  }
  if ((action == "pause" || action == "resume") && options.dataset.empty()) {
    return absl::StrCat("policies ", action, " needs the DATASET whose policy");
  }
  if (action == "pause" && absl::StripAsciiWhitespace(options.reason).empty()) {
    return "policies pause requires --reason \"why nothing is replayed for "
           "now\" (it is kept with the pause and in the audit log)";
  }
  return "";
}

PolicyCommands::PolicyCommands(const GlobalOptions& globals)
    : output_(globals),
      client_(BackfillClient::Connect(globals.server, globals.security)) {
  client_->set_rpc_timeout(absl::Seconds(globals.timeout_seconds));
  client_->set_token(globals.token);
}

int PolicyCommands::Run(const PolicyOptions& options) {
  if (options.action == "check") return Check(options);
  if (options.action == "pause") return Pause(options);
  if (options.action == "resume") return Resume(options);
  return List();
}

int PolicyCommands::List() {
  absl::StatusOr<v1::ListReplayPoliciesResponse> response =
      client_->ListReplayPolicies();
  if (!response.ok()) return output_.RpcError(response.status());
  return output_.Print(*response, FormatReplayPolicies(*response));
}

int PolicyCommands::Check(const PolicyOptions& options) {
  if (!options.dataset.empty()) {
    absl::StatusOr<v1::ReplayEvaluation> ev =
        client_->EvaluateReplayPolicy(options.dataset, options.submit);
    if (!ev.ok()) return output_.RpcError(ev.status());
    return output_.Print(*ev, FormatReplayEvaluation(*ev));
  }
  // Every policy, one evaluation each: one JSON document with them all
  // (as the last evaluation of each policy) with --json.
  absl::StatusOr<v1::ListReplayPoliciesResponse> policies =
      client_->ListReplayPolicies();
  if (!policies.ok()) return output_.RpcError(policies.status());
  if (policies->policies().empty()) {
    return output_.Print(*policies, FormatReplayPolicies(*policies));
  }
  v1::ListReplayPoliciesResponse all;
  std::string human;
  for (const v1::ReplayPolicy& policy : policies->policies()) {
    absl::StatusOr<v1::ReplayEvaluation> ev =
        client_->EvaluateReplayPolicy(policy.dataset(), options.submit);
    if (!ev.ok()) {
      return output_.RpcError(
          ev.status(), absl::StrCat(" (evaluating the policy of ",
                                    TerminalText(policy.dataset()), ")"));
    }
    v1::ReplayPolicy& out = *all.add_policies() = policy;
    *out.mutable_last_evaluation() = *ev;
    if (!human.empty()) human += "\n";
    human += FormatReplayEvaluation(*ev);
  }
  return output_.Print(all, human);
}

int PolicyCommands::Pause(const PolicyOptions& options) {
  absl::StatusOr<v1::ReplayPolicy> policy = client_->PauseReplayPolicy(
      options.dataset, options.reason, options.requested_by);
  if (!policy.ok()) return output_.RpcError(policy.status());
  return output_.Print(
      *policy, absl::StrCat(TerminalText(absl::StrCat(
                                "paused the replay policy of ", options.dataset,
                                "; nothing is submitted for it until "
                                "`backfillctl policies resume ",
                                options.dataset, "`")),
                            "\n\n", FormatReplayPolicy(*policy)));
}

int PolicyCommands::Resume(const PolicyOptions& options) {
  absl::StatusOr<v1::ReplayPolicy> policy = client_->ResumeReplayPolicy(
      options.dataset, options.requested_by, options.reason);
  if (!policy.ok()) return output_.RpcError(policy.status());
  return output_.Print(
      *policy,
      absl::StrCat(TerminalText(absl::StrCat(
                       "resumed the replay policy of ", options.dataset,
                       "; it is evaluated at the next look")),
                   "\n\n", FormatReplayPolicy(*policy)));
}

}  // namespace cli
}  // namespace backfill
