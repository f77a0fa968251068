// State queries: the SQLite state store's reads across jobs — the store's
// identity and job counter, job listings, the figures a scrape reads, the
// history the planner and early cutoff read (the input rows of each
// partition's last successful run, the verified version of each published
// partition) and the standing of every confirmed downstream consumer.
//
// Free functions in the caller's transaction (see state_sql.h); records
// read from the checksummed tables are checked (DATA_LOSS naming the
// record when one fails).

#ifndef BACKFILL_STORAGE_SQLITE_STATE_STATE_QUERIES_H_
#define BACKFILL_STORAGE_SQLITE_STATE_STATE_QUERIES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/job.h"
#include "core/ports/state_store.h"
#include "storage/sqlite/state/state_read_cache.h"
#include "storage/sqlite/state/state_sql.h"

namespace backfill::sqlite_state {

// StateStore::Info and ListJobIds.
absl::StatusOr<StoreInfo> Info(const StateDb& db);
absl::StatusOr<std::vector<std::string>> ListJobIds(
    const StateDb& db, const std::vector<JobState>& states);

// StateStore::ListJobs; the sums over each job's tasks come from `cache`
// (see LoadJob, state_jobs.h).
absl::StatusOr<std::vector<Job>> ListJobs(const StateDb& db,
                                          const JobFilter& filter,
                                          StateReadCache* cache);

// StateStore::Stats: jobs by state, tasks by state (kept by triggers, so
// that a scrape reads a few rows instead of counting every task), the
// progress of running jobs, the newest lineage id and audit seq.
absl::StatusOr<StoreStats> Stats(const StateDb& db);

// StateStore::LastRunInputRows: one range scan over the (dataset,
// partition) index of tasks, from the smallest to the largest partition
// asked for.
absl::StatusOr<std::map<std::string, int64_t>> LastRunInputRows(
    const StateDb& db, const std::string& dataset,
    const std::vector<std::string>& partitions);

// StateStore::VerifiedVersions: every version of the dataset's partitions
// (a long read; the store runs it on a read-only connection of its own).
absl::StatusOr<std::map<std::string, VerifiedVersion>> VerifiedVersions(
    const StateDb& db, const std::string& dataset,
    const std::vector<std::string>& partitions);

// StateStore::ListConsumerStandings.
absl::StatusOr<std::vector<ConsumerStanding>> ListConsumerStandings(
    const StateDb& db);

}  // namespace backfill::sqlite_state

#endif  // BACKFILL_STORAGE_SQLITE_STATE_STATE_QUERIES_H_
