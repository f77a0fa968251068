// SchemaCheck (always on, `schema`): contract and schema drift. The
// transform's output columns must be exactly the contract's (an extra or a
// missing column fails, naming it); every staged value must fit its
// column's declared type (per partition); the published table, once it
// exists, must have exactly the contract's columns with the declared types
// (compared ignoring letter case and spaces).
// Stateless but for what Require records; used by one thread.

#ifndef BACKFILL_CORE_CHECKS_SCHEMA_CHECK_H_
#define BACKFILL_CORE_CHECKS_SCHEMA_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checks/check.h"
#include "core/model/catalog.h"

namespace backfill {

class SchemaCheck : public Check {
 public:
  SchemaCheck() = default;
  void Require(ProfileRequest* request) override;
  absl::StatusOr<std::vector<CheckResult>> Run(
      const CheckContext& context) override;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_CHECKS_SCHEMA_CHECK_H_
