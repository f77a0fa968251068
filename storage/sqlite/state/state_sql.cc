#include "storage/sqlite/state/state_sql.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"

namespace backfill::sqlite_state {

const std::string& Once(std::string sql) {
  return *new std::string(std::move(sql));
}

std::string Placeholders(int first, size_t n) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < n; ++i) parts.push_back(absl::StrCat("?", first + i));
  return absl::StrJoin(parts, ", ");
}

absl::Status DeleteRowsOfJob(const StateDb& db, const char* table,
                             const std::string& job_id) {
  ASSIGN_OR_RETURN(sqlite::Statement q,
                   db.db->PrepareCached(absl::StrCat("DELETE FROM ", table,
                                                     " WHERE job_id = ?1")));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  return q.Run();
}

}  // namespace backfill::sqlite_state
