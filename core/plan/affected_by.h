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

#ifndef BACKFILL_CORE_PLAN_AFFECTED_BY_H_
#define BACKFILL_CORE_PLAN_AFFECTED_BY_H_

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/catalog.h"

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

// For engines (Engine::PartitionsMatching). Adds `partition`, the partition
// an engine computed for a row where the predicate holds, to `matching`
// when it is a partition of `dataset`: a key grain's value must be a
// declared key, a time x key value must name one. INVALID_ARGUMENT once
// more than `max_partitions` match, saying to narrow the predicate.
absl::Status AddMatchingPartition(const DatasetSpec& dataset,
                                  std::string_view predicate,
                                  size_t max_partitions, std::string partition,
                                  std::set<std::string>* matching);

// The errors of a predicate that an engine ran over `where` ("table T of
// dataset D"), as a client should read them: stopped after `timeout`
// (INVALID_ARGUMENT: make it cheaper), refused by the engine's sandbox
// because it `why` ("reads table x"; INVALID_ARGUMENT, saying that it may
// read only the columns of `where` and `also`), interrupted by a shutdown
// (UNAVAILABLE).
absl::Status PredicateRanTooLong(std::string_view predicate,
                                 absl::Duration timeout,
                                 std::string_view where);
absl::Status PredicateRefused(std::string_view predicate, std::string_view why,
                              std::string_view where, std::string_view also);
absl::Status PredicateInterrupted(std::string_view predicate);
// A predicate that made a string or blob over the engine's bound of
// `max_bytes` (INVALID_ARGUMENT: it is refused, not retried).
absl::Status PredicateTooBig(std::string_view predicate, int64_t max_bytes,
                             std::string_view where);

}  // namespace backfill

#endif  // BACKFILL_CORE_PLAN_AFFECTED_BY_H_
