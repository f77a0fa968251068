// Bounded functions: SQLite's functions whose one call can run for seconds
// on values within the connection's length limit, replaced on one
// connection by versions that refuse such a call before doing any work.
//
// A sandboxed statement (sqlite_sandbox.h) is stopped once its time is up
// by a progress handler, but SQLite runs that handler between instructions
// of its virtual machine, never inside a function call. Some functions on
// the sandbox's allow-list do work that grows with the product of their
// arguments' sizes, so that one call on two values of a few megabytes runs
// for a minute or more:
//   instr(X, Y), replace(X, Y, Z), like(P, X[, E]) (the LIKE operator),
//   glob(P, X) (GLOB), ltrim/rtrim/trim(X, Y) and json_patch(T, P);
// and SQLite 3.40's printf/format repeats a `%c` whose precision is over
// the length limit character by character after giving up, about five
// seconds per 2^30 repetitions.
//
// InstallBoundedFunctions registers, on one connection, versions of these
// (same names and argument counts, deterministic and innocuous, as
// SQLite's) that
//   - refuse a call whose two sizing arguments' byte lengths multiply to
//     more than `max_work` (an error naming the function and the sizes);
//   - return NULL, as SQLite's printf does for a result far over the
//     length limit, when the `%c` repetitions of a format add up to more
//     than twice the connection's length limit;
//   - otherwise compute the call with SQLite's own function, on a private
//     in-memory connection given the caller's length and LIKE-pattern
//     limits, so that every result and error is SQLite's.
// Overriding LIKE turns off SQLite's LIKE optimization on that connection,
// and each call costs about a microsecond more: the engine installs them
// only on the connection that runs clients' predicates.
//
// Ownership: the functions, and the private connection they share, belong
// to the connection they are registered on and are freed when it closes.
// Thread-safety: as the connection: one thread at a time.

#ifndef BACKFILL_STORAGE_SQLITE_SQLITE_BOUNDED_FUNCTIONS_H_
#define BACKFILL_STORAGE_SQLITE_SQLITE_BOUNDED_FUNCTIONS_H_

#include <sqlite3.h>

#include <cstdint>

#include "absl/status/status.h"
#include "storage/sqlite/sqlite_db.h"

namespace backfill::sqlite {

// The most pairs of bytes one call may compare: a quarter of a second of
// the slowest of these functions (GLOB with a character class) on this
// class of machine.
inline constexpr int64_t kMaxCallWork = int64_t{1} << 26;

// The characters that the `%c` conversions of printf(argv[0], argv[1]...)
// write at least (their precisions, or 1), reading the format as SQLite
// 3.40's printf does: flags, width and precision in any order, `*` taking
// the next argument as an integer, an unknown conversion ending the output.
// 0 when argv[0] is NULL.
uint64_t PrintfCharRepetitions(int argc, sqlite3_value** argv);

// Replaces the functions named at the top of this file on `db`.
absl::Status InstallBoundedFunctions(Database* db,
                                     int64_t max_work = kMaxCallWork);

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_SQLITE_BOUNDED_FUNCTIONS_H_
