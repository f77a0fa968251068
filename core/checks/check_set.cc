#include "core/checks/check_set.h"

#include "core/checks/assert_check.h"
#include "core/checks/measure_change_check.h"
#include "core/checks/min_rows_check.h"
#include "core/checks/not_null_check.h"
#include "core/checks/partition_check.h"
#include "core/checks/primary_key_check.h"
#include "core/checks/references_check.h"
#include "core/checks/row_change_check.h"
#include "core/checks/schema_check.h"

namespace backfill {

std::vector<std::unique_ptr<Check>> ChecksFor(const DatasetSpec& dataset,
                                              const Catalog* catalog,
                                              bool integrity_only) {
  std::vector<std::unique_ptr<Check>> checks;
  checks.push_back(std::make_unique<PartitionCheck>());
  checks.push_back(std::make_unique<PrimaryKeyCheck>());
  if (integrity_only) return checks;
  checks.push_back(std::make_unique<SchemaCheck>());
  for (const CheckSpec& spec : dataset.checks) {
    switch (spec.kind) {
      case CheckKind::kRowChange:
        checks.push_back(std::make_unique<RowChangeCheck>(spec));
        break;
      case CheckKind::kMinRows:
        checks.push_back(std::make_unique<MinRowsCheck>(spec));
        break;
      case CheckKind::kMeasureChange:
        checks.push_back(std::make_unique<MeasureChangeCheck>(spec));
        break;
      case CheckKind::kReferences:
        checks.push_back(std::make_unique<ReferencesCheck>(
            spec, catalog != nullptr ? catalog->Find(spec.dataset) : nullptr));
        break;
      case CheckKind::kNotNull:
        checks.push_back(std::make_unique<NotNullCheck>(spec));
        break;
      case CheckKind::kAssert:
        checks.push_back(std::make_unique<AssertCheck>(spec));
        break;
    }
  }
  return checks;
}

}  // namespace backfill
