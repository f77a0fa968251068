#include "core/run/validate_step.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/plural.h"
#include "core/base/status_macros.h"
#include "core/checks/check_set.h"
#include "core/governance/approval.h"
#include "core/plan/early_cutoff.h"
#include "core/run/crash_point.h"
#include "core/run/diff_step.h"
#include "core/run/recompute_step.h"

namespace backfill {
namespace {

using Storage = JobObserver::Storage;

// Tells the observer about each failing check of a validation.
void ReportCheckFailures(const StepContext& ctx,
                         const std::vector<CheckResult>& results) {
  if (ctx.observer() == nullptr) return;
  // Once per failing check and dataset: a summary and its failing
  // partitions are one failure.
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  for (const CheckResult& r : results) {
    if (r.passed) continue;
    if (seen.emplace(r.check, r.kind, r.dataset).second) {
      ctx.observer()->OnCheckFailed(r.dataset, r.kind, r.severity);
    }
  }
}

// Staged rows vanished after their checkpoints (the warehouse lost
// writes): reopens those partitions and what read them, and moves the job
// back to RUNNING to recompute them.
absl::Status Restage(const StepContext& ctx, ActiveJob* job,
                     const ValidationOutcome& outcome) {
  std::vector<size_t> reopen;
  TaskTable tasks;
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    ++job->restage_rounds;
    TaskGraph copy = *job->graph;
    copy.Reopen(outcome.lost);
    for (size_t i = 0; i < copy.size(); ++i) {
      if (copy.state(i) == TaskGraph::Node::kPending &&
          job->graph->state(i) == TaskGraph::Node::kDone) {
        reopen.push_back(i);
      }
    }
    tasks = job->tasks;
  }
  bool released = false;
  for (size_t i : reopen) {
    PartitionTask t = tasks.Task(i);
    released = released || IsCutOff(t.state);
    t.state = TaskState::kPending;
    t.attempts = 0;
    t.last_error = "its staged rows were lost after the checkpoint";
    RETURN_IF_ERROR(ctx.Persist(Storage::kStateStore, "reopening a partition",
                                [&] { return ctx.store()->UpdateTask(t); }));
    tasks.Set(i, t);
  }
  if (released) {
    // Partitions the early cutoff had let go of run again: they become
    // the job's again in the engine.
    JobLayout full;
    {
      absl::MutexLock lock(ctx.jobs()->mu());
      full = job->layout;
    }
    RETURN_IF_ERROR(PrepareStaging(ctx, full, tasks));
  }
  RETURN_IF_ERROR(
      ctx.Move(job, JobState::kRunning,
               absl::StrCat(Plural(static_cast<int64_t>(outcome.lost.size()),
                                   "partition", "partitions"),
                            " lost staged rows after their checkpoints (",
                            outcome.lost_summary, "); recomputing ",
                            Plural(static_cast<int64_t>(reopen.size()),
                                   "partition", "partitions")),
               JobPhase::kFinishing));
  absl::MutexLock lock(ctx.jobs()->mu());
  for (size_t i : reopen) job->tasks.Set(i, tasks.Task(i));
  job->graph->Reopen(outcome.lost);
  job->phase = JobPhase::kRunning;
  return absl::OkStatus();
}

// Computes the diff of the job's staging and stores it with the job, timed
// as part of the validation (OnJobValidationTime) as much as the checks
// are.
absl::Status RecordDiffTimed(const StepContext& ctx, const std::string& id,
                             const JobLayout& layout) {
  const absl::Time start = ctx.clock()->Now();
  absl::Status recorded = RecordDiff(ctx, id, layout);
  if (ctx.observer() != nullptr) {
    ctx.observer()->OnJobValidationTime(
        id, std::max(ctx.clock()->Now() - start, absl::ZeroDuration()));
  }
  return recorded;
}

// `error` checks failed, or staging kept losing rows: VALIDATION_FAILED,
// held with its staging for a decision.
absl::Status FailValidation(const StepContext& ctx, ActiveJob* job,
                            const ValidationOutcome& outcome, int rounds) {
  std::vector<std::string> failures = outcome.failures;
  if (!outcome.lost.empty()) {
    failures.push_back(absl::StrCat(
        "staging does not hold what the partition checkpoints recorded (",
        outcome.lost_summary, ")",
        rounds > 0 ? absl::StrCat(" even after recomputing them ",
                                  Plural(rounds, "time", "times"))
                   : std::string(),
        "; staged rows were lost or changed after their checkpoints"));
  }
  std::string message =
      absl::StrCat("validation failed, nothing was published: ",
                   absl::StrJoin(failures, "; "));
  // What the operator can do next, when the checks judged intact staging.
  // Staging that keeps losing rows is the warehouse's fault: a new backfill
  // or an override would meet the same loss, so the report then says only
  // what happened.
  const std::string id = job->job.id;
  if (outcome.lost.empty()) {
    absl::StrAppend(&message, ". Read its diff (`DiffBackfill` ", id,
                    "); fix the data or the transform and submit a new "
                    "backfill, or publish it despite the failed checks "
                    "with `ApproveBackfill` ",
                    id, ", `override_validation` and a `reason`");
  }
  // Read before the move: once held, an operator may cancel the job and
  // `job` may go away.
  double estimate;
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    estimate = job->job.plan.cost.backfill;
  }
  RETURN_IF_ERROR(ctx.Move(job, JobState::kValidationFailed, message,
                           JobPhase::kFinishing, JobPhase::kHeld));
  ReportCheckFailures(ctx, outcome.results);
  ctx.ReportFinished(id, JobState::kValidationFailed, estimate);
  return absl::OkStatus();
}

