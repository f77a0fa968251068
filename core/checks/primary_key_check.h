// PrimaryKeyCheck (always on, `primary_key`): the staged rows' primary key
// is unique and never NULL, as the engine's ValidateStaged reports it.
// Stateless but for what Require records; used by one thread.

#ifndef BACKFILL_CORE_CHECKS_PRIMARY_KEY_CHECK_H_
#define BACKFILL_CORE_CHECKS_PRIMARY_KEY_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checks/check.h"
#include "core/model/catalog.h"

namespace backfill {

class PrimaryKeyCheck : public Check {
 public:
  PrimaryKeyCheck() = default;
  absl::StatusOr<std::vector<CheckResult>> Run(
      const CheckContext& context) override;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_CHECKS_PRIMARY_KEY_CHECK_H_
