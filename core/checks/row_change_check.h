// RowChangeCheck (`kind: row_change`): per partition, the staged rows against
// the published rows they replace; fails when the change exceeds
// max_change. A partition with no published rows (a first load) passes.
// Stateless but for what Require records; used by one thread.

#ifndef BACKFILL_CORE_CHECKS_ROW_CHANGE_CHECK_H_
#define BACKFILL_CORE_CHECKS_ROW_CHANGE_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checks/check.h"
#include "core/model/catalog.h"

namespace backfill {

class RowChangeCheck : public Check {
 public:
  explicit RowChangeCheck(const CheckSpec& spec) : spec_(spec) {}
  absl::StatusOr<std::vector<CheckResult>> Run(
      const CheckContext& context) override;

 private:
  CheckSpec spec_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_CHECKS_ROW_CHANGE_CHECK_H_
