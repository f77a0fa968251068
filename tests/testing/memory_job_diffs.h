// MemoryJobDiffs: the diffs of the in-memory state store's jobs
// (memory_state_store.h), kept as SqliteStateStore keeps them: one diff
// per job, replaced as a whole, each dataset's partitions in partition
// order, measure totals and times as stored (as_stored.h), samples only
// when asked for.
//
// Thread-compatible: the store calls it with its own mutex held.

#ifndef BACKFILL_TESTS_TESTING_MEMORY_JOB_DIFFS_H_
#define BACKFILL_TESTS_TESTING_MEMORY_JOB_DIFFS_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "core/model/diff.h"

namespace backfill::testing {

class MemoryJobDiffs {
 public:
  // Replaces the diff of job `diff.job_id`. FAILED_PRECONDITION, changing
  // nothing, for a diff that lists a dataset, or a partition of one, twice
  // (as the SQLite store's keys refuse it).
  absl::Status Replace(const JobDiff& diff);

  // The job's diff, restricted to `dataset` unless it is ""; nullopt when
  // none was stored.
  std::optional<JobDiff> Get(const std::string& job_id,
                             const std::string& dataset,
                             bool with_samples) const;

  // The diff of (dataset, partition) of every job that stored one, by job
  // id, without samples.
  std::map<std::string, PartitionDiff> Of(const std::string& dataset,
                                          const std::string& partition) const;

 private:
  std::map<std::string, JobDiff> by_job_;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_MEMORY_JOB_DIFFS_H_
