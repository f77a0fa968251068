#include "core/run/publish_step.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/plural.h"
#include "core/base/status_macros.h"
#include "core/governance/retention.h"
#include "core/model/entity_keys.h"
#include "core/plan/early_cutoff.h"
#include "core/run/crash_point.h"
#include "core/run/validate_step.h"

namespace backfill {
namespace {

using Storage = JobObserver::Storage;

// The entry of `dataset` in `datasets`, added (empty) at the end if
// missing.
JobObserver::PublishedDataset& DatasetEntry(
    std::vector<JobObserver::PublishedDataset>* datasets,
    const std::string& dataset) {
  for (JobObserver::PublishedDataset& d : *datasets) {
    if (d.dataset == dataset) return d;
  }
  datasets->emplace_back();
  datasets->back().dataset = dataset;
  return datasets->back();
}

// The lineage of a job's publish, built from its STAGED tasks as the state
// store reads them (PublicationLineage), with what the publish replaced
// (partitions and rows by dataset, in the order the tasks name them) and
// its audit message counted on the way.
class TaskLineage : public PublicationLineage {
 public:
  // `job`: the job's id, request and approval; `versions`: each dataset's
  // transform version; `cut`: the job's tasks the early cutoff settled.
  TaskLineage(const Job& job,
              const std::map<std::string, std::string>& versions,
              CutoffCounts cut, absl::Time now)
      : job_(job), versions_(versions), cut_(cut), now_(now) {}

  void Add(std::vector<PartitionTask>&& page,
           std::vector<LineageRecord>* lineage) override {
    AppendLineageOf(job_, std::move(page), versions_, now_, &rows_, lineage);
    for (const LineageRecord& record : *lineage) {
      JobObserver::PublishedDataset& d =
          DatasetEntry(&replaced_, record.dataset);
      ++d.partitions;
      d.rows += record.row_count;
      ++partitions_;
    }
  }

  std::string Message() const override {
    if (partitions_ == 0 && (cut_.unchanged > 0 || cut_.skipped > 0)) {
      return NothingChangedMessage(cut_);
    }
    return absl::StrCat("published ",
                        Plural(partitions_, "partition", "partitions"), " (",
                        rows_, " rows) atomically", CutoffNote(cut_));
  }

  const std::vector<JobObserver::PublishedDataset>& replaced() const {
    return replaced_;
  }

 private:
  const Job& job_;
  const std::map<std::string, std::string>& versions_;
  const CutoffCounts cut_;
  const absl::Time now_;
  int64_t partitions_ = 0;
  int64_t rows_ = 0;
  std::vector<JobObserver::PublishedDataset> replaced_;
};

// Tells the observer what the publish of `id` replaced (`published`:
// partitions and rows by dataset, from TaskLineage) and what each
// dataset cost.
void ReportPublished(
    const StepContext& ctx, const std::string& id,
    const std::vector<JobObserver::PublishedDataset>& published) {
  // Costs per dataset as the store reads them (actual input rows of the
  // recomputed tasks); a failed read reports the publish without them.
  absl::StatusOr<Job> job = ctx.store()->GetJobProgress(id);
  std::vector<JobObserver::PublishedDataset> datasets;
  if (job.ok()) {
    for (const DatasetPlan& dp : job->plan.datasets) {
      JobObserver::PublishedDataset& d = DatasetEntry(&datasets, dp.dataset);
      d.estimated_cost = dp.cost.backfill;
      d.full_reload_cost = dp.cost.full_reload;
      d.actual_cost = dp.actual_cost;
    }
  }
  for (const JobObserver::PublishedDataset& p : published) {
    JobObserver::PublishedDataset& d = DatasetEntry(&datasets, p.dataset);
    d.partitions += p.partitions;
    d.rows += p.rows;
  }
  ctx.observer()->OnJobPublished(id, datasets);
}

// The warehouse's side: publishes the job unless its marker says it did
// before a crash.
absl::Status PublishInWarehouse(const StepContext& ctx, ActiveJob* job) {
  const std::string& id = job->job.id;
  // Reads are retried: a transient error must not fail a job that may have
  // committed already.
  bool published = false;
  RETURN_IF_ERROR(
      ctx.Persist(Storage::kWarehouse, "reading publication markers",
                  [&]() -> absl::Status {
                    ASSIGN_OR_RETURN(published, ctx.engine()->IsPublished(id));
                    return absl::OkStatus();
                  }));
  if (published) return absl::OkStatus();
  bool complete, validated, overridden;
  JobLayout layout;
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    complete = job->layout_complete;
    validated = job->validated;
    // Only what changed is published (early_cutoff.h).
    layout = WithoutCutOff(job->layout, job->tasks);
    overridden =
        job->job.approval.has_value() && job->job.approval->override_validation;
  }
  if (!complete) {
    return absl::FailedPreconditionError(
        "a dataset of the job is no longer in the loaded pipelines");
  }
  if (!validated) {
    // Resumed into PUBLISHING: check the staging again first. Only that
    // staging is intact: the other checks were decided on before (an
    // approval may have accepted them).
    ASSIGN_OR_RETURN(ValidationOutcome outcome,
                     ValidateIntegrity(ctx, job, layout));
    if (overridden) {
      // An operator approved publishing despite these failures; only
      // staging that changed since stops the job.
      outcome.failures.clear();
    }
    if (!outcome.failures.empty() || !outcome.lost.empty()) {
      std::vector<std::string> failures = outcome.failures;
      if (!outcome.lost.empty()) {
        failures.push_back(
            absl::StrCat("staged rows were lost (", outcome.lost_summary, ")"));
      }
      return absl::DataLossError(
          absl::StrCat("staging changed before publishing: ",
                       absl::StrJoin(failures, "; ")));
    }
  }
  // A job whose partitions all came out unchanged (or were skipped) leaves
  // the warehouse as it is: no rows, marker or rollback copy.
  if (layout.items.empty()) return absl::OkStatus();
  return ctx.Persist(Storage::kWarehouse, absl::StrCat("publishing job ", id),
                     [&] { return ctx.engine()->Publish(layout); });
}

}  // namespace

