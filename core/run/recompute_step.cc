#include "core/run/recompute_step.h"

#include <utility>

namespace backfill {

RecomputeResult RecomputePartition(Engine* engine, const Planner& planner,
                                   const Clock& clock,
                                   const std::string& job_id,
                                   const DatasetSpec& dataset,
                                   PartitionTask task) {
  RecomputeResult out;
  const absl::Time start = clock.Now();
  absl::StatusOr<StageResult> staged =
      engine->StagePartition(job_id, dataset, task.partition,
                             planner.InputsOf(dataset, task.partition));
  out.took = clock.Now() - start;
  task.update_time = clock.Now();
  task.duration_seconds = absl::ToDoubleSeconds(out.took);
  if (staged.ok()) {
    task.state = TaskState::kStaged;
    task.rows_written = staged->rows_written;
    task.output_fingerprint = std::move(staged->output_fingerprint);
    task.inputs = std::move(staged->inputs);
    task.last_error.clear();
    out.timings = staged->timings;
  } else {
    out.status = staged.status();
    task.last_error = std::string(staged.status().message());
  }
  out.task = std::move(task);
  return out;
}

}  // namespace backfill
