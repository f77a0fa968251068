#include "bench/perf_history.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/model/pipeline_loader.h"
#include "core/plan/planner.h"
#include "storage/sqlite/sqlite_engine.h"
#include "storage/sqlite/state/sqlite_state_store.h"

namespace backfill::bench {

absl::Status RecordFinishedJobs(const std::string& data_dir,
                                const std::vector<BackfillRequest>& requests) {
  ASSIGN_OR_RETURN(Catalog catalog,
                   LoadPipelineDirectory(absl::StrCat(data_dir, "/pipelines")));
  const std::string warehouse =
      catalog.warehouse().path.empty()
          ? absl::StrCat(data_dir, "/warehouse.db")
          : absl::StrCat(data_dir, "/", catalog.warehouse().path);
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteEngine> engine,
                   SqliteEngine::Open(warehouse, 1, false));
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteStateStore> store,
                   SqliteStateStore::Open(absl::StrCat(data_dir, "/state.db")));
  ASSIGN_OR_RETURN(StoreInfo info, store->Info());
  RETURN_IF_ERROR(engine->Claim(info.store_id, false));
  Planner planner(&catalog, engine.get());
  for (const BackfillRequest& request : requests) {
    ASSIGN_OR_RETURN(Plan plan, planner.MakePlan(request));
    Job job;
    job.request = request;
    job.plan = std::move(plan);
    const absl::Time now = absl::Now();
    ASSIGN_OR_RETURN(CreateJobResult created, store->CreateJob(job, now));
    const std::string& id = created.job.id;
    RETURN_IF_ERROR(store->TransitionJob(id, JobState::kQueued,
                                         JobState::kRunning, "started", now));
    ASSIGN_OR_RETURN(int64_t staged,
                     store->UpdateTasksInState(id, {TaskState::kPending},
                                               TaskState::kStaged, now));
    (void)staged;
    RETURN_IF_ERROR(store->TransitionJob(id, JobState::kRunning,
                                         JobState::kValidating, "staged", now));
    RETURN_IF_ERROR(store->TransitionJob(id, JobState::kValidating,
                                         JobState::kPublishing, "valid", now));
    // The warehouse's side of the publication (its marker of the job): an
    // empty staging published, as the daemon publishes a job.
    JobLayout layout;
    layout.job_id = id;
    for (const DatasetPlan& dp : created.job.plan.datasets) {
      const DatasetSpec* spec = catalog.Find(dp.dataset);
      if (spec == nullptr || !spec->is_derived()) continue;
      layout.items.push_back({spec, dp.partitions, dp.keys});
    }
    RETURN_IF_ERROR(engine->PrepareJob(layout));
    RETURN_IF_ERROR(engine->Publish(layout));
    RETURN_IF_ERROR(store->RecordPublication(id, {}, JobState::kConfirming,
                                             "published", now));
    RETURN_IF_ERROR(store->TransitionJob(
        id, JobState::kConfirming, JobState::kSucceeded, "confirmed", now));
  }
  return absl::OkStatus();
}

}  // namespace backfill::bench
