#include "core/checks/partition_check.h"

#include "absl/strings/str_cat.h"

namespace backfill {

absl::StatusOr<std::vector<CheckResult>> PartitionCheck::Run(
    const CheckContext& c) {
  ResultBuilder out("partition", "partition", CheckSeverity::kError,
                    c.dataset->name,
                    "every staged row in one of the job's partitions");
  int64_t in_job = 0;
  for (const std::string& partition : c.partitions) {
    auto it = c.report->rows_by_partition.find(partition);
    if (it != c.report->rows_by_partition.end()) in_job += it->second;
  }
  const int64_t outside = c.report->rows - in_job;
  out.Whole(
      outside == 0,
      outside == 0
          ? absl::StrCat(RowsText(c.report->rows),
                         " staged, all inside the job's "
                         "partitions")
          : absl::StrCat(RowsText(outside), " outside the job's partitions"),
      outside == 0 ? "every staged row belongs to a partition of the job"
                   : absl::StrCat(outside,
                                  " staged rows belong to no partition of the "
                                  "job"));
  return out.Finish(/*summary=*/false);
}

}  // namespace backfill