absl::Status PublishJob(const StepContext& ctx, ActiveJob* job) {
  const std::string id = job->job.id;
  RETURN_IF_ERROR(PublishInWarehouse(ctx, job));
  CrashPoint("publish.before_record");

  // The warehouse has committed: record it, retrying until it is recorded
  // (or the runner stops; recovery then finds the publication marker).
  // What the lineage records name: the job's request and approval and each
  // dataset's transform version (not its plan's partitions, which the
  // tasks repeat: a copy of them is megabytes for a large job).
  std::map<std::string, std::string> versions;
  Job copy;
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    copy.id = job->job.id;
    copy.request = job->job.request;
    copy.approval = job->job.approval;
    for (const DatasetPlan& dp : job->job.plan.datasets) {
      versions[dp.dataset] = dp.transform_version;
    }
  }
  absl::MutexLock transition(&job->transition_mu);
  JobState from;
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    from = job->state;
  }
  std::string message;
  std::vector<JobObserver::PublishedDataset> replaced;
  absl::Status s = ctx.Persist(
      Storage::kStateStore, absl::StrCat("recording the publication of ", id),
      [&]() -> absl::Status {
        // Lineage from the checkpoints (the store's copy is authoritative
        // after a restart), built as the store reads the STAGED tasks a
        // page at a time inside its transaction: a large job's lineage is
        // never whole in memory.
        ASSIGN_OR_RETURN(const Job progress, ctx.store()->GetJobProgress(id));
        CutoffCounts cut;
        cut.unchanged = progress.counts.unchanged;
        cut.skipped = progress.counts.skipped;
        const absl::Time now = ctx.clock()->Now();
        TaskLineage lineage(copy, versions, cut, now);
        RETURN_IF_ERROR(ctx.store()->RecordPublication(
            id, lineage, JobState::kConfirming, now));
        message = lineage.Message();
        replaced = lineage.replaced();
        return absl::OkStatus();
      });
  if (!s.ok()) {
    // FAILED_PRECONDITION: the store holds the job in another state, which
    // retrying cannot change; leave it to recovery.
    return absl::CancelledError(s.message());
  }
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    job->state = JobState::kConfirming;
    job->job.message = message;
    ctx.jobs()->NotifyLocked(id);
  }
  if (ctx.observer() != nullptr) {
    ctx.observer()->OnJobTransition(id, from, JobState::kConfirming, message);
    if (from == JobState::kPublishing) ReportPublished(ctx, id, replaced);
  }
  return absl::OkStatus();
}

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
  AppendLineageOf(job, std::move(tasks), versions, now, rows, &lineage);
  return lineage;
}

void AppendLineageOf(const Job& job, std::vector<PartitionTask>&& tasks,
                     const std::map<std::string, std::string>& versions,
                     absl::Time now, int64_t* rows,
                     std::vector<LineageRecord>* lineage) {
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
    lineage->push_back(std::move(r));
  }
  std::vector<PartitionTask>().swap(tasks);
}

absl::StatusOr<int64_t> EnforceRetention(const StepContext& ctx,
                                         const LiveCatalog& catalog) {
  ASSIGN_OR_RETURN(std::vector<RollbackCopy> copies,
                   ctx.engine()->ListRollbackCopies());
  if (copies.empty()) return 0;
  std::vector<std::string> ids;
  for (const RollbackCopy& c : copies) {
    if (ids.empty() || ids.back() != c.job_id) ids.push_back(c.job_id);
  }
  ASSIGN_OR_RETURN(auto published, ctx.store()->PublicationTimes(ids));
  // A job being rolled back keeps its copies whatever their age.
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    for (const std::string& id : ctx.jobs()->rolling_back()) {
      published.erase(id);
    }
  }
  std::vector<RollbackCopy> expired =
      ExpiredCopies(copies, published, *catalog.Get(), ctx.clock()->Now());
  RETURN_IF_ERROR(ctx.engine()->DropRollbackCopies(expired));
  return static_cast<int64_t>(expired.size());
}

}  // namespace backfill
