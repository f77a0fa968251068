// SqlEngine::Group: the StagingGroup (core/ports/engine.h) of the SQL
// engines whose staging connections keep the session's objects between
// calls (SqlEngine::StagesInGroups). Each Stage runs staging's step 1
// (staging.h TransformPartition) on the group's connection and appends the
// partition's rows to the session's group table in the same read
// transaction; Commit runs step 2 once for all of them (WriteStaged), which
// checks that the group table holds exactly their rows. So a group of n
// short partitions takes one write transaction, and one wait for the
// warehouse's write lock, instead of n.
//
// The connection is leased (AcquireForStaging) at the first Stage after a
// Commit and handed back by the Commit, so that nothing else waits for it
// longer than a group. The change triggers a staging would install first
// (SqlEngine::EnsureInputSignals, on a connection of its own) are
// installed only while the group holds none, and the reinstallation of
// missing ones after the Commit: the group never waits for a second
// connection while it holds one.
//
// Ownership: borrows the engine, which must outlive it, and the dataset
// (from the job's catalog). Thread-safety: one thread at a time.

#ifndef BACKFILL_STORAGE_SQL_SQL_STAGING_GROUP_H_
#define BACKFILL_STORAGE_SQL_SQL_STAGING_GROUP_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/catalog.h"
#include "core/ports/engine.h"
#include "storage/sql/connection.h"
#include "storage/sql/job_registry.h"
#include "storage/sql/sql_engine.h"
#include "storage/sql/staging.h"

namespace backfill::sql {

class SqlEngine::Group final : public StagingGroup {
 public:
  Group(SqlEngine* engine, std::string job_id, const DatasetSpec* dataset)
      : engine_(engine), job_id_(std::move(job_id)), dataset_(dataset) {}

  absl::StatusOr<StageResult> Stage(
      const std::string& partition,
      const std::vector<InputRef>& inputs) override;
  absl::StatusOr<absl::Duration> Commit() override;

 private:
  SqlEngine* const engine_;
  const std::string job_id_;
  const DatasetSpec* const dataset_;
  // The job as the last Stage found it registered.
  std::shared_ptr<const JobRegistry::Job> job_;
  // Held from the first Stage after a Commit to the next Commit.
  Lease conn_;
  // The partitions transformed into the group table, not yet written.
  std::vector<TransformedPartition> pending_;
  std::set<const DatasetSpec*> unsignalled_;
};

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_SQL_STAGING_GROUP_H_
