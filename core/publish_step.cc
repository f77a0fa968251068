#include "core/publish_step.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/model/entity_keys.h"

namespace backfill {

std::vector<LineageRecord> LineageOf(
    const Job& job, std::vector<PartitionTask>&& tasks,
    const std::map<std::string, std::string>& versions, absl::Time now,
    int64_t* rows) {
  std::vector<LineageRecord> lineage;
  // Sized once: growing it would hold two copies at the moment it moves.
  lineage.reserve(std::count_if(
      tasks.begin(), tasks.end(),
      [](const PartitionTask& t) { return t.state == TaskState::kStaged; }));
  *rows = 0;
  for (PartitionTask& t : tasks) {
    if (t.state != TaskState::kStaged) continue;
    LineageRecord r;
    r.dataset = std::move(t.dataset);
    r.partition = std::move(t.partition);
    r.job_id = job.id;
    auto v = versions.find(r.dataset);
    if (v != versions.end()) r.transform_version = v->second;
    r.inputs = std::move(t.inputs);
    r.output_fingerprint = std::move(t.output_fingerprint);
    r.row_count = t.rows_written;
    r.reason = job.request.reason;
    if (!job.request.keys.empty() && r.dataset == job.request.dataset) {
      // The record is the whole partition's, but the job recomputed only
      // these keys' rows of it: say so where `why` shows it.
      absl::StrAppend(&r.reason, " (recomputed only the rows of entity keys ",
                      DescribeEntityKeys(job.request.keys, 5), ")");
    }
    r.ticket = job.request.ticket;
    r.requested_by = job.request.requested_by;
    r.published_at = now;
    r.approval = job.approval;
    *rows += t.rows_written;
    lineage.push_back(std::move(r));
  }
  std::vector<PartitionTask>().swap(tasks);
  return lineage;
}

}  // namespace backfill
