// What the SQL engine checks of the specs and layouts it is handed before
// anything reaches the warehouse, and the small lookups over a JobLayout
// that every unit of the engine makes. Written once for every engine; the
// dialect says which names the database would not keep as they are.
//
// Stateless free functions; thread-safe.

#ifndef BACKFILL_STORAGE_SQL_ENGINE_CHECKS_H_
#define BACKFILL_STORAGE_SQL_ENGINE_CHECKS_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/model/catalog.h"
#include "core/ports/engine.h"
#include "storage/sql/dialect.h"

namespace backfill::sql {

// Adds context to an error, keeping its code.
absl::Status Annotate(const absl::Status& status, std::string_view context);

// What the engine needs of a dataset it writes: derived, with contract
// columns of valid types among which its partition columns are, and names
// the database keeps (Dialect::CheckName) for its table, staging and
// rollback copy.
absl::Status CheckWritable(const Dialect& dialect, const DatasetSpec& ds);

// The keys of an item (if any) are valid entity keys of a dataset that
// declares an entity_key.
absl::Status CheckItemKeys(const JobLayout::Item& item);

// A partition valid for the dataset's layout (INVALID_ARGUMENT naming the
// dataset and the partition otherwise).
absl::Status CheckPartition(const DatasetSpec& ds,
                            const std::string& partition);

// The item of `layout` that recomputes `dataset`, or nullptr.
const JobLayout::Item* FindItem(const JobLayout& layout,
                                const std::string& dataset);

// `dataset` is pinned by the job (read from its snapshot), not recomputed.
bool IsPinned(const JobLayout& layout, const std::string& dataset);

// `"a", "b"` over the contract's columns (each after `prefix`), or `*` for
// a dataset without declared columns (a source).
std::string ColumnList(const DatasetSpec& ds, std::string_view prefix = "");

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_ENGINE_CHECKS_H_
