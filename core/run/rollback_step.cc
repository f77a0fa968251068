#include "core/run/rollback_step.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/plural.h"
#include "core/base/status_macros.h"
#include "core/governance/retention.h"
#include "core/plan/early_cutoff.h"
#include "core/run/active_job.h"
#include "core/run/admission.h"
#include "core/run/crash_point.h"

namespace backfill {
namespace {

using Key = std::pair<std::string, std::string>;  // (dataset, partition)

// The history grouped by (dataset, partition), each in recorded order.
std::map<Key, std::vector<const LineageRecord*>> ByPartition(
    const std::vector<LineageRecord>& history) {
  std::map<Key, std::vector<const LineageRecord*>> out;
  for (const LineageRecord& r : history) {
    out[{r.dataset, r.partition}].push_back(&r);
  }
  return out;
}

// Jobs whose publish of the partition was undone by a rollback.
std::set<std::string> Undone(const std::vector<const LineageRecord*>& records) {
  std::set<std::string> out;
  for (const LineageRecord* r : records) {
    if (r->action == LineageAction::kRollback) out.insert(r->job_id);
  }
  return out;
}

// Index of `job_id`'s publish in `records`, or -1.
int PublishIndex(const std::vector<const LineageRecord*>& records,
                 const std::string& job_id) {
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i]->action == LineageAction::kPublish &&
        records[i]->job_id == job_id) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// Why a job whose partitions all came out unchanged or skipped cannot be
// rolled back.
std::string PublishedNothing(const std::string& id) {
  return absl::StrCat(
      "job ", id,
      " published nothing: every partition it recomputed was identical to "
      "the published version or skipped (early cutoff), so there is nothing "
      "to roll back");
}

}  // namespace

absl::StatusOr<std::vector<Job>> LaterJobs(
    const Job& job, const std::vector<LineageRecord>& history, bool force,
    const JobLookup& lookup) {
  // Later publishes still in force: job id -> (position of its newest
  // publish in the history, one of its partitions over `job`'s).
  struct Later {
    size_t newest = 0;
    Key example;
    int64_t partitions = 0;
  };
  std::map<std::string, Later> later;
  std::map<const LineageRecord*, size_t> position;
  for (size_t i = 0; i < history.size(); ++i) position[&history[i]] = i;
  for (const auto& [key, records] : ByPartition(history)) {
    const int mine = PublishIndex(records, job.id);
    if (mine < 0) continue;
    const std::set<std::string> undone = Undone(records);
    for (size_t i = mine + 1; i < records.size(); ++i) {
      const LineageRecord* r = records[i];
      if (r->action != LineageAction::kPublish || undone.count(r->job_id) ||
          r->job_id == job.id) {
        continue;
      }
      Later& l = later[r->job_id];
      if (l.partitions == 0 || position[r] > l.newest) {
        l.newest = position[r];
        l.example = key;
      }
      ++l.partitions;
    }
  }
  if (later.empty()) return std::vector<Job>();
  std::vector<std::string> ids;
  for (const auto& [id, l] : later) ids.push_back(id);
  std::sort(ids.begin(), ids.end(),
            [&](const std::string& a, const std::string& b) {
              return later[a].newest > later[b].newest;
            });
  const std::string& newest = ids.front();
  const Later& n = later[newest];
  const std::string partition_text =
      n.example.second.empty() ? absl::StrCat("dataset ", n.example.first)
                               : absl::StrCat("partition ", n.example.second,
                                              " of ", n.example.first);
  if (!force) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", newest, " has published ", partition_text, " since ", job.id,
        ids.size() > 1 ? absl::StrCat(" (later jobs over its partitions: ",
                                      absl::StrJoin(ids, ", "), ")")
                       : "",
        "; rolling back ", job.id,
        " alone would discard their rows. Roll back ",
        ids.size() > 1 ? "those jobs first, newest first"
                       : absl::StrCat(newest, " first"),
        ", or set `force` to roll them back together with ", job.id,
        " to the state before ", job.id,
        " (allowed only when every partition they published lies within ",
        job.id, "'s)"));
  }
  const Scope mine = ScopeOf(job.plan);
  std::vector<Job> out;
  for (const std::string& id : ids) {
    absl::StatusOr<Job> other = lookup(id);
    if (!other.ok()) return other.status();
    if (other->state != JobState::kSucceeded &&
        other->state != JobState::kDownstreamUnhealthy) {
      return absl::FailedPreconditionError(absl::StrCat(
          "`force` cannot roll back ", id, " together with ", job.id, ": ", id,
          " is ", JobStateName(other->state),
          ", and only SUCCEEDED or DOWNSTREAM_UNHEALTHY jobs are rolled "
          "back"));
    }
    for (const auto& [dataset, partition] : ScopeOf(other->plan)) {
      if (mine.count({dataset, partition})) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "`force` is refused: later job ", id, " also published ",
          partition.empty()
              ? absl::StrCat("dataset ", dataset)
              : absl::StrCat("partition ", partition, " of ", dataset),
          ", outside ", job.id, "'s partitions, so the state before ", job.id,
          " is not defined there. Roll back ", id, " first (",
          Plural(later[id].partitions, "partition", "partitions"), " over ",
          job.id, "'s), then ", job.id));
    }
    out.push_back(*std::move(other));
  }
  return out;
}

