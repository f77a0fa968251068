#include "server/listing_convert.h"

#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/error_details.h"
#include "server/proto_convert.h"

namespace backfill {

absl::StatusOr<JobPageQuery> JobPageQueryFromProto(
    const v1::ListBackfillsRequest& request) {
  JobPageQuery query;
  absl::StatusOr<int> page_size =
      PageSizeFromProto(request.page_size(), kDefaultPageSize, kMaxPageSize);
  if (!page_size.ok()) return page_size.status();
  query.page_size = *page_size;
  for (int state : request.states()) {
    std::optional<JobState> parsed =
        StateFromProto(static_cast<v1::BackfillState>(state));
    if (!parsed) {
      return InvalidFieldError(
          "states", "STATE_FILTER_INVALID",
          absl::StrCat("`states`: ", state,
                       " is not a backfill state (use BACKFILL_STATE_QUEUED, "
                       "BACKFILL_STATE_RUNNING, ..., not "
                       "BACKFILL_STATE_UNSPECIFIED)"));
    }
    query.states.push_back(*parsed);
  }
  query.dataset = request.dataset();
  absl::StatusOr<JobView> view = ViewFromProto(request.view(), JobView::kBasic);
  if (!view.ok()) return view.status();
  query.view = *view;
  query.page_token = request.page_token();
  return query;
}

v1::ListBackfillsResponse JobPageToProto(const JobPage& page,
                                         const JobPageQuery& query,
                                         const Catalog& catalog,
                                         size_t max_bytes) {
  v1::ListBackfillsResponse out;
  size_t bytes = 0;
  for (size_t i = 0; i < page.jobs.size(); ++i) {
    v1::Backfill job = JobToProto(page.jobs[i], catalog, query.view);
    const size_t size = job.ByteSizeLong();
    if (i > 0 && bytes + size > max_bytes) {
      // The next page starts with this job.
      out.set_next_page_token(JobPageTokenAfter(query, page.jobs[i - 1]));
      return out;
    }
    bytes += size;
    *out.add_backfills() = std::move(job);
  }
  out.set_next_page_token(page.next_page_token);
  return out;
}

absl::StatusOr<PartitionPageQuery> PartitionPageQueryFromProto(
    const v1::ListPartitionsRequest& request) {
  PartitionPageQuery query;
  if (absl::Status valid = ValidateJobId(request.backfill_id(), "backfill_id");
      !valid.ok()) {
    return valid;
  }
  query.job_id = request.backfill_id();
  query.dataset = request.dataset();
  for (int state : request.states()) {
    std::optional<TaskState> parsed = TaskStateFromProto(state);
    if (!parsed) {
      return InvalidFieldError(
          "states", "STATE_FILTER_INVALID",
          absl::StrCat("`states`: ", state,
                       " is not a partition state (use PARTITION_STATE_ and "
                       "PENDING, RUNNING, STAGED, PUBLISHED, FAILED, "
                       "CANCELLED, UNCHANGED or SKIPPED, not "
                       "PARTITION_STATE_UNSPECIFIED)"));
    }
    query.states.push_back(*parsed);
  }
  absl::StatusOr<int> page_size = PageSizeFromProto(
      request.page_size(), kDefaultPartitionPageSize, kMaxPartitionPageSize);
  if (!page_size.ok()) return page_size.status();
  query.page_size = *page_size;
  query.page_token = request.page_token();
  return query;
}

v1::ListPartitionsResponse PartitionPageToProto(const PartitionPage& page,
                                                const PartitionPageQuery& query,
                                                size_t max_bytes) {
  v1::ListPartitionsResponse out;
  size_t bytes = 0;
  for (size_t i = 0; i < page.partitions.size(); ++i) {
    v1::BackfillPartition partition = TaskToProto(page.partitions[i]);
    const size_t size = partition.ByteSizeLong();
    if (i > 0 && bytes + size > max_bytes) {
      out.set_next_page_token(
          PartitionPageTokenAfter(query, page.partitions[i - 1]));
      return out;
    }
    bytes += size;
    *out.add_partitions() = std::move(partition);
  }
  out.set_next_page_token(page.next_page_token);
  return out;
}

}  // namespace backfill
