// NotNullCheck (`kind: not_null`): no staged row has a NULL in any of
// `columns`.
// Stateless but for what Require records; used by one thread.

#ifndef BACKFILL_CORE_CHECKS_NOT_NULL_CHECK_H_
#define BACKFILL_CORE_CHECKS_NOT_NULL_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checks/check.h"
#include "core/model/catalog.h"

namespace backfill {

class NotNullCheck : public Check {
 public:
  explicit NotNullCheck(const CheckSpec& spec) : spec_(spec) {}
  void Require(ProfileRequest* request) override;
  absl::StatusOr<std::vector<CheckResult>> Run(
      const CheckContext& context) override;

 private:
  CheckSpec spec_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_CHECKS_NOT_NULL_CHECK_H_
