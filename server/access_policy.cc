#include "server/access_policy.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace backfill {
namespace {

struct OperationRole {
  std::string_view method;
  Role role;
};

// Every method of backfill.v1.BackfillService. A test checks that the
// service declares no method missing here.
constexpr OperationRole kOperations[] = {
    {"PlanBackfill", Role::kViewer},
    {"GetBackfill", Role::kViewer},
    {"ListBackfills", Role::kViewer},
    {"WatchBackfill", Role::kViewer},
    {"ListDatasets", Role::kViewer},
    {"GetDataset", Role::kViewer},
    {"ListDatasetPartitions", Role::kViewer},
    {"DiffBackfill", Role::kViewer},
    {"ExplainPartition", Role::kViewer},
    {"ListAuditEvents", Role::kViewer},
    {"ListPartitions", Role::kViewer},
    {"SubmitBackfill", Role::kOperator},
    {"CancelBackfill", Role::kOperator},
    {"PauseBackfill", Role::kOperator},
    {"ResumeBackfill", Role::kOperator},
    {"RetryBackfill", Role::kOperator},
    {"ConfirmBackfill", Role::kOperator},
    {"ApproveBackfill", Role::kApprover},
    {"RollbackBackfill", Role::kApprover},
    {"ListReplayPolicies", Role::kViewer},
    {"EvaluateReplayPolicy", Role::kViewer},  // submitting: operator
    {"PauseReplayPolicy", Role::kOperator},
    {"ResumeReplayPolicy", Role::kOperator},
    {"ListNodes", Role::kViewer},
};

// Whether holding `held` grants `needed`.
bool Grants(Role held, Role needed) {
  if (held == needed || held == Role::kAdmin) return true;
  return needed == Role::kViewer &&
         (held == Role::kOperator || held == Role::kApprover);
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kOperator:
      return "operator";
    case Role::kApprover:
      return "approver";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

absl::StatusOr<Role> ParseRole(std::string_view name) {
  for (Role role :
       {Role::kViewer, Role::kOperator, Role::kApprover, Role::kAdmin}) {
    if (name == RoleName(role)) return role;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown role '", std::string(name),
                   "' (the roles are viewer, operator, approver and admin)"));
}

std::string RoleList(const std::set<Role>& roles) {
  std::string out;
  for (Role role : roles) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", std::string(RoleName(role)));
  }
  return out;
}

std::optional<Role> RequiredRole(std::string_view method) {
  for (const OperationRole& op : kOperations) {
    if (op.method == method) return op.role;
  }
  return std::nullopt;
}

std::vector<std::string_view> KnownOperations() {
  std::vector<std::string_view> out;
  for (const OperationRole& op : kOperations) out.push_back(op.method);
  return out;
}

bool MayCall(const Principal& principal, std::string_view method) {
  return HoldsRole(principal, RequiredRole(method).value_or(Role::kAdmin));
}

bool HoldsRole(const Principal& principal, Role role) {
  for (Role held : principal.roles) {
    if (Grants(held, role)) return true;
  }
  return false;
}

std::string ActingName(const std::optional<Principal>& principal,
                       const std::string& claimed,
                       const std::string& fallback) {
  if (!principal.has_value()) return claimed.empty() ? fallback : claimed;
  if (claimed.empty() || claimed == principal->name) return principal->name;
  return absl::StrCat(principal->name, " (on behalf of ", claimed, ")");
}

}  // namespace backfill
