// State encoding: how the SQLite state store writes values that are not
// one SQL value into its columns, and reads them back.
//
//   - Lists (a request's partitions, a task's or lineage record's input
//     fingerprints, a check's samples, a diff's columns, measure totals
//     and sample rows) are length-prefixed text: "<len>:<bytes>" per
//     field, which needs no escaping whatever the values contain. A list
//     that does not parse reads as DATA_LOSS.
//   - Times are unix microseconds (rounded down), NULL for "not yet"
//     (absl::InfinitePast; an infinite time is written as NULL, so
//     InfiniteFuture reads back as InfinitePast).
//   - Measure totals are printed with 17 significant digits, which reads
//     back the same double.
//   - Job and task states are their names ("QUEUED", "STAGED").
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
#include "storage/sqlite/sqlite_db.h"

namespace backfill::sqlite_state {

std::string EncodeFields(const std::vector<std::string>& fields);
absl::StatusOr<std::vector<std::string>> DecodeFields(std::string_view in);

// Four fields per input: dataset, partition, fingerprint, rows.
std::string EncodeInputs(const std::vector<InputFingerprint>& inputs);
absl::StatusOr<std::vector<InputFingerprint>> DecodeInputs(
    std::string_view text);
// The rows of `inputs` summed (a task's input_rows column).
int64_t InputRows(const std::vector<InputFingerprint>& inputs);

// Two fields per measure, "before" and "after"; the column names are the
// diff's measure columns (`columns`, in order), kept once per dataset.
std::string EncodeMeasures(const std::vector<MeasureTotals>& measures);
absl::StatusOr<std::vector<MeasureTotals>> DecodeMeasures(
    std::string_view text, const std::vector<std::string>& columns);

// One field per sample, itself a list: the change, the three value
// counts, then the key's, before's and after's values.
std::string EncodeSamples(const std::vector<DiffSample>& samples);
absl::StatusOr<std::vector<DiffSample>> DecodeSamples(std::string_view text);

// Binds `t` as unix microseconds, or NULL for an infinite time.
absl::Status BindTime(sqlite::Statement& stmt, int index, absl::Time t);
// The time of column `index`: InfinitePast for NULL.
absl::Time ColumnTime(const sqlite::Statement& stmt, int index);

std::string JobStateText(JobState s);
std::string TaskStateText(TaskState s);
// Binds the names of `states` as ?first, ?first + 1, ... (the values of
// an "IN (...)" of Placeholders(first, states.size()), state_sql.h).
absl::Status BindStates(sqlite::Statement& stmt, int first,
                        const std::vector<JobState>& states);
absl::Status BindStates(sqlite::Statement& stmt, int first,
                        const std::vector<TaskState>& states);

}  // namespace backfill::sqlite_state

#endif  // BACKFILL_STORAGE_SQLITE_STATE_STATE_ENCODING_H_
