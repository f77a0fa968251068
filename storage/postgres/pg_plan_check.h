// The plan check of SQL text the engine did not write, on PostgreSQL: what
// a statement's plan (EXPLAIN (VERBOSE, FORMAT JSON)) reads and calls,
// checked against what that text may read and call. The second of the
// PostgreSQL engine's two checks by allow-list (pg_allow_list.h says why
// there are two); the transforms of a job and `affected_by` predicates go
// through it.
//
// Stateless free function over a connection its caller holds.

#ifndef BACKFILL_STORAGE_POSTGRES_PG_PLAN_CHECK_H_
#define BACKFILL_STORAGE_POSTGRES_PG_PLAN_CHECK_H_

#include <functional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "storage/postgres/pg_connection.h"

namespace backfill::postgres {

// What a plan printed by EXPLAIN (VERBOSE, FORMAT JSON) reads and calls,
// checked against what SQL text the engine did not write may: relations
// for which `may_read(schema, table)` is true, and built-in functions of
// the allow-list (pg_allow_list.h); no function or operator of the
// database's own (user-defined: oid 16384 and up) whatever its name, but
// for `engine_functions`, the engine's own that its views call. Empty when
// the plan passes, else what it does in words ("reads table x.y").
absl::StatusOr<std::string> RefusedByPlan(
    PgConnection* conn, const PgValue& plan_json,
    const std::function<bool(const std::string&, const std::string&)>& may_read,
    const std::set<std::string>& engine_functions);

}  // namespace backfill::postgres

#endif  // BACKFILL_STORAGE_POSTGRES_PG_PLAN_CHECK_H_
