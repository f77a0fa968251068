// What the parts of the PostgreSQL state store (pg_state_jobs,
// pg_state_tasks, pg_state_lineage, pg_state_governance) share to run
// their statements: the values they bind ($1..$n, as text) and read back
// from PgResult rows, in the encodings of the SQLite state store (times
// are unix microseconds, NULL for "not yet"; lists are
// storage/sql/state_values.h).
//
// Every function of a part takes the connection of a transaction that its
// caller (PgStateStore) began and holds: a part never begins or commits
// anything itself, so that one StateStore call is one transaction. Every
// statement names its tables with the schema (backfill_state.jobs), so
// that no search_path is assumed. Identifiers are constants of this code;
// values are always bound.
//
// Ownership: none (values are returned by value; connections are the
// caller's). Thread-safety: free functions without state, thread-safe.

#ifndef BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_SQL_H_
#define BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_SQL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/job.h"
#include "storage/postgres/pg_connection.h"
#include "storage/sql/state_values.h"

namespace backfill::pg_state {

using postgres::PgConnection;
using postgres::PgResult;
using postgres::PgValue;
using Row = std::vector<PgValue>;
using Params = std::vector<PgValue>;

using state_values::DecodeFields;
using state_values::DecodeInputs;
using state_values::DecodeMeasures;
using state_values::DecodeSamples;
using state_values::EncodeFields;
using state_values::EncodeInputs;
using state_values::EncodeMeasures;
using state_values::EncodeSamples;
using state_values::InputRows;
using state_values::JobStateText;
using state_values::TaskStateText;

// Values to bind.
PgValue Text(std::string_view s);
PgValue Int(int64_t v);
PgValue Double(double v);  // 17 significant digits: reads back the same
// Unix microseconds, or NULL for an infinite time.
PgValue Time(absl::Time t);
PgValue Null();

// Column `i` of `row`: "" / 0 / InfinitePast for NULL.
std::string ColText(const Row& row, size_t i);
int64_t ColInt(const Row& row, size_t i);
double ColDouble(const Row& row, size_t i);
absl::Time ColTime(const Row& row, size_t i);
bool ColIsNull(const Row& row, size_t i);

// "$3, $4, $5": `n` placeholders numbered from `first`.
std::string Placeholders(int first, size_t n);

// The names of `states`, appended to `params` (the values of an
// "IN (...)" of Placeholders).
void AppendStates(const std::vector<JobState>& states, Params* params);
void AppendStates(const std::vector<TaskState>& states, Params* params);

}  // namespace backfill::pg_state

#endif  // BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_SQL_H_