// `hold` checks failed (and no `error` one): AWAITING_APPROVAL. Nothing
// blocks, but the job waits for an operator with its staging kept. It
// holds no partitions meanwhile: a newer overlapping job supersedes it
// (job_state_machine.h).
absl::Status HoldJob(const StepContext& ctx, ActiveJob* job,
                     const ValidationOutcome& outcome) {
  std::string message = absl::StrCat(
      "validation held the job for approval, nothing was published: ",
      absl::StrJoin(outcome.holds, "; "));
  if (!outcome.warnings.empty()) {
    absl::StrAppend(&message,
                    "; warnings: ", absl::StrJoin(outcome.warnings, "; "));
  }
  const std::string& id = job->job.id;
  absl::StrAppend(&message, ". Read its diff (`DiffBackfill` ", id,
                  "), then publish it with `ApproveBackfill` ", id,
                  " and a `reason`, or drop it with `CancelBackfill` ", id,
                  "; a newer backfill of the same partitions supersedes it");
  RETURN_IF_ERROR(ctx.Move(job, JobState::kAwaitingApproval, message,
                           JobPhase::kFinishing, JobPhase::kHeld));
  ReportCheckFailures(ctx, outcome.results);
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> DescribeFailures(
    const std::vector<CheckResult>& results, CheckSeverity severity,
    size_t max) {
  std::vector<std::string> lines;
  int64_t total = 0;
  for (const CheckResult& r : results) {
    if (r.severity != severity || r.passed) continue;
    if (r.summary) {
      // Partitions failed beyond those stored one by one.
      int64_t stored = 0;
      for (const CheckResult& d : results) {
        stored += !d.summary && !d.passed && d.check == r.check &&
                  d.dataset == r.dataset && !d.partition.empty();
      }
      total += std::max<int64_t>(0, r.partitions_failed - stored);
      continue;
    }
    ++total;
    if (lines.size() >= max) continue;
    lines.push_back(absl::StrCat(
        r.check, " on ", r.dataset,
        r.partition.empty() ? "" : absl::StrCat(" ", r.partition), ": ",
        r.message.empty() ? r.observed : r.message,
        r.samples.empty() ? ""
                          : absl::StrCat(" (e.g. ", r.samples.front(), ")")));
  }
  if (total > static_cast<int64_t>(lines.size())) {
    lines.push_back(absl::StrCat(
        "and ", total - static_cast<int64_t>(lines.size()), " more"));
  }
  return lines;
}

Checkpoints CheckpointsOf(const TaskTable& tasks) {
  Checkpoints checkpoints;
  for (size_t i = 0; i < tasks.size(); ++i) {
    // The early cutoff let go of these: nothing of them is staged.
    if (IsCutOff(tasks.state(i))) continue;
    checkpoints[tasks.dataset(i)][std::string(tasks.partition(i))] = {
        i, tasks.rows_written(i)};
  }
  return checkpoints;
}

absl::StatusOr<ValidationOutcome> ValidateStaging(
    Engine* engine, const JobLayout& layout,
    const std::vector<PartitionTask>& tasks, const ValidateOptions& options) {
  return ValidateStaging(engine, layout, CheckpointsOf(TaskTable(tasks)),
                         options);
}

absl::StatusOr<ValidationOutcome> ValidateStaging(
    Engine* engine, const JobLayout& layout, const Checkpoints& checkpoints,
    const ValidateOptions& options) {
  ValidationOutcome out;
  std::vector<std::string> lost_text;
  std::map<std::string, ValidationReport> reports;
  for (const JobLayout::Item& item : layout.items) {
    const std::string& name = item.dataset->name;
    ASSIGN_OR_RETURN(ValidationReport report,
                     engine->ValidateStaged(layout.job_id, *item.dataset));
    // Staging must hold, per partition, what its checkpoint says was
    // written; otherwise rows were lost (or changed) after the checkpoint
    // and publishing would replace good partitions with missing ones.
    auto own = checkpoints.find(name);
    if (own != checkpoints.end()) {
      for (const auto& [partition, checkpoint] : own->second) {
        auto it = report.rows_by_partition.find(partition);
        const int64_t staged =
            it == report.rows_by_partition.end() ? 0 : it->second;
        if (staged != checkpoint.rows_written) {
          out.lost.push_back(checkpoint.task);
          lost_text.push_back(absl::StrCat(
              name, ": ", partition.empty() ? "(all)" : partition, " (staged ",
              staged, ", checkpoint ", checkpoint.rows_written, ")"));
        }
      }
    }
    reports[name] = std::move(report);
  }
  const bool integrity_only = options.integrity_only || !out.lost.empty();
  for (const JobLayout::Item& item : layout.items) {
    const DatasetSpec& ds = *item.dataset;
    std::vector<std::unique_ptr<Check>> checks =
        ChecksFor(ds, options.catalog, integrity_only);
    CheckContext context;
    context.engine = engine;
    context.layout = &layout;
    context.dataset = &ds;
    static const std::vector<std::string>* const kWhole =
        new std::vector<std::string>{""};
    context.partitions = ds.partition ? item.partitions : *kWhole;
    context.report = &reports[ds.name];
    Profile staged;
    Profile published;
    if (!integrity_only) {
      ProfileRequest request;
      request.samples = kMaxSampleRows;
      for (const auto& check : checks) check->Require(&request);
      ASSIGN_OR_RETURN(staged,
                       engine->ProfileStaged(layout.job_id, ds, request));
      ASSIGN_OR_RETURN(published,
                       engine->ProfilePublished(layout.job_id, ds, request));
    }
    context.staged = &staged;
    context.published = &published;
    for (const auto& check : checks) {
      ASSIGN_OR_RETURN(std::vector<CheckResult> results, check->Run(context));
      for (CheckResult& r : results) out.results.push_back(std::move(r));
    }
  }
  out.failures = DescribeFailures(out.results, CheckSeverity::kError);
  out.holds = DescribeFailures(out.results, CheckSeverity::kHold);
  out.warnings = DescribeFailures(out.results, CheckSeverity::kWarn);
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

absl::StatusOr<ValidationOutcome> ValidateTimed(
    const StepContext& ctx, const std::string& id, const JobLayout& layout,
    const Checkpoints& checkpoints, const ValidateOptions& options) {
  const absl::Time start = ctx.clock()->Now();
  absl::StatusOr<ValidationOutcome> outcome =
      ValidateStaging(ctx.engine(), layout, checkpoints, options);
  if (ctx.observer() != nullptr) {
    // A clock set back meanwhile makes it 0, never negative.
    ctx.observer()->OnJobValidationTime(
        id, std::max(ctx.clock()->Now() - start, absl::ZeroDuration()));
  }
  return outcome;
}

absl::StatusOr<ValidationOutcome> ValidateIntegrity(const StepContext& ctx,
                                                    ActiveJob* job,
                                                    const JobLayout& layout) {
  RETURN_IF_ERROR(EnsurePrepared(ctx, job));
  Checkpoints checkpoints;
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    checkpoints = CheckpointsOf(job->tasks);
  }
  ValidateOptions integrity;
  integrity.catalog = job->catalog.get();
  integrity.integrity_only = true;
  return ValidateTimed(ctx, job->job.id, layout, checkpoints, integrity);
}

absl::Status ValidateJob(const StepContext& ctx, ActiveJob* job, bool* done) {
  *done = false;
  JobLayout layout;
  Checkpoints checkpoints;
  CutoffCounts cut;
  {
    // What validation reads of the tasks, without copying them.
    absl::MutexLock lock(ctx.jobs()->mu());
    checkpoints = CheckpointsOf(job->tasks);
    cut = CountCutOff(job->tasks);
    // Validation, diff and approval cover what the job would publish: the
    // partitions the early cutoff let go of are not the job's any more.
    layout = WithoutCutOff(job->layout, job->tasks);
  }
  RETURN_IF_ERROR(EnsurePrepared(ctx, job));
  ValidateOptions validate_options;
  validate_options.catalog = job->catalog.get();
  ASSIGN_OR_RETURN(
      ValidationOutcome outcome,
      ValidateTimed(ctx, job->job.id, layout, checkpoints, validate_options));
  Checkpoints().swap(checkpoints);
  CrashPoint("validate");
  int rounds;
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    rounds = job->restage_rounds;
  }
  if (!outcome.lost.empty() && outcome.failures.empty() &&
      rounds < ctx.options().max_restage_rounds) {
    RETURN_IF_ERROR(Restage(ctx, job, outcome));
    *done = true;
    return absl::OkStatus();
  }
  // The results replace those of an earlier validation (idempotent), and
  // are recorded before the state that follows from them.
  RETURN_IF_ERROR(
      ctx.Persist(Storage::kStateStore, "recording check results", [&] {
        return ctx.store()->ReplaceCheckResults(job->job.id, outcome.results);
      }));
  // Failed checks are counted once the state that follows from them is
  // recorded: a validation interrupted before that runs again after a
  // restart, and is counted then.
  // The diff before publish, whether the checks passed or not: an operator
  // reads it before approving (or overriding a failure).
  RETURN_IF_ERROR(RecordDiffTimed(ctx, job->job.id, layout));
  if (!outcome.failures.empty() || !outcome.lost.empty()) {
    RETURN_IF_ERROR(FailValidation(ctx, job, outcome, rounds));
    *done = true;
    return absl::OkStatus();
  }
  if (!outcome.holds.empty()) {
    RETURN_IF_ERROR(HoldJob(ctx, job, outcome));
    *done = true;
    return absl::OkStatus();
  }
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    job->validated = true;
  }
  // Approval policy: a dataset with `require_approval: true`, or the job's
  // own hold (a replay policy's) when it has something to publish, holds
  // the job in AWAITING_APPROVAL, with its diff ready to read.
  if (std::vector<std::string> needing = DatasetsRequiringApproval(layout);
      !needing.empty() ||
      (!job->job.approval_hold.empty() && !layout.items.empty())) {
    RETURN_IF_ERROR(ctx.Move(
        job, JobState::kAwaitingApproval,
        AwaitingApprovalMessage(job->job.id, needing, job->job.approval_hold),
        JobPhase::kFinishing, JobPhase::kHeld));
    ReportCheckFailures(ctx, outcome.results);
    *done = true;
    return absl::OkStatus();
  }
  int64_t total = 0;
  for (const JobLayout::Item& item : layout.items) {
    total += static_cast<int64_t>(item.partitions.size());
  }
  const size_t datasets = layout.items.size();
  absl::Status moved = ctx.Move(
      job, JobState::kPublishing,
      absl::StrCat(
          datasets == 0
              ? NothingChangedMessage(cut)
              : absl::StrCat("publishing ",
                             Plural(total, "partition", "partitions"), " of ",
                             datasets, " dataset(s) in one transaction",
                             CutoffNote(cut)),
          outcome.warnings.empty()
              ? std::string()
              : absl::StrCat("; warnings: ",
                             absl::StrJoin(outcome.warnings, "; "))),
      JobPhase::kFinishing);
  if (moved.ok()) ReportCheckFailures(ctx, outcome.results);  // warnings
  return moved;
}

}  // namespace backfill
