// JobListing: pages of jobs, newest first (ListBackfills), and pages of one
// job's partitions in plan order (ListPartitions).
//
// Both page by key, never by offset: a page's token
// (core/governance/page_token.h) carries the sort key of its last item — the
// job number, the task's ordinal — and the next page starts right after it.
// Jobs created while a client pages have larger numbers than every job already
// listed, so they never appear on later pages or shift them; a job's tasks
// never change, only their states. A token also carries a hash of the filters
// it was returned for and is refused with others.
//
// Stateless free functions over the store; thread-safe as far as it is.

#ifndef BACKFILL_CORE_GOVERNANCE_JOB_LISTING_H_
#define BACKFILL_CORE_GOVERNANCE_JOB_LISTING_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/job.h"
#include "core/ports/state_store.h"

namespace backfill {

struct JobPageQuery {
  std::vector<JobState> states;  // empty: any
  std::string dataset;           // "": any; else jobs whose plan has it
  JobView view = JobView::kBasic;
  int page_size = 50;      // at most this many jobs, >= 1
  std::string page_token;  // "": the first page
};

struct JobPage {
  std::vector<Job> jobs;  // newest first
  // The token of the page after `jobs`; "" when this is the last page.
  std::string next_page_token;
};

// The page `query` asks for. INVALID_ARGUMENT for a page_size below 1 and
// for a page_token that is not one of this list or was returned for other
// states or another dataset (see DecodePageToken).
absl::StatusOr<JobPage> ReadJobPage(StateStore& store,
                                    const JobPageQuery& query);

// The token of the page that starts after `job` (one of a page of `query`):
// for a page cut short after `job` (e.g. for its size on the wire).
std::string JobPageTokenAfter(const JobPageQuery& query, const Job& job);

struct PartitionPageQuery {
  std::string job_id;
  std::string dataset;            // "": every dataset of the job's plan
  std::vector<TaskState> states;  // empty: any
  int page_size = 100;            // >= 1
  std::string page_token;         // "": the first page
};

struct PartitionPage {
  // In plan order, each with its ordinal and reason.
  std::vector<PartitionTask> partitions;
  std::string next_page_token;  // "": this is the last page
};

// The page `query` asks for. NOT_FOUND for an unknown job; INVALID_ARGUMENT
// for a dataset not in the job's plan (naming the plan's datasets), a
// page_size below 1, and a page_token that is not one of this list or was
// returned for another job, dataset or states.
absl::StatusOr<PartitionPage> ReadPartitionPage(
    StateStore& store, const PartitionPageQuery& query);

// The token of the page that starts after `task` (one of a page of
// `query`).
std::string PartitionPageTokenAfter(const PartitionPageQuery& query,
                                    const PartitionTask& task);

}  // namespace backfill

#endif  // BACKFILL_CORE_GOVERNANCE_JOB_LISTING_H_