std::vector<LineageRecord> RollbackLineage(
    const Job& job, const std::vector<Job>& with_jobs,
    const std::vector<LineageRecord>& history,
    const std::vector<RestoredPartition>& restored, const RollbackInfo& info,
    absl::Time now) {
  const auto groups = ByPartition(history);
  // The version restored on each partition: the newest publish before
  // `job`'s that is still in force there.
  auto restored_version = [&](const Key& key) -> const LineageRecord* {
    auto it = groups.find(key);
    if (it == groups.end()) return nullptr;
    const std::vector<const LineageRecord*>& records = it->second;
    const int mine = PublishIndex(records, job.id);
    const std::set<std::string> undone = Undone(records);
    for (int i = mine - 1; i >= 0; --i) {
      const LineageRecord* r = records[i];
      if (r->action == LineageAction::kPublish && !undone.count(r->job_id)) {
        return r;
      }
    }
    return nullptr;
  };
  std::map<Key, const RestoredPartition*> by_key;
  for (const RestoredPartition& p : restored) {
    by_key[{p.dataset, p.partition}] = &p;
  }
  auto record = [&](const std::string& job_id, const RestoredPartition& p) {
    LineageRecord rec;
    rec.dataset = p.dataset;
    rec.partition = p.partition;
    rec.job_id = job_id;
    rec.action = LineageAction::kRollback;
    if (const LineageRecord* v = restored_version({p.dataset, p.partition})) {
      rec.transform_version = v->transform_version;
      rec.inputs = v->inputs;
    }
    rec.output_fingerprint = p.fingerprint;
    rec.row_count = p.rows;
    rec.reason = info.reason;
    rec.requested_by = info.requested_by;
    rec.published_at = now;
    return rec;
  };
  std::vector<LineageRecord> out;
  // Newest first, as they are undone.
  for (const Job& other : with_jobs) {
    for (const auto& key : ScopeOf(other.plan)) {
      auto it = by_key.find(key);
      if (it != by_key.end()) out.push_back(record(other.id, *it->second));
    }
  }
  for (const RestoredPartition& p : restored) out.push_back(record(job.id, p));
  return out;
}

absl::Status CheckRollbackable(const StepContext& ctx, const Job& job) {
  const std::string& id = job.id;
  if (job.state != JobState::kSucceeded &&
      job.state != JobState::kDownstreamUnhealthy) {
    std::string why;
    switch (job.state) {
      case JobState::kFailed:
      case JobState::kCancelled:
      case JobState::kValidationFailed:
        why =
            ": nothing of it was published, so there is nothing to roll "
            "back";
        break;
      default:
        why =
            ": it has not published (yet); cancel it instead if it must "
            "not publish";
        break;
    }
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", JobStateName(job.state), why,
                     ". Only a SUCCEEDED or DOWNSTREAM_UNHEALTHY job can be "
                     "rolled back"));
  }
  // What the job did is final, unlike another job's partitions: a job that
  // published nothing is told so, not asked to wait and try again.
  ASSIGN_OR_RETURN(std::vector<PartitionTask> tasks,
                   ctx.store()->ListTasks(id));
  if (!tasks.empty() &&
      std::all_of(tasks.begin(), tasks.end(),
                  [](const PartitionTask& t) { return IsCutOff(t.state); })) {
    return absl::FailedPreconditionError(PublishedNothing(id));
  }
  return absl::OkStatus();
}

