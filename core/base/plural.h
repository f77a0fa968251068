// Plural: how messages count things — "1 partition",
// "3 partitions". Stateless; thread-safe.

#ifndef BACKFILL_CORE_BASE_PLURAL_H_
#define BACKFILL_CORE_BASE_PLURAL_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace backfill {

// `n` followed by `one` when n is 1, else by `many`.
inline std::string Plural(int64_t n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

}  // namespace backfill

#endif  // BACKFILL_CORE_BASE_PLURAL_H_
