// ReplaceHooks: what an engine adds around the shared publish and rollback
// (publish.h, rollback.h), which replace the published rows of a job's
// partitions: checks that the warehouse is still the one it opened, caches
// and statistics of the tables it replaces kept right in the same
// transaction, and whatever it must do to a table before the replacement.
// Every hook does nothing by default.
//
// Thread-safety: called from the thread that publishes or rolls back; an
// engine's hooks synchronize what they share between calls.

#ifndef BACKFILL_STORAGE_SQL_REPLACE_HOOKS_H_
#define BACKFILL_STORAGE_SQL_REPLACE_HOOKS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "storage/sql/connection.h"
#include "storage/sql/dialect.h"

namespace backfill::sql {

class ReplaceHooks {
 public:
  virtual ~ReplaceHooks() = default;

  // Before the transaction starts and again just before it commits: the
  // warehouse is still there to write (FAILED_PRECONDITION otherwise).
  virtual absl::Status CheckWarehouse() { return absl::OkStatus(); }

  // In the transaction, before the rows of `partitions` of `dataset` are
  // replaced; the returned function runs after, in the same transaction.
  virtual absl::StatusOr<std::function<absl::Status()>> BeforeReplacing(
      Connection* conn, const DatasetSpec& dataset,
      const std::vector<std::string>& partitions) {
    return std::function<absl::Status()>([] { return absl::OkStatus(); });
  }

  // In the transaction, once the published table exists and before any of
  // its rows are replaced (e.g. keep other writers away until commit).
  virtual absl::Status PrepareTable(Connection* conn,
                                    const DatasetSpec& dataset) {
    return absl::OkStatus();
  }

  // In a publish's transaction: checks the staged rows once more before
  // they are inserted (`where` starts the error's message).
  virtual absl::Status CheckStaged(Connection* conn, const DatasetSpec& dataset,
                                   const Relation& stage, const Relation& parts,
                                   const std::string& where) {
    return absl::OkStatus();
  }

  // After the transaction committed, for each dataset it replaced rows of.
  virtual void Replaced(const DatasetSpec& dataset) {}
};

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_REPLACE_HOOKS_H_
