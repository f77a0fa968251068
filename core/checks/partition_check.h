// PartitionCheck (always on, `partition`): every staged row belongs to one
// of the job's partitions of the dataset (the engine's ValidateStaged
// counts them by partition).
// Stateless but for what Require records; used by one thread.

#ifndef BACKFILL_CORE_CHECKS_PARTITION_CHECK_H_
#define BACKFILL_CORE_CHECKS_PARTITION_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checks/check.h"
#include "core/model/catalog.h"

namespace backfill {

class PartitionCheck : public Check {
 public:
  PartitionCheck() = default;
  absl::StatusOr<std::vector<CheckResult>> Run(
      const CheckContext& context) override;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_CHECKS_PARTITION_CHECK_H_
