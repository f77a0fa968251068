// AffectedBy: the `affected_by` scope of a backfill request,
// "DATASET: PREDICATE" — recompute the partitions of the target that are
// affected by the partitions of DATASET (the target itself or one of its
// upstreams) holding at least one row for which PREDICATE, an SQL boolean
// expression over DATASET's columns, is true.
//
// This file parses the text and checks the predicate's form without any
// engine: its length, its characters, and that it is ONE expression — every
// parenthesis it opens is closed inside it, it never closes one it did not
// open, it has no ';' and no unterminated string, quoted identifier or
// comment outside of which such characters could hide. Engines embed the
// predicate in a statement of their own (`... WHERE (\n<predicate>\n)`), so
// a predicate that passes cannot end that statement or escape its
// parentheses; what it may read and do is the engine's to enforce (see
// Engine::PartitionsMatching).
//
// Stateless free functions over value types; thread-safe.

#ifndef BACKFILL_CORE_AFFECTED_BY_H_
#define BACKFILL_CORE_AFFECTED_BY_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace backfill {

// The longest predicate accepted, in bytes (after trimming).
inline constexpr size_t kMaxPredicateBytes = 4096;

struct AffectedBy {
  std::string dataset;    // trimmed text before the first ':'
  std::string predicate;  // trimmed text after it
};

// Splits "DATASET: PREDICATE" at the first ':' and trims both parts; the
// predicate must pass CheckPredicate. INVALID_ARGUMENT naming the field
// (affected_by) and, where there is one, the predicate.
absl::StatusOr<AffectedBy> ParseAffectedBy(std::string_view text);

// Checks a predicate's form as described above: non-empty, at most
// kMaxPredicateBytes, no NUL or control character but tab and newline, and
// one expression. INVALID_ARGUMENT naming the predicate.
absl::Status CheckPredicate(std::string_view predicate);

// The predicate as error messages quote it: in double quotes, cut (at a
// UTF-8 character boundary) after about 200 bytes with "...".
std::string QuotePredicate(std::string_view predicate);

// "orders: refund > 0".
std::string AffectedByText(const AffectedBy& affected_by);

}  // namespace backfill

#endif  // BACKFILL_CORE_AFFECTED_BY_H_
