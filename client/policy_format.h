// policy_format: the human renderings of the replay policies for
// `backfillctl policies` (ListReplayPolicies), `policies check`
// (EvaluateReplayPolicy) and `policies pause|resume` (the policy as it is
// afterwards). Pure functions from messages to text, like the other format
// units (client/cli_format.h); text from the server goes through
// TerminalText().
//
// Thread-safety: stateless and thread-safe.

#ifndef BACKFILL_CLIENT_POLICY_FORMAT_H_
#define BACKFILL_CLIENT_POLICY_FORMAT_H_

#include <string>

#include "backfill/v1/backfill.pb.h"

namespace backfill {
namespace cli {

// A table of the policies (dataset, triggers, window, frozen rule, paused,
// due now, last evaluation, last job), then a line per policy for what a
// table cell cannot hold: why it is paused, and what its last evaluation
// found frozen, unsettled or held, and its outcome.
std::string FormatReplayPolicies(
    const v1::ListReplayPoliciesResponse& response);

// One policy, as `policies pause|resume` leave it.
std::string FormatReplayPolicy(const v1::ReplayPolicy& policy);

// One evaluation: what is due and why the rest is not, the job it would
// submit (its reason, why it would wait for an approval, its plan) and the
// outcome.
std::string FormatReplayEvaluation(const v1::ReplayEvaluation& evaluation);

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_POLICY_FORMAT_H_
