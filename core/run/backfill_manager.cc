#include "core/run/backfill_manager.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/error_details.h"
#include "core/base/status_macros.h"
#include "core/model/entity_keys.h"
#include "core/model/fingerprint.h"
#include "core/plan/affected_by.h"
#include "core/plan/static_check.h"

namespace backfill {
namespace {

constexpr size_t kMaxReason = 4096;
constexpr size_t kMaxShortField = 256;
constexpr size_t kMaxConflictsShown = 100;
constexpr int kMaxPriority = 1000;
constexpr int kMaxParallel = 100000;

absl::Status CheckField(const char* name, const std::string& value,
                        size_t max) {
  if (value.size() > max) {
    return InvalidFieldError(name, "FIELD_TOO_LONG",
                             absl::StrCat("`", name, "` is ", value.size(),
                                          " bytes; at most ", max));
  }
  for (unsigned char c : value) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      return InvalidFieldError(
          name, "CONTROL_CHARACTER",
          absl::StrCat("`", name, "` contains a control character"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSubmit(const BackfillRequest& r, const std::string& key) {
  if (absl::StripAsciiWhitespace(r.reason).empty()) {
    return InvalidFieldError(
        "reason", "REASON_REQUIRED",
        "a reason is required: say in `reason` why this backfill runs; it is "
        "recorded in the lineage of every partition it publishes");
  }
  RETURN_IF_ERROR(CheckField("reason", r.reason, kMaxReason));
  RETURN_IF_ERROR(CheckField("ticket", r.ticket, kMaxShortField));
  RETURN_IF_ERROR(CheckField("requested_by", r.requested_by, kMaxShortField));
  RETURN_IF_ERROR(CheckField("idempotency key", key, kMaxShortField));
  if (!r.affected_by.empty()) {
    RETURN_IF_ERROR(ParseAffectedBy(r.affected_by).status());
  }
  if (r.priority < -kMaxPriority || r.priority > kMaxPriority) {
    return InvalidFieldError(
        "priority", "PRIORITY_OUT_OF_RANGE",
        absl::StrCat("`priority` ", r.priority, " is out of range: use -",
                     kMaxPriority, "..", kMaxPriority, " (default 0)"));
  }
  if (r.max_parallel < 0 || r.max_parallel > kMaxParallel) {
    return InvalidFieldError(
        "max_parallel", "MAX_PARALLEL_OUT_OF_RANGE",
        absl::StrCat("`max_parallel` ", r.max_parallel,
                     " is out of range: use 1..", kMaxParallel,
                     ", or 0 for no limit of the job's own"));
  }
  return absl::OkStatus();
}

}  // namespace

// A hash of what the request asks for, to recognize a re-submit.
std::string RequestFingerprint(const BackfillRequest& r) {
  std::vector<std::string> parts = r.partitions;
  std::sort(parts.begin(), parts.end());
  parts.erase(std::unique(parts.begin(), parts.end()), parts.end());
  std::string text;
  auto add = [&text](absl::string_view v) {
    absl::StrAppend(&text, v.size(), ":", v, ";");
  };
  add(r.dataset);
  add(r.from);
  add(r.to);
  add(absl::StrCat(parts.size()));
  for (const std::string& p : parts) add(p);
  add(r.reason);
  add(r.ticket);
  add(r.exclude_downstream ? "x" : "");
  if (r.priority != 0 || r.max_parallel != 0) {
    add(absl::StrCat(r.priority, "/", r.max_parallel));
  }
  if (!r.affected_by.empty()) {
    // Trimmed as the planner reads it ("orders:x>0" is "orders: x>0").
    absl::StatusOr<AffectedBy> parsed = ParseAffectedBy(r.affected_by);
    add("affected_by");
    add(parsed.ok() ? AffectedByText(*parsed) : r.affected_by);
  }
  if (r.auto_detect) add("auto_detect");
  if (r.override_frozen) add("override_frozen");
  if (r.max_cost != 0) add(absl::StrFormat("max_cost=%.17g", r.max_cost));
  if (!r.keys.empty()) {
    // Order and duplicates do not matter (the planner normalizes them).
    std::vector<std::string> keys = r.keys;
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    add("keys");
    add(absl::StrCat(keys.size()));
    for (const std::string& k : keys) add(k);
  }
  return HashHex(text);
}

namespace {

std::string DescribeRequest(const BackfillRequest& r) {
  std::string scope =
      r.auto_detect ? std::string(
                          "auto (partitions whose lineage no longer "
                          "matches)")
      : !r.affected_by.empty()
          ? absl::StrCat("affected by \"", r.affected_by, "\"")
      : !r.partitions.empty()
          ? absl::StrCat("partitions ", absl::StrJoin(r.partitions, ","))
          : absl::StrCat("[", r.from, ", ", r.to, ")");
  if (!r.keys.empty()) {
    absl::StrAppend(&scope, " keys ", DescribeEntityKeys(r.keys));
  }
  return absl::StrCat(r.dataset, " ", scope, ", reason \"", r.reason, "\"");
}

// `result`, a decision on job `id`; a refusal because of the job's state
// (FAILED_PRECONDITION without a reason of its own) gets the reason
// BACKFILL_STATE_CONFLICT.
absl::StatusOr<Job> WithStateReason(absl::StatusOr<Job> result,
                                    const std::string& id) {
  if (result.ok() ||
      result.status().code() != absl::StatusCode::kFailedPrecondition ||
      !DetailsOf(result.status()).reason.empty()) {
    return result;
  }
  return WithReason(result.status(), "BACKFILL_STATE_CONFLICT",
                    {{"backfill_id", id}});
}

// INVALID_ARGUMENT: `key` names job `id`, made for another request.
absl::Status KeyReused(const std::string& key, const std::string& id,
                       const BackfillRequest& request) {
  return WithFieldViolation(
      WithReason(absl::InvalidArgumentError(absl::StrCat(
                     "`idempotency_key` \"", key, "\" was already used by job ",
                     id, " for a different request (", DescribeRequest(request),
                     "); use a new key")),
                 "IDEMPOTENCY_KEY_REUSED", {{"backfill_id", id}}),
      "idempotency_key",
      absl::StrCat("already used by job ", id, " for a different request"));
}

// Who asked for the job and why, for its creation event in the audit log
// (the jobs row can change; the log keeps this for good): "submitted by
// frank, ticket T-9, overriding frozen partitions daily 2024-12-31
// (frozen.before 2025-01-01), reason: fix late orders". The reason comes
// last: it is free text.
std::string SubmittedBy(const BackfillRequest& r, const Plan& plan) {
  std::vector<std::string> overridden;
  for (const FrozenPartitions& f : plan.frozen) {
    if (!f.overridden) continue;
    overridden.push_back(absl::StrCat(
        f.dataset, " ", absl::StrJoin(f.partitions, ","), " (", f.rule, ")"));
  }
  return absl::StrCat(
      "submitted by ",
      r.requested_by.empty() ? std::string("an unnamed requester")
                             : r.requested_by,
      r.ticket.empty() ? std::string() : absl::StrCat(", ticket ", r.ticket),
      overridden.empty() ? std::string()
                         : absl::StrCat(", overriding frozen partitions ",
                                        absl::StrJoin(overridden, "; ")),
      ", reason: ", r.reason);
}

RunnerOptions RunnerOptionsOf(const ManagerOptions& o) {
  RunnerOptions r;
  r.workers = o.workers;
  r.max_attempts = o.max_attempts;
  r.retry_backoff = o.retry_backoff;
  r.max_backoff = o.max_backoff;
  r.max_queued_jobs = std::max<int64_t>(1, o.max_queued_jobs);
  r.max_queued_jobs_source = o.max_queued_jobs_source;
  r.http = o.http;
  r.commands = o.commands;
  r.leases = o.leases;
  r.scratch_dir = o.scratch_dir;
  return r;
}

}  // namespace

BackfillManager::BackfillManager(const LiveCatalog* catalog, StateStore* store,
                                 Engine* engine, const Clock* clock,
                                 JobObserver* observer, ManagerOptions options)
    : catalog_(catalog),
      store_(store),
      engine_(engine),
      planner_limits_(options.planner),
      clock_(clock),
      runner_(catalog, store, engine, clock, observer,
              RunnerOptionsOf(options)) {}

BackfillManager::BackfillManager(const Catalog* catalog, StateStore* store,
                                 Engine* engine, const Clock* clock,
                                 JobObserver* observer, ManagerOptions options)
    : owned_catalog_(LiveCatalog::Borrowing(catalog)),
      catalog_(owned_catalog_.get()),
      store_(store),
      engine_(engine),
      planner_limits_(options.planner),
      clock_(clock),
      runner_(catalog_, store, engine, clock, observer,
              RunnerOptionsOf(options)) {}

Planner BackfillManager::PlannerFor(const Catalog* catalog) const {
  return Planner(catalog, engine_, planner_limits_, store_, clock_);
}

BackfillManager::~BackfillManager() { Shutdown(); }

absl::Status BackfillManager::Start() { return runner_.Start(); }

void BackfillManager::Shutdown() { runner_.Shutdown(); }

absl::Status BackfillManager::CheckSql(const Catalog& catalog,
                                       const Plan& plan) {
  std::vector<std::string> datasets;
  for (const DatasetPlan& dp : plan.datasets) datasets.push_back(dp.dataset);
  ASSIGN_OR_RETURN(std::vector<std::string> problems,
                   CheckPipelineSql(catalog, engine_, datasets));
  if (problems.empty()) return absl::OkStatus();
  return WithReason(
      absl::FailedPreconditionError(absl::StrCat(
          "the pipeline's SQL does not work against the warehouse (fix the "
          "pipeline file or the warehouse, then plan again): ",
          absl::StrJoin(problems, "; "))),
      "PIPELINE_SQL_INVALID");
}

absl::StatusOr<Plan> BackfillManager::PlanBackfill(
    const BackfillRequest& request) {
  const std::shared_ptr<const Catalog> catalog = catalog_->Get();
  ASSIGN_OR_RETURN(Plan plan, PlannerFor(catalog.get()).MakePlan(request));
  RETURN_IF_ERROR(CheckSql(*catalog, plan));
  runner_.commands().Blocking(plan, &plan.conflicts, kMaxConflictsShown);
  return plan;
}

absl::StatusOr<SubmitResult> BackfillManager::Submit(
    const BackfillRequest& request, const SubmitOptions& options) {
  RETURN_IF_ERROR(ValidateSubmit(request, options.idempotency_key));
  const std::string fingerprint = RequestFingerprint(request);
  // A repeated submit (same key) returns its job whatever happened since:
  // the plan, the catalog or newer overlapping jobs do not matter.
  auto existing = [&]() -> absl::StatusOr<std::optional<SubmitResult>> {
    ASSIGN_OR_RETURN(std::optional<Job> job,
                     store_->FindJobByKey(options.idempotency_key));
    if (!job.has_value()) return std::optional<SubmitResult>();
    if (job->request_fingerprint != fingerprint) {
      return KeyReused(options.idempotency_key, job->id, job->request);
    }
    return std::optional<SubmitResult>(SubmitResult{*std::move(job), false});
  };
  {
    ASSIGN_OR_RETURN(std::optional<SubmitResult> found, existing());
    if (found.has_value()) return *std::move(found);
  }
  // A caller that went away while the plan was made (a plan may scan the
  // warehouse) gets no job: it could not learn the job's id, and a job it
  // did not wait for would run anyway.
  const auto abandoned = [&options]() -> absl::Status {
    if (options.abandoned && options.abandoned()) {
      return WithReason(
          absl::CancelledError(
              "the submit was cancelled by its caller (or its deadline "
              "passed) before the job was created; nothing was submitted"),
          "SUBMIT_ABANDONED");
    }
    return absl::OkStatus();
  };
  // The job runs with the catalog it is planned with, to its end.
  const std::shared_ptr<const Catalog> catalog = catalog_->Get();
  ASSIGN_OR_RETURN(Plan plan, PlannerFor(catalog.get()).MakePlan(request));
  RETURN_IF_ERROR(CheckSql(*catalog, plan));
  RETURN_IF_ERROR(abandoned());
  // Over a budget (core/plan/cost_budget.h): refused before anything is
  // created.
  if (!plan.cost.refused.empty()) {
    return WithReason(absl::FailedPreconditionError(plan.cost.refused),
                      "COST_BUDGET_EXCEEDED");
  }

  NewJob new_job;
  Job& job = new_job.job;
  job.state = JobState::kQueued;
  job.request = request;
  for (const DatasetPlan& dp : plan.datasets) {
    if (dp.dataset == request.dataset && !dp.keys.empty()) {
      job.request.keys = dp.keys;  // normalized: sorted, unique
    }
  }
  job.idempotency_key = options.idempotency_key;
  job.request_fingerprint = fingerprint;
  job.approval_hold = options.approval_hold;
  job.plan = std::move(plan);
  new_job.catalog = catalog;
  new_job.no_wait = options.no_wait;
  new_job.submitted_by = SubmittedBy(job.request, job.plan);
  new_job.abandoned = abandoned;
  // One admission decision: whether it may be created now, whom it waits
  // for, its creation and its admission (job_commands.h).
  ASSIGN_OR_RETURN(CreateJobResult admitted,
                   runner_.commands().AdmitNew(std::move(new_job)));
  if (!admitted.created && admitted.job.request_fingerprint != fingerprint) {
    return KeyReused(options.idempotency_key, admitted.job.id,
                     admitted.job.request);
  }
  return SubmitResult{std::move(admitted.job), admitted.created};
}

absl::StatusOr<Job> BackfillManager::GetJob(const std::string& id,
                                            JobView view) {
  return store_->GetJobForReader(id, view);
}

absl::StatusOr<Job> BackfillManager::Approve(const std::string& id,
                                             const Approval& approval) {
  RETURN_IF_ERROR(CheckField("reason", approval.reason, kMaxReason));
  RETURN_IF_ERROR(
      CheckField("approved_by", approval.approved_by, kMaxShortField));
  return WithStateReason(runner_.commands().Approve(id, approval), id);
}

absl::StatusOr<DiffPage> BackfillManager::Diff(const DiffRequest& request) {
  if (request.sample_rows < 0 || request.sample_rows > kDiffStoredSamples) {
    return InvalidFieldError(
        "sample_rows", "SAMPLE_ROWS_OUT_OF_RANGE",
        absl::StrCat("`sample_rows` ", request.sample_rows,
                     " is out of range: use 0..", kDiffStoredSamples,
                     " (sample rows per partition)"));
  }
  if (request.offset < 0 || request.limit < 1) {
    return absl::InvalidArgumentError("diff page out of range");
  }
  ASSIGN_OR_RETURN(Job job, store_->GetJobProgress(request.id));
  if (!request.dataset.empty()) {
    std::vector<std::string> names;
    bool found = false;
    for (const DatasetPlan& dp : job.plan.datasets) {
      names.push_back(dp.dataset);
      found = found || dp.dataset == request.dataset;
    }
    if (!found) {
      return InvalidFieldError(
          "dataset", "DATASET_NOT_IN_PLAN",
          absl::StrCat("`dataset` \"", request.dataset,
                       "\" is not in the plan of job ", request.id,
                       " (it has: ", absl::StrJoin(names, ", "), ")"));
    }
  }
  ASSIGN_OR_RETURN(
      std::optional<JobDiff> diff,
      store_->GetJobDiff(request.id, request.dataset, request.sample_rows > 0));
  if (!diff.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", request.id, " is ", JobStateName(job.state),
        " and has no diff: it never reached VALIDATING, where the diff is "
        "computed once every partition is staged",
        IsTerminal(job.state)
            ? ""
            : absl::StrCat(" yet (`WatchBackfill` ", request.id, ")")));
  }
  DiffPage page;
  page.job = std::move(job);
  page.diff.job_id = diff->job_id;
  page.diff.computed_at = diff->computed_at;
  int64_t index = 0;
  const int64_t end = request.offset + request.limit;
  for (DatasetDiff& d : diff->datasets) {
    page.summaries.push_back(Summarize(d));
    DatasetDiff kept;
    kept.dataset = d.dataset;
    kept.columns = d.columns;
    for (PartitionDiff& p : d.partitions) {
      if (index >= request.offset && index < end) {
        if (p.samples.size() > static_cast<size_t>(request.sample_rows)) {
          p.samples.resize(request.sample_rows);
        }
        kept.partitions.push_back(std::move(p));
      }
      ++index;
    }
    if (!kept.partitions.empty()) page.diff.datasets.push_back(std::move(kept));
  }
  page.next_offset = index > end ? end : 0;
  return page;
}

absl::StatusOr<std::vector<Job>> BackfillManager::ListJobs(
    const JobFilter& filter) {
  return store_->ListJobs(filter);
}

absl::StatusOr<JobPage> BackfillManager::ListJobPage(
    const JobPageQuery& query) {
  return ReadJobPage(*store_, query);
}

absl::StatusOr<PartitionPage> BackfillManager::ListPartitions(
    const PartitionPageQuery& query) {
  return ReadPartitionPage(*store_, query);
}

absl::StatusOr<Job> BackfillManager::Cancel(const std::string& id,
                                            const std::string& reason,
                                            const std::string& actor) {
  RETURN_IF_ERROR(CheckField("reason", reason, kMaxReason));
  RETURN_IF_ERROR(CheckField("actor", actor, kMaxShortField));
  return WithStateReason(runner_.commands().Cancel(id, reason, actor), id);
}

absl::StatusOr<Job> BackfillManager::Pause(const std::string& id,
                                           const std::string& reason,
                                           const std::string& actor) {
  RETURN_IF_ERROR(CheckField("reason", reason, kMaxReason));
  RETURN_IF_ERROR(CheckField("actor", actor, kMaxShortField));
  return WithStateReason(runner_.commands().Pause(id, reason, actor), id);
}

absl::StatusOr<Job> BackfillManager::Resume(const std::string& id,
                                            const std::string& reason,
                                            const std::string& actor) {
  RETURN_IF_ERROR(CheckField("reason", reason, kMaxReason));
  RETURN_IF_ERROR(CheckField("actor", actor, kMaxShortField));
  return WithStateReason(runner_.commands().Resume(id, reason, actor), id);
}

absl::StatusOr<Job> BackfillManager::Retry(const std::string& id,
                                           const std::string& reason,
                                           const std::string& actor) {
  RETURN_IF_ERROR(CheckField("reason", reason, kMaxReason));
  RETURN_IF_ERROR(CheckField("actor", actor, kMaxShortField));
  return WithStateReason(runner_.commands().Retry(id, reason, actor), id);
}

absl::StatusOr<Job> BackfillManager::Rollback(const std::string& id,
                                              const RollbackRequest& request) {
  if (absl::StripAsciiWhitespace(request.reason).empty()) {
    return InvalidFieldError(
        "reason", "REASON_REQUIRED",
        "a rollback requires a reason: say in `reason` why the job's data "
        "is withdrawn; it is recorded in the job, the audit log and the "
        "lineage of every partition restored");
  }
  RETURN_IF_ERROR(CheckField("reason", request.reason, kMaxReason));
  RETURN_IF_ERROR(
      CheckField("requested_by", request.requested_by, kMaxShortField));
  return WithStateReason(runner_.commands().Rollback(id, request), id);
}

absl::StatusOr<Job> BackfillManager::Confirm(const std::string& id,
                                             const std::string& actor,
                                             const std::string& reason) {
  RETURN_IF_ERROR(CheckField("actor", actor, kMaxShortField));
  RETURN_IF_ERROR(CheckField("reason", reason, kMaxReason));
  return WithStateReason(runner_.commands().Confirm(id, reason, actor), id);
}

absl::StatusOr<Job> BackfillManager::WaitForChange(const std::string& id,
                                                   uint64_t* version,
                                                   absl::Time deadline,
                                                   JobView first_view) {
  return runner_.WaitForChange(id, version, deadline, first_view);
}

absl::StatusOr<PartitionHistory> BackfillManager::ExplainPartition(
    const std::string& dataset, const std::string& partition) {
  return ::backfill::ExplainPartition(*catalog_->Get(), *store_, dataset,
                                      partition);
}

absl::StatusOr<std::map<std::string, std::string>>
BackfillManager::HeldPartitions(const std::string& dataset) {
  // Active jobs only: finished ones are never read, however long the
  // history grows.
  JobFilter filter;
  filter.dataset = dataset;
  filter.limit = 0;
  for (int i = 0; i < kJobStateCount; ++i) {
    const JobState state = static_cast<JobState>(i);
    if (!IsTerminal(state)) filter.states.push_back(state);
  }
  ASSIGN_OR_RETURN(std::vector<Job> jobs, ListJobs(filter));
  std::map<std::string, std::string> held;
  // Newest first: the first job seen holding a partition is its newest.
  for (const Job& job : jobs) {
    for (const DatasetPlan& dp : job.plan.datasets) {
      if (dp.dataset != dataset) continue;
      for (const std::string& partition : dp.partitions) {
        held.try_emplace(partition, job.id);
      }
    }
  }
  return held;
}

absl::StatusOr<FreshnessPage> BackfillManager::DatasetFreshness(
    const FreshnessQuery& query, FreshnessContext context) {
  const std::shared_ptr<const Catalog> catalog = catalog_->Get();
  if (const DatasetSpec* spec = catalog->Find(query.dataset);
      spec != nullptr && spec->is_derived()) {
    ASSIGN_OR_RETURN(context.held, HeldPartitions(spec->name));
  }
  context.now = clock_->Now();
  return ReadDatasetFreshness(*catalog, *engine_, *store_, context, query);
}

absl::StatusOr<AuditPage> BackfillManager::ListAuditEvents(
    const AuditQuery& query) {
  return ReadAuditPage(*store_, query);
}

}  // namespace backfill
