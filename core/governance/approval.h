// Approval: the rules of an operator's decision to publish a job that waits
// for one — which jobs stop in AWAITING_APPROVAL (`require_approval: true`
// on a dataset they write), which approvals are accepted (a reason is
// required; a VALIDATION_FAILED job only with override), and the texts the
// job's message, the audit log and refusals carry. The job runner applies
// them (JobCommands::Approve); lineage keeps the approval of every version it
// published with one.
//
// Pure functions; thread-safe.

#ifndef BACKFILL_CORE_GOVERNANCE_APPROVAL_H_
#define BACKFILL_CORE_GOVERNANCE_APPROVAL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/model/job.h"
#include "core/ports/engine.h"

namespace backfill {

// Names of the layout's datasets with `require_approval: true`, in layout
// order; empty: the job publishes without an approval.
std::vector<std::string> DatasetsRequiringApproval(const JobLayout& layout);

// The message of a job that stops in AWAITING_APPROVAL: which datasets
// require approval, the job's own hold (Job::approval_hold, "": none), and
// how to read the diff and approve (or cancel).
std::string AwaitingApprovalMessage(const std::string& job_id,
                                    const std::vector<std::string>& datasets,
                                    const std::string& hold = "");

// INVALID_ARGUMENT, naming the field, when `approval` lacks a reason (blank
// text does not count).
absl::Status CheckApprovalRequest(const Approval& approval);

// True when `job` was approved and has moved on from the approval
// (PUBLISHING or later): approving it again returns it unchanged.
bool ApprovedAlready(const Job& job);

// Why `job` (as stored) cannot be approved now: FAILED_PRECONDITION naming
// its state and what to do instead. `held` tells whether the runner holds
// the job (with its staging) for a decision.
absl::Status RefuseApproval(const Job& job, const Approval& approval,
                            bool held);

// The audit / job message of an approval: "approved by alice: reason", with
// the override of failed validation spelled out.
std::string ApprovalMessage(const Approval& approval);

}  // namespace backfill

#endif  // BACKFILL_CORE_GOVERNANCE_APPROVAL_H_
