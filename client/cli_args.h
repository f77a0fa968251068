// cli_args: backfillctl's checks of its own command-line values, made before
// anything is sent. A value is sent exactly as typed or not at all: list
// items are never trimmed and empty items never dropped, and text that is
// not UTF-8 (which the server refuses in every text field) is refused here
// with the flag's name. Errors are INVALID_ARGUMENT with a one-line message
// that names the flag; backfillctl prints it as a usage error (exit 2).
//
// Pure functions over values: they own nothing, keep no state and are
// thread-safe.

#ifndef BACKFILL_CLIENT_CLI_ARGS_H_
#define BACKFILL_CLIENT_CLI_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace backfill {
namespace cli {

// The items of a repeatable comma-separated list flag, in order, each
// exactly as typed. `raw` holds the flag's values as given, one per
// occurrence ("a,b" for `--partitions a,b`). Items are counted from 1 over
// all occurrences. An empty item (in "a,,b", "a,", ",a" or "") is refused:
//   --partitions: item 2 is empty ("a,,b")
// and so is one with leading or trailing whitespace:
//   --partitions: item 1 "2025-03-01 " has leading or trailing whitespace
// (the item is shown with C escapes, e.g. "\t", where it is not printable).
absl::StatusOr<std::vector<std::string>> SplitListFlag(
    absl::string_view flag, const std::vector<std::string>& raw);

// OK when `value` is well-formed UTF-8 (RFC 3629, the rule protobuf applies
// to `string` fields: text/utf8.h); else, for `what` = "--reason":
//   --reason is not valid UTF-8 (byte 0xff at offset 3); text arguments
//   must be UTF-8
absl::Status CheckUtf8(absl::string_view what, absl::string_view value);

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_CLI_ARGS_H_
