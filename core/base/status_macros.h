// Helpers for propagating absl::Status and absl::StatusOr through functions
// that themselves return a Status or StatusOr. Header-only; no state.

#ifndef BACKFILL_CORE_BASE_STATUS_MACROS_H_
#define BACKFILL_CORE_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define BACKFILL_CONCAT_INNER_(a, b) a##b
#define BACKFILL_CONCAT_(a, b) BACKFILL_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` is not OK.
#define RETURN_IF_ERROR(expr)                 \
  do {                                        \
    ::absl::Status backfill_status_ = (expr); \
    if (!backfill_status_.ok()) {             \
      return backfill_status_;                \
    }                                         \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, StatusOrExpr());` assigns the value or returns
// the error from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, expr)                                           \
  ASSIGN_OR_RETURN_IMPL_(BACKFILL_CONCAT_(backfill_statusor_, __LINE__), lhs, \
                         expr)

#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) {                             \
    return tmp.status();                       \
  }                                            \
  lhs = std::move(tmp).value()

#endif  // BACKFILL_CORE_BASE_STATUS_MACROS_H_
