#include "storage/postgres/state/pg_state_sql.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace backfill::pg_state {

PgValue Text(std::string_view s) { return std::string(s); }
PgValue Int(int64_t v) { return absl::StrCat(v); }
PgValue Double(double v) { return absl::StrFormat("%.17g", v); }
PgValue Time(absl::Time t) {
  if (t == absl::InfinitePast() || t == absl::InfiniteFuture()) return Null();
  return Int(absl::ToUnixMicros(t));
}
PgValue Null() { return std::nullopt; }

bool ColIsNull(const Row& row, size_t i) {
  return i >= row.size() || !row[i].has_value();
}

std::string ColText(const Row& row, size_t i) {
  return ColIsNull(row, i) ? std::string() : *row[i];
}

int64_t ColInt(const Row& row, size_t i) {
  int64_t v = 0;
  if (ColIsNull(row, i)) return 0;
  if (!absl::SimpleAtoi(*row[i], &v)) {
    // A numeric (SUM of a bigint) prints as an integer too; a double
    // ("1e+20") is rounded.
    double d = 0;
    if (absl::SimpleAtod(*row[i], &d)) return static_cast<int64_t>(d);
  }
  return v;
}

double ColDouble(const Row& row, size_t i) {
  double v = 0;
  if (ColIsNull(row, i)) return 0;
  (void)absl::SimpleAtod(*row[i], &v);
  return v;
}

absl::Time ColTime(const Row& row, size_t i) {
  if (ColIsNull(row, i)) return absl::InfinitePast();
  return absl::FromUnixMicros(ColInt(row, i));
}

std::string Placeholders(int first, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    absl::StrAppend(&out, i ? ", " : "", "$", first + static_cast<int>(i));
  }
  return out;
}

void AppendStates(const std::vector<JobState>& states, Params* params) {
  for (JobState s : states) params->push_back(JobStateText(s));
}

void AppendStates(const std::vector<TaskState>& states, Params* params) {
  for (TaskState s : states) params->push_back(TaskStateText(s));
}

}  // namespace backfill::pg_state
