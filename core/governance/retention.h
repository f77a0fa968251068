// Retention of rollback copies: which copies a dataset's policy
// (DatasetSpec::retention, `retention: {versions, max_age}` in the pipeline
// file) lets go. Pure functions; the publish step (EnforceRetention in
// core/run/publish_step.h) lists the copies (Engine::ListRollbackCopies), asks
// the state store when their jobs published (StateStore::PublicationTimes) and
// drops what expired (Engine::DropRollbackCopies) at start and after every
// publish. Stateless; thread-safe.

#ifndef BACKFILL_CORE_GOVERNANCE_RETENTION_H_
#define BACKFILL_CORE_GOVERNANCE_RETENTION_H_

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/model/catalog.h"
#include "core/ports/engine.h"

namespace backfill {

// The copies that expired at `now`: per dataset, those not among the
// policy's `versions` newest (by publication time, then job number) and
// those published longer than `max_age` ago (when set). A copy whose job
// has no recorded publication (`published` lacks it: it may be being
// recorded) or whose dataset the catalog no longer declares is kept.
std::vector<RollbackCopy> ExpiredCopies(
    const std::vector<RollbackCopy>& copies,
    const std::map<std::string, absl::Time>& published, const Catalog& catalog,
    absl::Time now);

// "keeps the 10 newest rollback copies", "... and none older than 30d".
std::string DescribeRetention(const RetentionPolicy& policy);

}  // namespace backfill

#endif  // BACKFILL_CORE_GOVERNANCE_RETENTION_H_
