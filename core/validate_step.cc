#include "core/validate_step.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace backfill {

absl::StatusOr<ValidationOutcome> ValidateStaging(
    Engine* engine, const JobLayout& layout,
    const std::vector<PartitionTask>& tasks) {
  // The checkpoints: task index per (dataset, partition).
  std::map<std::string, std::map<std::string, size_t>> checkpoint;
  for (size_t i = 0; i < tasks.size(); ++i) {
    checkpoint[tasks[i].dataset][tasks[i].partition] = i;
  }
  ValidationOutcome out;
  std::vector<std::string> lost_text;
  for (const JobLayout::Item& item : layout.items) {
    const std::string& name = item.dataset->name;
    ASSIGN_OR_RETURN(ValidationReport report,
                     engine->ValidateStaged(layout.job_id, *item.dataset));
    for (const std::string& f : report.failures) {
      out.failures.push_back(absl::StrCat(name, ": ", f));
    }
    // Staging must hold, per partition, what its checkpoint says was
    // written; otherwise rows were lost (or changed) after the checkpoint
    // and publishing would replace good partitions with missing ones.
    int64_t in_job = 0;
    for (const auto& [partition, index] : checkpoint[name]) {
      auto it = report.rows_by_partition.find(partition);
      const int64_t staged =
          it == report.rows_by_partition.end() ? 0 : it->second;
      in_job += staged;
      if (staged != tasks[index].rows_written) {
        out.lost.push_back(index);
        lost_text.push_back(absl::StrCat(
            name, ": ", partition.empty() ? "(all)" : partition, " (staged ",
            staged, ", checkpoint ", tasks[index].rows_written, ")"));
      }
    }
    if (in_job != report.rows) {
      out.failures.push_back(
          absl::StrCat(name, ": ", report.rows - in_job,
                       " staged rows belong to no partition of the job"));
    }
  }
  constexpr size_t kShown = 5;
  out.lost_summary = absl::StrJoin(
      lost_text.begin(), lost_text.begin() + std::min(lost_text.size(), kShown),
      "; ");
  if (lost_text.size() > kShown) {
    absl::StrAppend(&out.lost_summary, " and ", lost_text.size() - kShown,
                    " more");
  }
  return out;
}

}  // namespace backfill
