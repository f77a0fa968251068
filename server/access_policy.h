// AccessPolicy: who may call what. Every operation of the API requires one
// role, and a principal holds a set of roles:
//
//   viewer    reads: plan, get, list, watch, datasets, diff, why, audit,
//             partitions
//   operator  changes a job's course: submit, cancel, pause, resume, retry,
//             confirm
//   approver  decides what is published: approve, rollback
//   admin     everything
//
// Operator and approver include viewer (whoever may change a job may read
// it); admin includes every role. An operation this table does not name is
// refused to every principal but an admin, so that a method added to the
// API without a decision here is closed rather than open.
//
// Operations are named by their gRPC method name ("SubmitBackfill"): the
// names are the API's contract and this file needs nothing from gRPC.
//
// Pure functions and values; thread-safe.

#ifndef BACKFILL_SERVER_ACCESS_POLICY_H_
#define BACKFILL_SERVER_ACCESS_POLICY_H_

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace backfill {

enum class Role { kViewer, kOperator, kApprover, kAdmin };

// "viewer", "operator", "approver", "admin".
std::string_view RoleName(Role role);

// The role named `name` (exactly as RoleName() spells it); INVALID_ARGUMENT
// naming the four roles otherwise.
absl::StatusOr<Role> ParseRole(std::string_view name);

// Who is calling: an authenticated name and the roles it was given.
struct Principal {
  std::string name;
  std::set<Role> roles;
};

// "viewer, operator": the roles in the order of the enum.
std::string RoleList(const std::set<Role>& roles);

// The role operation `method` requires; nullopt for an operation the policy
// does not know (only an admin may call it).
std::optional<Role> RequiredRole(std::string_view method);

// Every operation the policy names, in no particular order.
std::vector<std::string_view> KnownOperations();

// Whether `principal` may call `method`.
bool MayCall(const Principal& principal, std::string_view method);

// Whether `principal` holds `role` or one that grants it (admin grants
// every role; operator and approver grant viewer).
bool HoldsRole(const Principal& principal, Role role);

// The name a record of an action keeps (who submitted, approved, rolled
// back): the authenticated principal, and the name the client claims only as
// "on behalf of" when it differs ("olivia (on behalf of ci-nightly)"). With
// no principal (authentication off) the claimed name, else `fallback`.
std::string ActingName(const std::optional<Principal>& principal,
                       const std::string& claimed, const std::string& fallback);

}  // namespace backfill

#endif  // BACKFILL_SERVER_ACCESS_POLICY_H_
