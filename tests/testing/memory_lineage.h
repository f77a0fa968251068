// MemoryLineage: the lineage records of the in-memory state store
// (memory_state_store.h), kept as SqliteStateStore keeps its lineage
// table: each record a publish or a rollback of one (dataset, partition),
// with an id in the order the records were appended (larger: later,
// whatever the clocks said), at most one record per (job, dataset,
// partition, action), times as stored (as_stored.h).
//
// Thread-compatible: the store calls it with its own mutex held.

#ifndef BACKFILL_TESTS_TESTING_MEMORY_LINEAGE_H_
#define BACKFILL_TESTS_TESTING_MEMORY_LINEAGE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/model/job.h"

namespace backfill::testing {

class MemoryLineage {
 public:
  // Appends `records` as `action`s recorded at `now`, all or none: each
  // gets its id, its job id (`job_id` for a publish; for a rollback, its
  // own when it names one, else `job_id`), its time (`now` when it has
  // none) and, for a rollback, no approval. FAILED_PRECONDITION, appending
  // nothing, when two of them are of one (job, dataset, partition).
  absl::Status Append(LineageAction action, const std::string& job_id,
                      const std::vector<LineageRecord>& records,
                      absl::Time now);

  // Whether `job_id` has publish records.
  bool HasPublished(const std::string& job_id) const;

  // The records of (dataset, partition), newest (largest id) first.
  std::vector<LineageRecord> Versions(const std::string& dataset,
                                      const std::string& partition) const;
  // The newest record of any partition of `dataset`.
  std::optional<LineageRecord> NewestOf(const std::string& dataset) const;
  // Every record of the (dataset, partition)s `job_id` published, oldest
  // first.
  std::vector<LineageRecord> Overlapping(const std::string& job_id) const;
  // The time of each job's earliest publish record, for the jobs of
  // `job_ids` that have one.
  std::map<std::string, absl::Time> PublicationTimes(
      const std::vector<std::string>& job_ids) const;
  // The records of `dataset`'s partitions (those of `partitions` only,
  // unless it is empty), by partition, each partition's oldest first.
  std::vector<const LineageRecord*> Of(
      const std::string& dataset,
      const std::set<std::string>& partitions) const;

  // The id of the newest record (0: none).
  int64_t last_id() const { return next_id_ - 1; }

 private:
  // (dataset, partition) -> its records, oldest first.
  std::map<std::pair<std::string, std::string>, std::vector<LineageRecord>>
      records_;
  std::map<std::string, int64_t> published_by_job_;
  int64_t next_id_ = 1;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_MEMORY_LINEAGE_H_
