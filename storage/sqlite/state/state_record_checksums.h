// State record checksums: the checksum each record of the state store's
// main tables (jobs, job_datasets, tasks, lineage) carries in its own
// `checksum` column, so that damage SQLite's own checks cannot see is
// seen. PRAGMA integrity_check walks the b-trees and compares indexes with
// their tables, but not what a record holds in columns no index covers,
// nor the overflow pages that hold the rest of a long record: a zeroed
// page there reads back as other values (a job's cost, a task's inputs)
// without any error.
//
// A record's checksum is _bf_row_hash (sqlite_fingerprint_function.h) over
// its table's columns in the order of Table::columns, kept as a signed
// 64-bit integer. Writes set it in the same statement as the values (for
// an UPDATE: only when the record was intact before, so that a damaged
// record stays damaged); reads select IntactSql beside the values and
// report a record that fails it as DATA_LOSS naming the record
// (Damaged); VerifyAll reads every record (the store's start check).
//
// Free functions over constant tables; thread-safe. Statements built from
// them need _bf_row_hash registered on their connection.

#ifndef BACKFILL_STORAGE_SQLITE_STATE_STATE_RECORD_CHECKSUMS_H_
#define BACKFILL_STORAGE_SQLITE_STATE_STATE_RECORD_CHECKSUMS_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/sqlite/sqlite_db.h"

namespace backfill::state_records {

struct Table {
  std::string name;
  // Every column but `checksum` (and the lineage's rowid alias `id`), in
  // the order they are hashed.
  std::vector<std::string> columns;
  // The columns that name a record in messages, in RecordName's order.
  std::vector<std::string> key;
};

const Table& Jobs();
const Table& JobDatasets();
const Table& Tasks();
const Table& Lineage();
const std::vector<const Table*>& AllTables();

// Column name -> SQL expression of its new value in a statement.
using Values = std::map<std::string, std::string>;

// "_bf_row_hash(a.c1, ..., a.cn)" over `t`'s columns with alias `alias`
// ("" for none), each column named in `values` replaced by its expression.
std::string HashSql(const Table& t, std::string_view alias = "",
                    const Values& values = {});
// "(a.checksum IS _bf_row_hash(...))": 1 for an intact record.
std::string IntactSql(const Table& t, std::string_view alias = "");
// "(a.checksum IS NOT _bf_row_hash(...))": 1 for a damaged record.
std::string DamagedSql(const Table& t, std::string_view alias = "");
// For an UPDATE's SET list: "checksum = <new>" when the record was intact,
// its checksum as it was otherwise. `values` are the SET list's new values.
std::string ResealSql(const Table& t, const Values& values);
// For an INSERT's VALUES: the new record's checksum; `values` must name
// every column (the default of each column the INSERT leaves out, with
// the type it is stored with: 0.0 for a REAL column).
std::string InsertSql(const Table& t, const Values& values);

// What a record is called in messages: "job bf-17's record", "the record of
// job bf-17's task daily/2025-01-01", "the record of job bf-17's plan of
// dataset daily", "the lineage record of job bf-17 for daily/2025-01-01".
std::string JobRecord(std::string_view job_id);
std::string TaskRecord(std::string_view job_id, std::string_view dataset,
                       std::string_view partition);
std::string PlanRecord(std::string_view job_id, std::string_view dataset);
std::string LineageRecordName(std::string_view job_id, std::string_view dataset,
                              std::string_view partition);

// DATA_LOSS: "<record> in <path> fails its checksum: ..." with what to do.
absl::Status Damaged(std::string_view record, std::string_view path);

// Reads every record of AllTables(): "" when all are intact, otherwise
// what fails, e.g. "job bf-17's record fails its checksum (and 2 more
// records of jobs)", for the first table with a damaged record.
absl::StatusOr<std::string> VerifyAll(sqlite::Database* db);

}  // namespace backfill::state_records

#endif  // BACKFILL_STORAGE_SQLITE_STATE_STATE_RECORD_CHECKSUMS_H_