absl::StatusOr<Job> RollBack(const StepContext& ctx, const LiveCatalog& catalog,
                             const Job& job, const RollbackRequest& request,
                             const std::vector<std::string>* with_ids,
                             const std::function<void()>& restored_rows) {
  using Storage = JobObserver::Storage;
  const std::string& id = job.id;
  StateStore* const store = ctx.store();
  Engine* const engine = ctx.engine();
  // The layout points into this snapshot: held until the rollback ends.
  const std::shared_ptr<const Catalog> snapshot = catalog.Get();
  bool complete = true;
  ASSIGN_OR_RETURN(JobLayout layout, LayoutOf(*snapshot, job, &complete));
  if (!complete) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id,
        " cannot be rolled back: a dataset of it is no longer declared in "
        "the loaded pipelines, and a rollback restores every dataset of the "
        "job together"));
  }
  layout.pinned.clear();
  {
    // Only what the job published is restored: the partitions the early
    // cutoff let go of were never replaced by it.
    ASSIGN_OR_RETURN(std::vector<PartitionTask> tasks, store->ListTasks(id));
    layout = WithoutCutOff(layout, TaskTable(tasks));
    if (layout.items.empty()) {
      return absl::FailedPreconditionError(PublishedNothing(id));
    }
  }
  ASSIGN_OR_RETURN(std::vector<LineageRecord> history,
                   store->GetLineageOverlapping(id));
  const JobLookup lookup = [store](const std::string& other) {
    return store->GetJob(other);
  };
  if (with_ids == nullptr) {
    // The copies the restore needs must still exist (unless the warehouse
    // rolled the job back before and recovery has not recorded it). Checked
    // first: an expired copy is final, later jobs are not.
    WarehouseInfo info;
    RETURN_IF_ERROR(ctx.Persist(Storage::kWarehouse, "reading rollback markers",
                                [&]() -> absl::Status {
                                  ASSIGN_OR_RETURN(info, engine->Inspect());
                                  return absl::OkStatus();
                                }));
    if (!info.rollbacks.count(id)) {
      std::vector<RollbackCopy> copies;
      RETURN_IF_ERROR(
          ctx.Persist(Storage::kWarehouse, "listing rollback copies",
                      [&]() -> absl::Status {
                        ASSIGN_OR_RETURN(copies, engine->ListRollbackCopies());
                        return absl::OkStatus();
                      }));
      std::set<std::pair<std::string, std::string>> present;
      for (const RollbackCopy& c : copies) {
        present.insert({c.job_id, c.dataset});
      }
      for (const JobLayout::Item& item : layout.items) {
        if (present.count({id, item.dataset->name})) continue;
        return absl::FailedPreconditionError(absl::StrCat(
            "job ", id, " can no longer be rolled back: its rollback copy of ",
            item.dataset->name,
            " (the rows it replaced there) expired under "
            "the retention policy of ",
            item.dataset->name, ", which ",
            DescribeRetention(item.dataset->retention),
            ", and was dropped. Restore the data with a new backfill"));
      }
    }
  }
  std::vector<Job> with_jobs;
  if (with_ids == nullptr) {
    ASSIGN_OR_RETURN(with_jobs, LaterJobs(job, history, request.force, lookup));
  } else {
    for (const std::string& other : *with_ids) {
      ASSIGN_OR_RETURN(Job j, store->GetJob(other));
      with_jobs.push_back(std::move(j));
    }
  }
  RollbackSpec spec;
  spec.layout = layout;
  spec.marker.requested_by = request.requested_by;
  spec.marker.reason = request.reason;
  spec.marker.forced = !with_jobs.empty();
  for (const Job& j : with_jobs) spec.marker.with_jobs.push_back(j.id);
  RollbackResult restored;
  RETURN_IF_ERROR(
      ctx.Persist(Storage::kWarehouse, absl::StrCat("rolling back job ", id),
                  [&]() -> absl::Status {
                    ASSIGN_OR_RETURN(restored, engine->Rollback(spec));
                    return absl::OkStatus();
                  }));
  if (restored_rows) restored_rows();
  CrashPoint("rollback.before_record");

  RollbackInfo info;
  info.requested_by = request.requested_by;
  info.reason = request.reason;
  info.at = ctx.clock()->Now();
  info.forced = spec.marker.forced;
  info.also_rolled_back = spec.marker.with_jobs;
  info.partitions = static_cast<int64_t>(restored.partitions.size());
  info.rows = restored.rows;
  std::vector<LineageRecord> lineage = RollbackLineage(
      job, with_jobs, history, restored.partitions, info, info.at);
  const std::string who = request.requested_by.empty()
                              ? ""
                              : absl::StrCat(" by ", request.requested_by);
  const std::string message = absl::StrCat(
      "rolled back", who, ": ", request.reason, "; restored ",
      Plural(info.partitions, "partition", "partitions"), " (",
      Plural(info.rows, "row", "rows"), ") of ",
      Plural(static_cast<int64_t>(layout.items.size()), "dataset", "datasets"),
      " to their state before ", id,
      info.also_rolled_back.empty()
          ? std::string()
          : absl::StrCat(", together with the later ",
                         info.also_rolled_back.size() == 1 ? "job " : "jobs ",
                         absl::StrJoin(info.also_rolled_back, ", "),
                         " (`force`)"));
  const std::string also_message =
      absl::StrCat("rolled back together with ", id, " (`force`)", who, ": ",
                   request.reason);
  RETURN_IF_ERROR(
      ctx.Persist(Storage::kStateStore,
                  absl::StrCat("recording the rollback of ", id), [&] {
                    return store->RecordRollback(id, info, lineage, message,
                                                 also_message, info.at);
                  }));
  if (JobObserver* observer = ctx.observer(); observer != nullptr) {
    for (const Job& other : with_jobs) {
      observer->OnJobTransition(other.id, other.state, JobState::kRolledBack,
                                also_message);
    }
    observer->OnJobTransition(id, job.state, JobState::kRolledBack, message);
    // Counted as finished ROLLED_BACK; their costs were counted when they
    // succeeded.
    for (const Job& other : with_jobs) {
      observer->OnJobFinished(other.id, JobState::kRolledBack, 0, 0);
    }
    observer->OnJobFinished(id, JobState::kRolledBack, 0, 0);
  }
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    for (const Job& other : with_jobs) ctx.jobs()->NotifyLocked(other.id);
    ctx.jobs()->NotifyLocked(id);
  }
  return store->GetJob(id);
}

