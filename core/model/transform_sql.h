// Transform SQL: what the service reads in the SQL text of a transform (and
// of a consumer's `expect` query) without a warehouse. One scan (ScanSql)
// understands '...' string literals, "...", `...` and [...] quoted
// identifiers, -- line comments and /* */ block comments; on it:
//
//   CanonicalTransform  the check that the text is one SELECT (or WITH ...
//                       SELECT) statement whose only parameters are bound
//                       ones, and the text as it is stored and run: trimmed,
//                       without a trailing ';' or the comments after the
//                       statement. The result is its own canonical form.
//   TransformVersion    the version of a transform: a hash of its text with
//                       comments removed and whitespace runs collapsed, so
//                       that reformatting does not change it (the
//                       `transform_version` lineage records).
//
// Catalog::Build canonicalizes every transform and versions it; the consumer
// spec canonicalizes `expect` queries. The parameters a text may use are
// judged by transform_parameters.h.
//
// Plain values and pure functions; thread-safe.

#ifndef BACKFILL_CORE_MODEL_TRANSFORM_SQL_H_
#define BACKFILL_CORE_MODEL_TRANSFORM_SQL_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/model/transform_parameters.h"

namespace backfill {

// One pass over SQL text that understands '...' literals, "...", `...` and
// [...] quoted identifiers, -- line comments and /* */ block comments.
struct SqlScan {
  // Comments removed, whitespace runs outside literals collapsed to one
  // space, trimmed; literals verbatim.
  std::string normalized;
  // Like `normalized` but with the contents of literals and quoted
  // identifiers removed: only code, for checks.
  std::string skeleton;
  // Offset in the input of the first ';' outside literals and comments.
  std::optional<size_t> first_semicolon;
  // Whether anything but whitespace, comments and ';' follows it.
  bool text_after_semicolon = false;
  // Offset just past the last significant character.
  size_t significant_end = 0;
  // Offset just past the last significant character before the first ';'
  // (of the whole text when there is none): where the statement ends.
  size_t statement_end = 0;
  std::string error;  // unterminated literal or comment
};

// Scans `sql` once. On an unterminated literal, quoted identifier or
// comment, `error` says which and the other fields describe the text up to
// it.
SqlScan ScanSql(std::string_view sql);

// The version of a transform: hex of a 64-bit hash of its text with
// comments removed and runs of whitespace collapsed, so that reformatting
// does not change it.
std::string TransformVersion(std::string_view sql);

// Checks that `sql` is a single SELECT (or WITH ... SELECT) statement whose
// only parameters are :partition_start, :partition_end and :partition
// (in SQLite an unknown parameter would silently bind NULL; positional ?,
// ?NNN and @name, $name, #name parameters are rejected too), and returns it
// up to its last significant character: trimmed, without a trailing ';' or
// the comments after the statement (comments before and inside it stay).
// The result is its own canonical form. Comments, string literals and quoted
// identifiers ("...", `...`, [...]) are understood. Errors are
// INVALID_ARGUMENT with the reason. The parameters `extra` allows are
// accepted too (see transform_parameters.h).
absl::StatusOr<std::string> CanonicalTransform(std::string_view sql,
                                               ExtraParameters extra = {});

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_TRANSFORM_SQL_H_
