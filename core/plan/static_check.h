// Static check of a pipeline's SQL against the warehouse, before any job
// runs it: every transform, every assertion and every consumer's expect
// query is prepared (not run), so a
// syntax error, a missing table or column, a statement that writes, an
// unknown parameter, or a transform whose output columns are not exactly
// its contract's is reported as `FILE:LINE: dataset "X": ...` — at daemon
// start (logged) and at plan and submit time (refused) — instead of as a
// FAILED job later. The key column of every `references` check is looked
// up too.
//
// Tables that a derived dataset's first publish creates may not exist yet:
// every derived dataset's table is stood in for by an empty table with its
// contract columns while it does not exist (Engine::DescribeQuery), and an
// assertion always reads its own dataset's contract (as it reads staged
// rows). Source tables are never stood in for: a missing one is an error.
//
// Stateless; thread-safe as the engine is.

#ifndef BACKFILL_CORE_PLAN_STATIC_CHECK_H_
#define BACKFILL_CORE_PLAN_STATIC_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "core/ports/engine.h"

namespace backfill {

// The problems of the SQL of `datasets` (all derived datasets when empty),
// one line each; empty when everything compiles. An error status only when
// the warehouse could not be asked (e.g. unavailable).
absl::StatusOr<std::vector<std::string>> CheckPipelineSql(
    const Catalog& catalog, Engine* engine,
    const std::vector<std::string>& datasets = {});

}  // namespace backfill

#endif  // BACKFILL_CORE_PLAN_STATIC_CHECK_H_