absl::Status RecoverRollbacks(const StepContext& ctx,
                              const LiveCatalog& catalog,
                              std::vector<std::string>* recovered) {
  ASSIGN_OR_RETURN(StoreInfo store, ctx.store()->Info());
  ASSIGN_OR_RETURN(WarehouseInfo warehouse, ctx.engine()->Inspect());
  for (const auto& [id, marker] : warehouse.rollbacks) {
    if (marker.store_id != store.store_id) continue;
    absl::StatusOr<Job> job = ctx.store()->GetJob(id);
    if (!job.ok() && job.status().code() == absl::StatusCode::kNotFound) {
      continue;
    }
    if (!job.ok()) return job.status();
    if (job->state != JobState::kSucceeded &&
        job->state != JobState::kDownstreamUnhealthy) {
      continue;  // recorded (ROLLED_BACK)
    }
    RollbackRequest request;
    request.reason = marker.reason;
    request.requested_by = marker.requested_by;
    request.force = marker.forced;
    absl::StatusOr<Job> done =
        RollBack(ctx, catalog, *job, request, &marker.with_jobs, nullptr);
    if (!done.ok()) {
      return absl::Status(done.status().code(),
                          absl::StrCat("cannot record the rollback of job ", id,
                                       ", which the warehouse committed: ",
                                       done.status().message()));
    }
    recovered->push_back(id);
  }
  return absl::OkStatus();
}

std::string SupersededByRollback(const std::string& rolled_back) {
  return absl::StrCat("the rollback of ", rolled_back,
                      ", which restored some of the same partitions");
}

}  // namespace backfill
