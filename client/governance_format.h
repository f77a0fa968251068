// governance_format: backfillctl's renderings for `why` (a partition's
// versions) and `audit` (JSON lines), and its parsing of `--since`.
//
// Pure functions over values; thread-safe.

#ifndef BACKFILL_CLIENT_GOVERNANCE_FORMAT_H_
#define BACKFILL_CLIENT_GOVERNANCE_FORMAT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backfill/v1/backfill.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace backfill {
namespace cli {

// The versions of a partition, newest first, as text for a terminal (one
// block per version, ending with its check results one per line; user text
// through TerminalText()).
std::string FormatPartitionHistory(const v1::ExplainPartitionResponse& history);

// One audit event as one line of protobuf JSON (proto field names, every
// primitive field printed, no whitespace), ending in "\n".
absl::StatusOr<std::string> AuditEventJsonLine(const v1::AuditEvent& event);

// `--since TIME`, RFC 3339, exactly one of:
//   YYYY-MM-DD                          that day, 00:00:00 UTC
//   YYYY-MM-DDTHH:MM:SS[.F]Z            UTC
//   YYYY-MM-DDTHH:MM:SS[.F]+HH:MM       (or -HH:MM) that offset from UTC
// with F 1 to 9 digits, a year 0001..9999, and digits exactly where the
// forms have them; "T" and "Z" may be lower case. The time must lie in
// 0001-01-01T00:00:00Z..9999-12-31T23:59:59.999999999Z (what the server
// takes). Anything else is INVALID_ARGUMENT naming --since and these forms.
absl::StatusOr<google::protobuf::Timestamp> ParseSince(absl::string_view text);

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_GOVERNANCE_FORMAT_H_
