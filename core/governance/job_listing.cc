#include "core/governance/job_listing.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/governance/page_token.h"

namespace backfill {
namespace {

// The filters as the token hashes them: states as a sorted set of names,
// so that their order and repetitions in the request do not matter.
template <typename State, typename NameOf>
std::vector<std::string> StateNames(const std::vector<State>& states,
                                    NameOf name_of) {
  std::set<std::string> names;
  for (State s : states) names.insert(name_of(s));
  return std::vector<std::string>(names.begin(), names.end());
}

uint64_t JobFilterHash(const JobPageQuery& query) {
  std::vector<std::string> filters = {query.dataset};
  for (std::string& name : StateNames(query.states, JobStateName)) {
    filters.push_back(std::move(name));
  }
  return FilterHash(PageList::kJobs, filters);
}

uint64_t PartitionFilterHash(const PartitionPageQuery& query) {
  std::vector<std::string> filters = {query.job_id, query.dataset};
  for (std::string& name : StateNames(query.states, TaskStateName)) {
    filters.push_back(std::move(name));
  }
  return FilterHash(PageList::kPartitions, filters);
}

absl::Status CheckPageSize(int page_size) {
  if (page_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size ", page_size, " must be 1 or more"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobPage> ReadJobPage(StateStore& store,
                                    const JobPageQuery& query) {
  RETURN_IF_ERROR(CheckPageSize(query.page_size));
  JobFilter filter;
  filter.states = query.states;
  filter.dataset = query.dataset;
  filter.limit = query.page_size;
  filter.view = query.view;
  if (!query.page_token.empty()) {
    // The token holds the number of the previous page's last job.
    ASSIGN_OR_RETURN(filter.before_number,
                     DecodePageToken(PageList::kJobs, query.page_token,
                                     JobFilterHash(query), "states and dataset",
                                     /*min_position=*/1));
  }
  JobPage page;
  ASSIGN_OR_RETURN(page.jobs, store.ListJobs(filter));
  if (page.jobs.size() < static_cast<size_t>(query.page_size)) return page;
  // A full page: is there a job after it? Asked for apart, in the basic
  // view, so that a page of whole jobs never reads one more whole job.
  const int64_t last = JobNumberOf(page.jobs.back().id);
  if (last <= 1) return page;
  JobFilter next = filter;
  next.limit = 1;
  next.before_number = last;
  next.view = JobView::kBasic;
  ASSIGN_OR_RETURN(std::vector<Job> more, store.ListJobs(next));
  if (!more.empty())
    page.next_page_token = JobPageTokenAfter(query, page.jobs.back());
  return page;
}

std::string JobPageTokenAfter(const JobPageQuery& query, const Job& job) {
  return EncodePageToken(PageList::kJobs, JobFilterHash(query),
                         JobNumberOf(job.id));
}

absl::StatusOr<PartitionPage> ReadPartitionPage(
    StateStore& store, const PartitionPageQuery& query) {
  RETURN_IF_ERROR(CheckPageSize(query.page_size));
  TaskQuery tasks;
  tasks.job_id = query.job_id;
  tasks.dataset = query.dataset;
  tasks.states = query.states;
  // One more than asked: whether a next page exists.
  tasks.limit = query.page_size + 1;
  if (!query.page_token.empty()) {
    // The token holds the ordinal of the previous page's last task.
    ASSIGN_OR_RETURN(tasks.after_ordinal,
                     DecodePageToken(PageList::kPartitions, query.page_token,
                                     PartitionFilterHash(query),
                                     "backfill_id, dataset and states"));
  }
  PartitionPage page;
  // NOT_FOUND ("no job bf-9") for a job the store does not have.
  ASSIGN_OR_RETURN(page.partitions, store.ListTaskPage(tasks));
  if (page.partitions.empty() && !query.dataset.empty()) {
    // No task of the dataset: is it in the plan at all? (Read only then: a
    // large job's progress costs a pass over its tasks.)
    ASSIGN_OR_RETURN(Job job, store.GetJobProgress(query.job_id));
    if (std::none_of(job.plan.datasets.begin(), job.plan.datasets.end(),
                     [&](const DatasetPlan& dp) {
                       return dp.dataset == query.dataset;
                     })) {
      std::vector<std::string> names;
      for (const DatasetPlan& dp : job.plan.datasets) {
        names.push_back(dp.dataset);
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset: \"", query.dataset, "\" is not in the plan of job ",
          query.job_id, " (it has: ", absl::StrJoin(names, ", "), ")"));
    }
  }
  if (page.partitions.size() > static_cast<size_t>(query.page_size)) {
    page.partitions.resize(static_cast<size_t>(query.page_size));
    page.next_page_token =
        PartitionPageTokenAfter(query, page.partitions.back());
  }
  return page;
}

std::string PartitionPageTokenAfter(const PartitionPageQuery& query,
                                    const PartitionTask& task) {
  return EncodePageToken(PageList::kPartitions, PartitionFilterHash(query),
                         task.ordinal);
}

}  // namespace backfill
