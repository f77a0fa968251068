// MeasureChangeCheck (`kind: measure_change`): the total of a numeric column,
// staged vs published, per partition and over the job; fails when a change
// exceeds max_change. Partitions with no published rows are left out of
// both (a first load passes); a published total of 0 that becomes
// anything else is an unbounded change and fails.
// Stateless but for what Require records; used by one thread.

#ifndef BACKFILL_CORE_CHECKS_MEASURE_CHANGE_CHECK_H_
#define BACKFILL_CORE_CHECKS_MEASURE_CHANGE_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checks/check.h"
#include "core/model/catalog.h"

namespace backfill {

class MeasureChangeCheck : public Check {
 public:
  explicit MeasureChangeCheck(const CheckSpec& spec) : spec_(spec) {}
  void Require(ProfileRequest* request) override;
  absl::StatusOr<std::vector<CheckResult>> Run(
      const CheckContext& context) override;

 private:
  CheckSpec spec_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_CHECKS_MEASURE_CHANGE_CHECK_H_
