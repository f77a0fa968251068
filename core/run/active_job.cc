#include "core/run/active_job.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace backfill {
namespace {

// Tasks read from the store at once when a job is loaded.
constexpr int kLoadPage = 4096;

}  // namespace

bool ActiveJob::TakeSettle() {
  if (busy > 0) return false;
  if (phase != JobPhase::kCancelling && phase != JobPhase::kFailing) {
    return false;
  }
  // A cancel settles only once CANCELLED is recorded (Cancel settles then
  // itself if nothing runs): a cancel that could not be recorded is undone.
  if (phase == JobPhase::kCancelling && state != JobState::kCancelled) {
    return false;
  }
  settling_from = phase;
  phase = JobPhase::kSettling;
  ++busy;  // the settle itself
  return true;
}

absl::StatusOr<JobLayout> LayoutOf(const Catalog& catalog, const Job& job,
                                   bool* complete) {
  // Partitions still to compute must use the logic the others used and a
  // dataset the pipelines still declare; a job whose partitions are all
  // staged (or published) is finished with what it has.
  const bool computing =
      job.state == JobState::kQueued || job.state == JobState::kRunning ||
      job.state == JobState::kPaused || job.state == JobState::kValidating ||
      job.state == JobState::kFailed;
  *complete = true;
  JobLayout layout;
  layout.job_id = job.id;
  std::set<std::string> in_job;
  for (const DatasetPlan& dp : job.plan.datasets) {
    const DatasetSpec* spec = catalog.Find(dp.dataset);
    if (spec == nullptr || !spec->is_derived()) {
      if (!computing) {
        *complete = false;
        continue;
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "dataset \"", dp.dataset,
          "\" is no longer a derived dataset in the loaded pipelines"));
    }
    if (computing && !dp.transform_version.empty() &&
        dp.transform_version != spec->transform_version) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the transform of \"", dp.dataset,
          "\" changed since the job was planned (version ",
          dp.transform_version, " -> ", spec->transform_version,
          "); partitions computed with the old logic are never published "
          "with the new: submit a new backfill"));
    }
    layout.items.push_back({spec, dp.partitions, dp.keys});
    in_job.insert(dp.dataset);
  }
  std::set<std::string> pinned;
  for (const JobLayout::Item& item : layout.items) {
    for (const UpstreamEdge& e : item.dataset->upstream) {
      if (e.mapping == Mapping::kAll && !in_job.count(e.dataset) &&
          pinned.insert(e.dataset).second) {
        layout.pinned.push_back(catalog.Find(e.dataset));
      }
    }
  }
  return layout;
}

absl::Status LoadJob(StateStore* store, absl::Mutex* mu, ActiveJob* job) {
  Job copy;
  std::shared_ptr<const Catalog> catalog;
  {
    absl::MutexLock lock(mu);
    if (job->loaded) return absl::OkStatus();
    copy = job->job;
    copy.state = job->state;
    catalog = job->catalog;
  }
  bool complete = true;
  ASSIGN_OR_RETURN(JobLayout layout, LayoutOf(*catalog, copy, &complete));
  // The tasks a page at a time, each page packed into the table before the
  // next is read: a job may have a million.
  TaskTable table;
  std::vector<const DatasetSpec*> specs;
  const int64_t planned = copy.plan.total_partitions();
  table.Reserve(static_cast<size_t>(planned));
  specs.reserve(static_cast<size_t>(planned));
  bool unstaged = false;
  TaskQuery page_query;
  page_query.job_id = copy.id;
  page_query.limit = kLoadPage;
  while (true) {
    ASSIGN_OR_RETURN(std::vector<PartitionTask> page,
                     store->ListTaskPage(page_query));
    for (const PartitionTask& t : page) {
      table.Append(t);
      specs.push_back(catalog->Find(t.dataset));
      unstaged =
          unstaged || TaskGraph::NodeOf(t.state) != TaskGraph::Node::kDone;
    }
    if (page.size() < static_cast<size_t>(kLoadPage)) break;
    page_query.after_ordinal = page.back().ordinal;
  }
  if (unstaged && !complete) {
    return absl::FailedPreconditionError("a dataset of the job is missing");
  }
  auto graph = std::make_unique<TaskGraph>(
      table,
      [catalog](const std::string& dataset) {
        const DatasetSpec* spec = catalog->Find(dataset);
        return spec == nullptr ? std::vector<UpstreamEdge>{} : spec->upstream;
      },
      [catalog](const std::string& dataset) {
        const DatasetSpec* spec = catalog->Find(dataset);
        return spec == nullptr ? PartitionLayout() : spec->layout();
      });
  absl::MutexLock lock(mu);
  job->layout = std::move(layout);
  job->layout_complete = complete;
  job->tasks = std::move(table);
  job->spec_of = std::move(specs);
  job->graph = std::move(graph);
  job->loaded = true;
  return absl::OkStatus();
}

}  // namespace backfill
