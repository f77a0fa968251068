#include "storage/sql/sql_staging_group.h"

#include <utility>

#include "core/base/status_macros.h"
#include "core/base/stopwatch.h"

namespace backfill::sql {

absl::StatusOr<StageResult> SqlEngine::Group::Stage(
    const std::string& partition, const std::vector<InputRef>& inputs) {
  ASSIGN_OR_RETURN(std::shared_ptr<const JobRegistry::Job> job,
                   engine_->JobToStage(job_id_, *dataset_, partition, inputs));
  if (pending_.empty()) {
    conn_.reset();
    RETURN_IF_ERROR(engine_->EnsureInputSignals(*job, inputs));
  }
  if (conn_ == nullptr) {
    ASSIGN_OR_RETURN(Lease conn, engine_->AcquireForStaging());
    RETURN_IF_ERROR(
        PrepareGroupTable(conn.get(), engine_->staging_hooks(), *dataset_));
    conn_ = std::move(conn);
  }
  StagingHooks& hooks = engine_->staging_hooks();
  TransformedPartition transformed;
  ASSIGN_OR_RETURN(
      StageResult result,
      TransformPartition(conn_.get(), hooks, *job, *dataset_, partition, inputs,
                         &unsignalled_, /*into_group=*/true, &transformed));
  RETURN_IF_ERROR(hooks.CloseTransform(conn_.get(), result.rows_written));
  pending_.push_back(std::move(transformed));
  job_ = std::move(job);
  return result;
}

absl::StatusOr<absl::Duration> SqlEngine::Group::Commit() {
  if (pending_.empty()) {
    conn_.reset();
    return absl::ZeroDuration();
  }
  Stopwatch write;
  absl::Status wrote = WriteStaged(conn_.get(), engine_->staging_hooks(), *job_,
                                   *dataset_, /*from_group=*/true, pending_);
  const absl::Duration took = write.Elapsed();
  pending_.clear();
  // Handed back (rolled back if the write failed): the next Stage makes
  // the group table again.
  conn_.reset();
  std::set<const DatasetSpec*> unsignalled;
  unsignalled.swap(unsignalled_);
  RETURN_IF_ERROR(wrote);
  RETURN_IF_ERROR(engine_->ReinstallSignals(unsignalled));
  return took;
}

}  // namespace backfill::sql
