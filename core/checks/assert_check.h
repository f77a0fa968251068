// AssertCheck (`kind: assert`): a SELECT that must return no row, run per
// partition on the staged rows (Engine::RunAssertion): the dataset's own
// table name reads the partition's staged rows, with the transforms' bound
// parameters.
// Stateless but for what Require records; used by one thread.

#ifndef BACKFILL_CORE_CHECKS_ASSERT_CHECK_H_
#define BACKFILL_CORE_CHECKS_ASSERT_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checks/check.h"
#include "core/model/catalog.h"

namespace backfill {

class AssertCheck : public Check {
 public:
  explicit AssertCheck(const CheckSpec& spec) : spec_(spec) {}
  absl::StatusOr<std::vector<CheckResult>> Run(
      const CheckContext& context) override;

 private:
  CheckSpec spec_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_CHECKS_ASSERT_CHECK_H_
