// ReferencesCheck (`kind: references`): per partition, staged rows whose
// non-NULL `column` has no equal `key` in the referenced dataset — the
// job's pinned snapshot of it when the job pins it (what the transform
// joined with), else its published table; fails above max_orphans.
// Stateless but for what Require records; used by one thread.

#ifndef BACKFILL_CORE_CHECKS_REFERENCES_CHECK_H_
#define BACKFILL_CORE_CHECKS_REFERENCES_CHECK_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checks/check.h"
#include "core/model/catalog.h"

namespace backfill {

class ReferencesCheck : public Check {
 public:
  ReferencesCheck(const CheckSpec& spec, const DatasetSpec* referenced)
      : spec_(spec), referenced_(referenced) {}
  void Require(ProfileRequest* request) override;
  absl::StatusOr<std::vector<CheckResult>> Run(
      const CheckContext& context) override;

 private:
  CheckSpec spec_;
  const DatasetSpec* referenced_;
  size_t index_ = 0;  // in the profile's references
};

}  // namespace backfill

#endif  // BACKFILL_CORE_CHECKS_REFERENCES_CHECK_H_
