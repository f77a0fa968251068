// Diff before publish: what a job would change in the published tables,
// per (dataset, partition), computed during validation from the staged rows
// and the published ones, kept with the job and shown to the operator before
// (and after) it publishes.
//
// How rows are compared:
//   - a dataset with a primary key: rows are matched by key. A staged key
//     that is not published is "added", a published key that is not staged
//     "removed"; a key on both sides is "changed" when any other contract
//     column differs (NULL equals NULL, NULL differs from any value: SQL's
//     IS NOT) and "unchanged" otherwise.
//   - a dataset without a primary key: rows are compared whole, as
//     multisets (a row staged twice and published once is one "added"
//     row); there is no "changed", a modified row is one removed and one
//     added. "unchanged" counts the rows common to both sides.
// Measures: the non-key contract columns of a numeric type (MeasureColumns);
// their totals before and after, per partition, NULLs ignored.
// Samples: a few differing rows per partition, changed ones first, then
// added, then removed, each ordered by key (by the whole row without a key),
// with their values as SQL literals ('text', 12.5, NULL).
//
// Plain value types and pure functions; thread-safe.

#ifndef BACKFILL_CORE_MODEL_DIFF_H_
#define BACKFILL_CORE_MODEL_DIFF_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "core/model/catalog.h"

namespace backfill {

// Sample rows a job keeps per partition (DiffBackfill shows at most these).
inline constexpr int kDiffStoredSamples = 10;

enum class DiffChange { kAdded, kRemoved, kChanged };
const char* DiffChangeName(DiffChange change);  // "added", ...

struct DiffSample {
  DiffChange change = DiffChange::kChanged;
  // The primary key's values (empty for a dataset without a key).
  std::vector<std::string> key;
  // The values of the dataset's value columns (DiffColumns::values) before
  // (published) and after (staged); empty for the side that has no row.
  std::vector<std::string> before;
  std::vector<std::string> after;
};

struct MeasureTotals {
  std::string column;
  double before = 0;  // total of the published rows of the partition
  double after = 0;   // total of the staged rows
};

struct PartitionDiff {
  std::string dataset;
  std::string partition;
  int64_t rows_before = 0;
  int64_t rows_after = 0;
  int64_t added = 0;
  int64_t removed = 0;
  int64_t changed = 0;
  int64_t unchanged = 0;
  std::vector<MeasureTotals> measures;  // in DiffColumns::measures order
  std::vector<DiffSample> samples;
  // Not empty when the diff of this partition could not be computed (the
  // counts above are then meaningless); the job goes on without it.
  std::string error;

  // Something would change: rows added, removed or changed.
  bool differs() const { return added > 0 || removed > 0 || changed > 0; }
};

// Which columns a dataset's diff compares, sums and shows.
struct DiffColumns {
  bool by_key = false;              // the dataset has a primary key
  std::vector<std::string> key;     // the primary key
  std::vector<std::string> values;  // contract columns not in the key
  std::vector<std::string> measures;
};

// The key, value and measure columns of a dataset, from its contract.
DiffColumns DiffColumnsOf(const DatasetSpec& dataset);

// The measure columns: contract columns outside the primary key and other
// than the partition column (and a time x key dataset's key column) whose
// declared type is numeric, i.e. has SQLite's
// INTEGER or REAL affinity (a type name containing INT, REAL, FLOA or DOUB)
// or names a decimal number (NUM, DEC); in contract order. Dates, text and
// blobs are never measures, nor are key columns (ids).
std::vector<std::string> MeasureColumns(const DatasetSpec& dataset);

struct DatasetDiff {
  std::string dataset;
  DiffColumns columns;
  std::vector<PartitionDiff> partitions;  // by partition
};

// The diff of a job as stored with it.
struct JobDiff {
  std::string job_id;
  absl::Time computed_at = absl::InfinitePast();
  std::vector<DatasetDiff> datasets;  // in plan order
};

// A job's diff without its partitions: what StateStore::ReplaceJobDiff
// stores with the partitions it is handed a page at a time (DiffPages).
struct JobDiffHeader {
  struct Dataset {
    std::string dataset;
    DiffColumns columns;
  };
  std::string job_id;
  absl::Time computed_at = absl::InfinitePast();
  std::vector<Dataset> datasets;  // in plan order
};

// `diff` without its partitions.
JobDiffHeader HeaderOf(const JobDiff& diff);
// The diff `header` describes, without partitions yet.
JobDiff EmptyDiffOf(const JobDiffHeader& header);

// Totals of a dataset's diff over its partitions.
struct DiffSummary {
  std::string dataset;
  DiffColumns columns;
  int64_t partitions = 0;
  int64_t partitions_changed = 0;  // partitions where differs()
  int64_t partitions_failed = 0;   // partitions with an error
  int64_t rows_before = 0;
  int64_t rows_after = 0;
  int64_t added = 0;
  int64_t removed = 0;
  int64_t changed = 0;
  int64_t unchanged = 0;
  std::vector<MeasureTotals> measures;  // summed over the partitions
};

DiffSummary Summarize(const DatasetDiff& diff);
// Adds partition `p` to `summary` (as Summarize does for each partition of
// a dataset whose summary starts from its name, columns and measures).
void AddToSummary(const PartitionDiff& p, DiffSummary* summary);

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_DIFF_H_
