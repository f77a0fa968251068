// ErrorDetails: the machine-readable part of an error the API returns, so
// that a client can act on an error without parsing its message:
//
//  - a reason: a stable UPPER_SNAKE_CASE identifier of the error's cause
//    within the domain "backfilld" (e.g. "REASON_REQUIRED",
//    "BACKFILL_NOT_FOUND"), with metadata (e.g. {"backfill_id": "bf-3"});
//  - field violations: which request fields were wrong and why, each named
//    by its path in the request message (e.g. "request.reason").
//
// The core attaches them to the absl::Status it returns (as payloads, so a
// status stays an ordinary absl::Status and passes through every layer);
// the gRPC layer turns them into google.rpc.ErrorInfo and
// google.rpc.BadRequest details of the call's google.rpc.Status. A field is
// named relative to the message the core sees (BackfillRequest: "reason");
// the layer that wraps it in another message prefixes the path
// (PrefixFieldPaths).
//
// Messages name fields in backquotes (`reason`), the same names as the
// violations, so a client with other names for them (a CLI's flags) can
// say them its own way.
//
// Pure functions over values; thread-safe.

#ifndef BACKFILL_CORE_BASE_ERROR_DETAILS_H_
#define BACKFILL_CORE_BASE_ERROR_DETAILS_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace backfill {

// The domain of every reason the service gives.
inline constexpr char kErrorDomain[] = "backfilld";

struct FieldViolation {
  std::string field;        // path in the request, e.g. "request.reason"
  std::string description;  // why the value is refused

  bool operator==(const FieldViolation& other) const {
    return field == other.field && description == other.description;
  }
};

struct ErrorDetails {
  std::string reason;  // empty: none was attached
  std::map<std::string, std::string> metadata;
  std::vector<FieldViolation> field_violations;  // in the order attached
};

// `status` with `reason` (UPPER_SNAKE_CASE, at most 63 characters) and
// `metadata` (keys lowerCamel or snake_case, at most 64 characters) attached;
// replaces a reason attached before. An OK status is returned unchanged.
absl::Status WithReason(
    absl::Status status, absl::string_view reason,
    const std::map<std::string, std::string>& metadata = {});

// `status` with one more field violation; a second violation of the same
// field replaces the first. An OK status is returned unchanged.
absl::Status WithFieldViolation(absl::Status status, absl::string_view field,
                                absl::string_view description);

// The common case: INVALID_ARGUMENT with `message`, reason `reason` and a
// violation of `field` described by `message`.
absl::Status InvalidFieldError(absl::string_view field,
                               absl::string_view reason,
                               absl::string_view message);

// Everything attached to `status` (nothing for OK or a status without
// details).
ErrorDetails DetailsOf(const absl::Status& status);

// The longest prefix of `text` of at most `max_bytes` bytes that does not
// end inside a UTF-8 character (all of `text` when it fits).
absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes);

// `status` with every field violation's path prefixed by `prefix` and a dot
// ("reason" -> "request.reason"), except the paths in `top_level` (fields
// of the outer message) and those already starting with `prefix` + ".".
absl::Status PrefixFieldPaths(
    absl::Status status, absl::string_view prefix,
    const std::vector<absl::string_view>& top_level = {});

}  // namespace backfill

#endif  // BACKFILL_CORE_BASE_ERROR_DETAILS_H_
