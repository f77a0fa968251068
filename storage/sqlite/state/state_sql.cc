#include "storage/sqlite/state/state_sql.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace backfill::sqlite_state {

const std::string& Once(std::string sql) {
  return *new std::string(std::move(sql));
}

std::string Placeholders(int first, size_t n) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < n; ++i) parts.push_back(absl::StrCat("?", first + i));
  return absl::StrJoin(parts, ", ");
}

}  // namespace backfill::sqlite_state
