#include "storage/sql/validation.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "storage/sql/dialect.h"

namespace backfill::sql {

absl::StatusOr<ValidationReport> ValidateStaged(Connection* conn,
                                                const std::string& job_id,
                                                const DatasetSpec& dataset) {
  const Dialect& d = conn->dialect();
  const Relation stage_relation = d.Stage(job_id, dataset.name);
  const std::string stage = d.Name(stage_relation);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(conn, TxnMode::kSnapshot));
  ASSIGN_OR_RETURN(bool exists, conn->Exists(stage_relation));
  if (!exists) {
    return absl::FailedPreconditionError(
        absl::StrCat("nothing staged for ", dataset.name, " in job ", job_id));
  }
  ValidationReport report;
  ASSIGN_OR_RETURN(std::unique_ptr<Membership> member,
                   d.MembershipOf(conn, dataset, ""));
  ASSIGN_OR_RETURN(Result counts,
                   conn->Exec(absl::StrCat("SELECT ", member->Expression(),
                                           " AS _bf_p, COUNT(*) FROM ", stage,
                                           " GROUP BY 1")));
  for (const Row& row : counts.rows) {
    report.rows += row[1].integer;
    if (!row[0].null()) report.rows_by_partition[row[0].text] += row[1].integer;
  }
  // An unpartitioned dataset is one partition, staged rows or none.
  if (!dataset.partition) report.rows_by_partition[""] = report.rows;
  if (!dataset.primary_key.empty()) {
    std::vector<std::string> keys, quoted, is_null;
    for (const std::string& k : dataset.primary_key) {
      keys.push_back(Dialect::Quote(k));
      quoted.push_back(d.QuoteValue(Dialect::Quote(k)));
      is_null.push_back(absl::StrCat(Dialect::Quote(k), " IS NULL"));
    }
    const std::string key_list = absl::StrJoin(keys, ", ");
    const std::string key_names =
        absl::StrCat("(", absl::StrJoin(dataset.primary_key, ", "), ")");
    const int n = static_cast<int>(keys.size());
    auto example = [&](const Row& row) {
      std::vector<std::string> values;
      for (int i = 1; i <= n; ++i) values.push_back(row[i].text);
      return absl::StrCat("(", absl::StrJoin(values, ", "), ")");
    };
    ASSIGN_OR_RETURN(
        Result dups,
        conn->Exec(absl::StrCat(
            "SELECT COUNT(*) OVER (), ", absl::StrJoin(quoted, ", "),
            ", COUNT(*) FROM ", stage, " GROUP BY ", key_list,
            " HAVING COUNT(*) > 1 ORDER BY ", key_list, " LIMIT 1")));
    if (!dups.rows.empty()) {
      const Row& row = dups.rows[0];
      const int64_t count = row[0].integer;
      report.failures.push_back(absl::StrCat(
          dataset.name, ": ", count, count == 1 ? " key is" : " keys are",
          " not unique in the staged rows: primary key ", key_names, " = ",
          example(row), " appears ", row[n + 1].text, " times"));
    }
    ASSIGN_OR_RETURN(
        Result nulls,
        conn->Exec(absl::StrCat(
            "SELECT COUNT(*) OVER (), ", absl::StrJoin(quoted, ", "), " FROM ",
            stage, " WHERE ", absl::StrJoin(is_null, " OR "), " LIMIT 1")));
    if (!nulls.rows.empty()) {
      const int64_t count = nulls.rows[0][0].integer;
      report.failures.push_back(
          absl::StrCat(dataset.name, ": ", count,
                       count == 1 ? " staged row has" : " staged rows have",
                       " a NULL in primary key ", key_names, " (e.g. ",
                       example(nulls.rows[0]), ")"));
    }
  }
  RETURN_IF_ERROR(txn.Commit());
  return report;
}

}  // namespace backfill::sql
