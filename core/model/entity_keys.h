// Entity keys of a request (`--keys`): the check and normalization of the
// keys a backfill of a dataset with `entity_key` is restricted to. Pure
// functions; thread-safe.

#ifndef BACKFILL_CORE_MODEL_ENTITY_KEYS_H_
#define BACKFILL_CORE_MODEL_ENTITY_KEYS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/catalog.h"

namespace backfill {

inline constexpr size_t kMaxEntityKeys = 10000;
inline constexpr size_t kMaxEntityKeyBytes = 256;

// The keys of a request for `target`, sorted with duplicates removed.
// INVALID_ARGUMENT (naming the field `keys` and the dataset) when the target
// declares no entity_key, or for no or more than kMaxEntityKeys distinct
// keys, an empty key, a key over kMaxEntityKeyBytes bytes or one holding a
// control character (bytes 0x00-0x1F and 0x7F). (The server refuses
// strings that are not UTF-8 before they get here.)
absl::StatusOr<std::vector<std::string>> NormalizeEntityKeys(
    const DatasetSpec& target, const std::vector<std::string>& keys);

// "a, b, c and 7 more" (the first `shown` keys and how many else).
std::string DescribeEntityKeys(const std::vector<std::string>& keys,
                               size_t shown = 3);

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_ENTITY_KEYS_H_
