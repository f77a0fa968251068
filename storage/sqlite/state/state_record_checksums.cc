#include "storage/sqlite/state/state_record_checksums.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"
#include "storage/sqlite/sqlite_fingerprint_function.h"

namespace backfill::state_records {
namespace {

std::string Column(std::string_view alias, const std::string& column) {
  const std::string quoted = sqlite::QuoteIdentifier(column);
  return alias.empty() ? quoted : absl::StrCat(Sv(alias), ".", quoted);
}

}  // namespace

const Table& Jobs() {
  static const Table* t = new Table{"jobs",
                                    {"id",
                                     "seq",
                                     "state",
                                     "dataset",
                                     "range_from",
                                     "range_to",
                                     "partitions",
                                     "reason",
                                     "ticket",
                                     "requested_by",
                                     "exclude_downstream",
                                     "idempotency_key",
                                     "request_fingerprint",
                                     "message",
                                     "create_time",
                                     "update_time",
                                     "start_time",
                                     "end_time",
                                     "cost_backfill",
                                     "cost_full_reload",
                                     "priority",
                                     "max_parallel",
                                     "affected_by",
                                     "max_cost",
                                     "auto_detect",
                                     "override_frozen",
                                     "approval_hold"},
                                    {"id"}};
  return *t;
}

const Table& JobDatasets() {
  static const Table* t =
      new Table{"job_datasets",
                {"job_id", "ordinal", "dataset", "reason", "cost_backfill",
                 "cost_full_reload", "transform_version", "estimate_source",
                 "partitions_from_history", "max_cost"},
                {"job_id", "dataset"}};
  return *t;
}

const Table& Tasks() {
  static const Table* t = new Table{
      "tasks",
      {"job_id", "dataset", "partition", "ordinal", "state", "attempts",
       "last_error", "rows_written", "output_fingerprint", "inputs",
       "input_rows", "duration_seconds", "update_time", "reason"},
      {"job_id", "dataset", "partition"}};
  return *t;
}

const Table& Lineage() {
  static const Table* t = new Table{
      "lineage",
      {"dataset", "partition", "job_id", "transform_version", "inputs",
       "output_fingerprint", "row_count", "reason", "ticket", "requested_by",
       "published_at", "approved_from", "approved_by", "approval_reason",
       "approval_override", "approved_at", "action"},
      {"job_id", "dataset", "partition"}};
  return *t;
}

const std::vector<const Table*>& AllTables() {
  static const auto* all = new std::vector<const Table*>{
      &Jobs(), &JobDatasets(), &Tasks(), &Lineage()};
  return *all;
}

std::string HashSql(const Table& t, std::string_view alias,
                    const Values& values) {
  std::vector<std::string> args;
  args.reserve(t.columns.size());
  for (const std::string& c : t.columns) {
    auto it = values.find(c);
    args.push_back(it != values.end() ? it->second : Column(alias, c));
  }
  return absl::StrCat(sqlite::kRowHashFunction, "(", absl::StrJoin(args, ", "),
                      ")");
}

std::string IntactSql(const Table& t, std::string_view alias) {
  return absl::StrCat("(", Column(alias, "checksum"), " IS ", HashSql(t, alias),
                      ")");
}

std::string DamagedSql(const Table& t, std::string_view alias) {
  return absl::StrCat("(", Column(alias, "checksum"), " IS NOT ",
                      HashSql(t, alias), ")");
}

std::string ResealSql(const Table& t, const Values& values) {
  return absl::StrCat("checksum = CASE WHEN ", IntactSql(t), " THEN ",
                      HashSql(t, "", values), " ELSE checksum END");
}

std::string InsertSql(const Table& t, const Values& values) {
  return HashSql(t, "", values);
}

std::string JobRecord(std::string_view job_id) {
  return absl::StrCat("job ", Sv(job_id), "'s record");
}

std::string TaskRecord(std::string_view job_id, std::string_view dataset,
                       std::string_view partition) {
  return absl::StrCat("the record of job ", Sv(job_id), "'s task ", Sv(dataset),
                      "/", Sv(partition));
}

std::string PlanRecord(std::string_view job_id, std::string_view dataset) {
  return absl::StrCat("the record of job ", Sv(job_id), "'s plan of dataset ",
                      Sv(dataset));
}

std::string LineageRecordName(std::string_view job_id, std::string_view dataset,
                              std::string_view partition) {
  return absl::StrCat("the lineage record of job ", Sv(job_id), " for ",
                      Sv(dataset), "/", Sv(partition));
}

absl::Status Damaged(std::string_view record, std::string_view path) {
  return absl::DataLossError(absl::StrCat(
      Sv(record), " in ", Sv(path),
      " fails its checksum: the file was damaged where SQLite's own checks "
      "do not look, and the record no longer holds what was written. "
      "Restore the file from a backup (stop backfilld, replace it and remove "
      "its -wal and -shm files)"));
}

absl::StatusOr<std::string> VerifyAll(sqlite::Database* db) {
  for (const Table* t : AllTables()) {
    std::vector<std::string> key;
    for (const std::string& c : t->key) key.push_back(Column("", c));
    ASSIGN_OR_RETURN(
        sqlite::Statement q,
        db->Prepare(absl::StrCat("SELECT ", absl::StrJoin(key, ", "),
                                 ", COUNT(*) OVER () FROM ", t->name, " WHERE ",
                                 DamagedSql(*t), " LIMIT 1")));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) continue;
    std::string record;
    if (t == &Jobs()) {
      record = JobRecord(q.ColumnText(0));
    } else if (t == &JobDatasets()) {
      record = PlanRecord(q.ColumnText(0), q.ColumnText(1));
    } else if (t == &Tasks()) {
      record = TaskRecord(q.ColumnText(0), q.ColumnText(1), q.ColumnText(2));
    } else {
      record =
          LineageRecordName(q.ColumnText(0), q.ColumnText(1), q.ColumnText(2));
    }
    absl::StrAppend(&record, " fails its checksum");
    const int64_t count = q.ColumnInt(static_cast<int>(t->key.size()));
    if (count > 1) {
      absl::StrAppend(&record, " (and ", count - 1, " more records of ",
                      t->name, ")");
    }
    return record;
  }
  return std::string();
}

}  // namespace backfill::state_records
