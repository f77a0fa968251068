// What SQL text the engine did not write may call on PostgreSQL: the
// allow-list of built-in functions for an `affected_by` predicate and a
// transform, and a scan of the text for the names it calls.
//
// On PostgreSQL the engine checks a statement twice, by allow-list both
// times (pg_engine.cc for predicates, pg_hooks.cc for transforms):
//   1. Before anything is sent, the text's calls (a name directly followed
//      by '(', CalledNames) must each be an SQL keyword or a function of
//      the allow-list. This matters because the server folds calls of
//      immutable functions on constants while it plans: even EXPLAIN would
//      run repeat('x', 500000000).
//   2. The server's plan (EXPLAIN VERBOSE) names every relation the
//      statement reads and every function it calls after views, operators
//      and casts are resolved; those are checked again.
//
// Stateless free functions; thread-safe.

#ifndef BACKFILL_STORAGE_POSTGRES_PG_ALLOW_LIST_H_
#define BACKFILL_STORAGE_POSTGRES_PG_ALLOW_LIST_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace backfill::postgres {

// True for the built-in functions a predicate or a transform may call
// (lower-case names, as PostgreSQL folds unquoted ones): arithmetic, text
// that does not grow beyond its arguments, dates and times, JSON
// accessors, aggregates and window functions, and the function forms of
// casts. Functions that read files, the server's state or other queries,
// take locks, sleep, or build values of a size the call chooses (repeat,
// lpad, rpad, format, replace, regexp_replace, string_agg,
// generate_series) are not on it.
bool IsAllowedPgFunction(std::string_view name);

// True for the SQL keywords that may stand before '(' in an expression
// (AND (...), IN (...), EXISTS (...), CAST (...), ...).
bool IsPgKeyword(std::string_view name);

// A name in `sql` directly followed by '(' (blanks and comments between
// allowed), outside string literals and comments: unquoted ones
// lower-cased, quoted ones as written; for a qualified name (pg_catalog.f)
// the last part.
struct CalledName {
  std::string name;
  bool quoted = false;
  bool operator==(const CalledName& o) const {
    return name == o.name && quoted == o.quoted;
  }
};

// Every CalledName of `sql`, each once, in order of appearance.
// INVALID_ARGUMENT for text the scan cannot follow (an unterminated
// literal, quoted name or comment, a dollar-quoted or escape string).
absl::StatusOr<std::vector<CalledName>> CalledNames(std::string_view sql);

// The first name CalledNames finds in `sql` that is neither a keyword (an
// unquoted one) nor on the allow-list, in words for a refusal ("calls
// function pg_sleep, which is not on the allow-list of functions"); empty
// when there is none.
absl::StatusOr<std::string> FirstRefusedCall(std::string_view sql);

}  // namespace backfill::postgres

#endif  // BACKFILL_STORAGE_POSTGRES_PG_ALLOW_LIST_H_
