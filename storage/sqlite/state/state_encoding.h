// State encoding: how the SQLite state store writes values that are not
// one SQL value into its columns, and reads them back. The engine-neutral
// encodings (lists, states) are storage/sql/state_values.h, shared with
// the PostgreSQL state store; this unit adds binding them to SQLite.
//
//   - Times are unix microseconds (rounded down), NULL for "not yet"
//     (absl::InfinitePast; an infinite time is written as NULL, so
//     InfiniteFuture reads back as InfinitePast).
//
// The formats are those of files already written: never change one.
// Free functions; thread-safe (a Statement is used by one thread).

#ifndef BACKFILL_STORAGE_SQLITE_STATE_STATE_ENCODING_H_
#define BACKFILL_STORAGE_SQLITE_STATE_STATE_ENCODING_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/diff.h"
#include "core/model/job.h"
#include "storage/sql/state_values.h"
#include "storage/sqlite/sqlite_db.h"

namespace backfill::sqlite_state {

// The engine-neutral encodings (storage/sql/state_values.h).
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

// Binds `t` as unix microseconds, or NULL for an infinite time.
absl::Status BindTime(sqlite::Statement& stmt, int index, absl::Time t);
// The time of column `index`: InfinitePast for NULL.
absl::Time ColumnTime(const sqlite::Statement& stmt, int index);

// Binds the names of `states` as ?first, ?first + 1, ... (the values of
// an "IN (...)" of Placeholders(first, states.size()), state_sql.h).
absl::Status BindStates(sqlite::Statement& stmt, int first,
                        const std::vector<JobState>& states);
absl::Status BindStates(sqlite::Statement& stmt, int first,
                        const std::vector<TaskState>& states);

}  // namespace backfill::sqlite_state

#endif  // BACKFILL_STORAGE_SQLITE_STATE_STATE_ENCODING_H_
