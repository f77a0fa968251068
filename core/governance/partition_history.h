// PartitionHistory: "why is this number what it is" for one (dataset,
// partition) — every version lineage recorded for it, newest first, each
// with what the state store knows of the job that made it (its state now,
// its entity keys, its approval, its diff of the partition), and whether
// the partition is stale now (core/plan/stale_dependents.h).
//
// Built from what the store records: lineage (StateStore::GetLineage), jobs
// (GetJobProgress), diffs (PartitionDiffs), the jobs' check results
// (ListCheckResults, once per job). Nothing is read from the warehouse.
// Stateless free function; thread-safe as far as the store is.

#ifndef BACKFILL_CORE_GOVERNANCE_PARTITION_HISTORY_H_
#define BACKFILL_CORE_GOVERNANCE_PARTITION_HISTORY_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "core/model/check_result.h"
#include "core/model/diff.h"
#include "core/model/job.h"
#include "core/plan/stale_dependents.h"
#include "core/ports/state_store.h"

namespace backfill {

struct PartitionVersion {
  // The lineage record: when, job, kind (publish: the job's backfill;
  // rollback: the job's rollback restored these rows), reason, ticket,
  // requested_by, approval, transform version, inputs, rows, fingerprint.
  LineageRecord record;
  JobState job_state = JobState::kQueued;  // the job's state now
  // The entity keys whose rows the job recomputed in this partition (a
  // keyed job on its target; every other row stayed as it was). Empty:
  // the whole partition.
  std::vector<std::string> keys;
  // The diff the job computed of this partition before publishing
  // (publish versions of jobs that stored one).
  std::optional<PartitionDiff> diff;
  // What the job's validation found about this partition (publish
  // versions only: a rollback ran no checks): per check, the partition's
  // own result, "passed" derived from a complete summary, or the summary
  // when the job did not keep every failing partition; then the results
  // about the whole dataset (core/governance/version_checks.h). Empty when
  // the job stored no check results.
  std::vector<CheckResult> checks;
};

struct PartitionHistory {
  std::string dataset;
  std::string partition;
  std::vector<PartitionVersion> versions;  // newest first
  // Set when the current version is stale by its lineage: which inputs
  // were replaced since, and by what.
  std::optional<StaleDependent> stale;
};

// The history of `partition` of `dataset`. NOT_FOUND naming the dataset
// when the catalog does not declare it; FAILED_PRECONDITION for a source
// dataset (backfilld never publishes one); INVALID_ARGUMENT naming the
// expected format when `partition` is not a partition value of the
// dataset's grain (core/model/partition_layout.h), or not one of the declared
// keys of a key-grain dataset (ValidateDatasetPartition). A valid partition
// that was never published has no versions.
absl::StatusOr<PartitionHistory> ExplainPartition(const Catalog& catalog,
                                                  StateStore& store,
                                                  const std::string& dataset,
                                                  const std::string& partition);

}  // namespace backfill

#endif  // BACKFILL_CORE_GOVERNANCE_PARTITION_HISTORY_H_
