#include "storage/sql/artifacts.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "storage/sql/dialect.h"
#include "storage/sql/engine_checks.h"

namespace backfill::sql {

std::optional<std::pair<std::string, std::string>> StoreJobOf(
    std::string_view rest, bool whole) {
  constexpr std::string_view kStoreJob = "bf_";
  if (rest.substr(0, kStoreJob.size()) != kStoreJob) return std::nullopt;
  rest.remove_prefix(kStoreJob.size());
  size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') {
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  if (whole ? digits != rest.size()
            : digits + 1 >= rest.size() || rest[digits] != '_') {
    return std::nullopt;
  }
  std::string after = whole ? "" : std::string(rest.substr(digits + 1));
  return std::make_pair(
      absl::StrCat("bf-", std::string(rest.substr(0, digits))),
      std::move(after));
}

absl::StatusOr<std::vector<std::string>> ListJobsWithStaging(Connection* conn) {
  return conn->dialect().ListJobSpaces(conn);
}

absl::Status DropStaging(Connection* conn, const std::string& job_id) {
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn, TxnMode::kWrite));
  RETURN_IF_ERROR(
      Annotate(conn->dialect().DropJobSpace(conn, job_id),
               absl::StrCat("dropping the staging of job ", job_id)));
  return txn.Commit();
}

absl::StatusOr<std::vector<RollbackCopy>> ListRollbackCopies(Connection* conn) {
  const Relation copies = conn->dialect().Copies();
  std::vector<RollbackCopy> out;
  {
    ASSIGN_OR_RETURN(Transaction txn,
                     Transaction::Begin(conn, TxnMode::kSnapshot));
    ASSIGN_OR_RETURN(std::vector<std::string> names,
                     conn->Tables(copies.schema, copies.name));
    for (const std::string& name : names) {
      if (auto job = StoreJobOf(
              std::string_view(name).substr(copies.name.size()), false)) {
        out.push_back(RollbackCopy{job->first, job->second});
      }
    }
    RETURN_IF_ERROR(txn.Commit());
  }
  std::sort(out.begin(), out.end(),
            [](const RollbackCopy& a, const RollbackCopy& b) {
              auto number = [](const std::string& id) {
                return std::make_pair(id.size(), id);
              };
              return std::make_pair(number(a.job_id), a.dataset) <
                     std::make_pair(number(b.job_id), b.dataset);
            });
  return out;
}

absl::Status DropRollbackCopies(Connection* conn,
                                const std::vector<RollbackCopy>& copies) {
  const Dialect& d = conn->dialect();
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn, TxnMode::kWrite));
  for (const RollbackCopy& copy : copies) {
    RETURN_IF_ERROR(
        conn->Exec(absl::StrCat("DROP TABLE IF EXISTS ",
                                d.Name(d.Copy(copy.job_id, copy.dataset))))
            .status());
  }
  return txn.Commit();
}

absl::Status DropCopiesOf(Connection* conn, const std::string& job_id) {
  const Dialect& d = conn->dialect();
  const Relation prefix = d.Copy(job_id, "");
  ASSIGN_OR_RETURN(std::vector<std::string> names,
                   conn->Tables(prefix.schema, prefix.name));
  for (const std::string& name : names) {
    RETURN_IF_ERROR(
        conn->Exec(absl::StrCat("DROP TABLE ", d.Name({prefix.schema, name})))
            .status());
  }
  return absl::OkStatus();
}

}  // namespace backfill::sql
