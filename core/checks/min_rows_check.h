// MinRowsCheck (`kind: min_rows`): every partition of the job stages at
// least `min` rows.
// Stateless but for what Require records; used by one thread.

#ifndef BACKFILL_CORE_CHECKS_MIN_ROWS_CHECK_H_
#define BACKFILL_CORE_CHECKS_MIN_ROWS_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checks/check.h"
#include "core/model/catalog.h"

namespace backfill {

class MinRowsCheck : public Check {
 public:
  explicit MinRowsCheck(const CheckSpec& spec) : spec_(spec) {}
  absl::StatusOr<std::vector<CheckResult>> Run(
      const CheckContext& context) override;

 private:
  CheckSpec spec_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_CHECKS_MIN_ROWS_CHECK_H_
