#include "storage/sqlite/state/state_encoding.h"

#include "core/base/status_macros.h"

namespace backfill::sqlite_state {

absl::Status BindTime(sqlite::Statement& stmt, int index, absl::Time t) {
  if (t == absl::InfinitePast() || t == absl::InfiniteFuture()) {
    return stmt.BindNull(index);
  }
  return stmt.BindInt(index, absl::ToUnixMicros(t));
}

absl::Time ColumnTime(const sqlite::Statement& stmt, int index) {
  if (stmt.ColumnIsNull(index)) return absl::InfinitePast();
  return absl::FromUnixMicros(stmt.ColumnInt(index));
}

absl::Status BindStates(sqlite::Statement& stmt, int first,
                        const std::vector<JobState>& states) {
  for (size_t i = 0; i < states.size(); ++i) {
    RETURN_IF_ERROR(
        stmt.BindText(first + static_cast<int>(i), JobStateText(states[i])));
  }
  return absl::OkStatus();
}

absl::Status BindStates(sqlite::Statement& stmt, int first,
                        const std::vector<TaskState>& states) {
  for (size_t i = 0; i < states.size(); ++i) {
    RETURN_IF_ERROR(
        stmt.BindText(first + static_cast<int>(i), TaskStateText(states[i])));
  }
  return absl::OkStatus();
}

}  // namespace backfill::sqlite_state
