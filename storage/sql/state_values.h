// State values: how a state store (the SQLite one, storage/sqlite/state/,
// and the PostgreSQL one, storage/postgres/state/) writes values that are
// not one SQL value into its columns, and reads them back. Engine-neutral:
// no SQLite, no libpq.
//
//   - Lists (a request's partitions, a task's or lineage record's input
//     fingerprints, a check's samples, a diff's columns, measure totals
//     and sample rows) are length-prefixed text: "<len>:<bytes>" per
//     field, which needs no escaping whatever the values contain. A list
//     that does not parse reads as DATA_LOSS.
//   - Measure totals are printed with 17 significant digits, which reads
//     back the same double.
//   - Job and task states are their names ("QUEUED", "STAGED").
//
// (Times are unix microseconds, NULL for "not yet": each store binds them
// with its own statements.) The formats are those of files already
// written: never change one. Ownership: none (values in, values out).
// Thread-safety: free functions without state, thread-safe.

#ifndef BACKFILL_STORAGE_SQL_STATE_VALUES_H_
#define BACKFILL_STORAGE_SQL_STATE_VALUES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model/diff.h"
#include "core/model/job.h"

namespace backfill::state_values {

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

std::string JobStateText(JobState s);
std::string TaskStateText(TaskState s);

}  // namespace backfill::state_values

#endif  // BACKFILL_STORAGE_SQL_STATE_VALUES_H_
