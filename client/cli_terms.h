// CliTerms: backfilld's error messages speak in API terms: a request field
// or a method in backquotes (`reason`, `from_partition`, `ListDatasets`).
// backfillctl says the same in its own terms: the flag that sets the field
// (--reason, --from), the command that calls the method (backfillctl
// datasets). These functions translate; a name the CLI has no term for is
// left as it is, without its backquotes.
//
// Pure functions over constant tables; thread-safe.

#ifndef BACKFILL_CLIENT_CLI_TERMS_H_
#define BACKFILL_CLIENT_CLI_TERMS_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace backfill::cli {

// The flag (or argument) that sets the request field at `path`, e.g.
// "request.reason" -> "--reason", "request.partitions[2]" -> "--partitions",
// "id" -> "JOB"; nullopt for a field the CLI does not set.
std::optional<std::string> FlagOfField(absl::string_view path);

// The command that calls `method`, e.g. "ListDatasets" -> "backfillctl
// datasets"; nullopt for a name that is no method.
std::optional<std::string> CommandOfMethod(absl::string_view method);

// `text` with each `name` in backquotes replaced by its flag or command, or
// by the bare name when the CLI has no term for it.
std::string InCliTerms(absl::string_view text);

}  // namespace backfill::cli

#endif  // BACKFILL_CLIENT_CLI_TERMS_H_
