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
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/job.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_pool.h"
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

// Write transactions run in READ COMMITTED, reads in one snapshot.
inline constexpr char kWriteMode[] = "";
inline constexpr char kReadMode[] =
    "ISOLATION LEVEL REPEATABLE READ, READ ONLY";

// The status of a call's result, whichever its type.
inline const absl::Status& StatusOf(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

// Runs `body(conn)` in one transaction of `mode` on a connection of `pool`,
// committed when it succeeds; again, up to `attempts` runs in all, when the
// server aborted it (a deadlock, a serialization failure: ABORTED). Returns
// what `body` returned, or the failure of the transaction around it.
template <typename Body>
auto InTransaction(postgres::PgPool* pool, const char* mode, int attempts,
                   Body&& body) {
  using Result = decltype(body(std::declval<postgres::PgConnection*>()));
  for (int attempt = 1;; ++attempt) {
    absl::StatusOr<postgres::PgPool::Lease> conn = pool->Acquire();
    if (!conn.ok()) return Result(conn.status());
    postgres::PgTransaction txn(conn->get());
    if (absl::Status s = txn.Begin(mode); !s.ok()) return Result(s);
    Result result = body(conn->get());
    absl::Status status = result.ok() ? txn.Commit() : absl::OkStatus();
    const absl::Status& failed = result.ok() ? status : StatusOf(result);
    if (failed.code() == absl::StatusCode::kAborted && attempt < attempts) {
      continue;  // rolled back by txn's destructor (or by the server)
    }
    if (!status.ok()) return Result(status);
    return result;
  }
}

}  // namespace backfill::pg_state

#endif  // BACKFILL_STORAGE_POSTGRES_STATE_PG_STATE_SQL_H_
