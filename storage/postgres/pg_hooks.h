// PgHooks: what the PostgreSQL engine adds to the shared publish, rollback
// (sql::ReplaceHooks) and staging (sql::StagingHooks) of storage/sql/:
//   - each published table a publish or rollback replaces rows of is
//     locked against other writers (SHARE ROW EXCLUSIVE) until commit, and
//     its kept partition statistics are forgotten after;
//   - a transform's objects (the job's views and the output table) are
//     made in the session: views per call (DISCARD TEMP before and after),
//     an output table that is all a call needs kept for the session's
//     next calls until it took kKeptScratchRows rows; the transform's
//     named parameters are made positional
//     (storage/sql/named_parameters.h); it runs with the job's schema first on
//     its search_path, in the read-only transaction, for its shape, then once
//     per job and dataset is planned and refused when the plan reads anything
//     but its declared inputs and the job's own tables, or calls what the
//     allow-list does not allow (pg_plan_check.h);
//   - two stagings of one partition take turns (a transaction-scoped
//     advisory lock on the job, dataset and partition);
//   - a job's staging table of a partitioned dataset has an index on its
//     partition column, so that replacing, diffing and checking one
//     partition's staged rows reads that partition's rows, not the job's.
//
// Ownership: borrows the dialect, which must outlive the hooks.
// Thread-safety: thread-safe; which transforms passed their plan check is
// guarded by a mutex.

#ifndef BACKFILL_STORAGE_POSTGRES_PG_HOOKS_H_
#define BACKFILL_STORAGE_POSTGRES_PG_HOOKS_H_

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "storage/postgres/pg_dialect.h"
#include "storage/sql/replace_hooks.h"
#include "storage/sql/staging.h"

namespace backfill::postgres {

class PgHooks : public sql::ReplaceHooks, public sql::StagingHooks {
 public:
  // `replaced`: called with the name of each dataset whose published rows
  // a publish or rollback replaced, once it committed.
  PgHooks(const PgDialect* dialect,
          std::function<void(const std::string&)> replaced)
      : dialect_(*dialect), replaced_(std::move(replaced)) {}

  // Forgets which of the job's transforms passed their plan check.
  void Forget(const std::string& job_id);

  // ---- Staging
  // ---------------------------------------------------------------
  absl::Status StageTableReady(sql::Connection* conn,
                               const sql::Relation& stage,
                               const DatasetSpec& dataset) override;
  absl::StatusOr<sql::CompiledTransform> OpenTransform(
      sql::Connection* conn, const sql::TransformSetup& setup) override;
  absl::StatusOr<std::vector<std::string>> VetTransform(
      sql::Connection* conn, const sql::TransformSetup& setup,
      const sql::CompiledTransform& transform,
      const sql::Params& params) override;
  absl::Status LockPartition(sql::Connection* conn, const std::string& job_id,
                             const DatasetSpec& dataset,
                             const std::string& partition) override;
  absl::Status CloseTransform(sql::Connection* conn,
                              int64_t rows_staged) override;

  // ---- Publish and rollback -------------------------------------------------
  absl::Status PrepareTable(sql::Connection* conn,
                            const DatasetSpec& ds) override;
  void Replaced(const DatasetSpec& ds) override { replaced_(ds.name); }

  // Rows (plus one per call) a kept output table takes before it is
  // dropped and made anew.
  static constexpr int64_t kKeptScratchRows = 10'000;

 private:
  const PgDialect& dialect_;
  const std::function<void(const std::string&)> replaced_;
  absl::Mutex mu_;
  // (job, dataset) whose transform's plan passed the allow-lists.
  std::set<std::pair<std::string, std::string>> checked_ ABSL_GUARDED_BY(mu_);
};

}  // namespace backfill::postgres

#endif  // BACKFILL_STORAGE_POSTGRES_PG_HOOKS_H_
