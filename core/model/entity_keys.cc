#include "core/model/entity_keys.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/error_details.h"

namespace backfill {

absl::StatusOr<std::vector<std::string>> NormalizeEntityKeys(
    const DatasetSpec& target, const std::vector<std::string>& keys) {
  if (target.entity_key.empty()) {
    return InvalidFieldError(
        "keys", "ENTITY_KEY_UNDECLARED",
        absl::StrCat("`keys`: dataset \"", target.name,
                     "\" declares no entity_key, so a backfill of it cannot "
                     "be restricted to keys; declare `entity_key: COLUMN` in "
                     "the pipeline or give no `keys`"));
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& k = keys[i];
    if (k.empty()) {
      return InvalidFieldError(
          absl::StrCat("keys[", i, "]"), "ENTITY_KEY_INVALID",
          absl::StrCat("`keys`: key ", i + 1, " is empty; give the values of ",
                       target.name, ".", target.entity_key));
    }
    if (k.size() > kMaxEntityKeyBytes) {
      return InvalidFieldError(
          absl::StrCat("keys[", i, "]"), "ENTITY_KEY_INVALID",
          absl::StrCat("`keys`: key ", i + 1, " is ", k.size(),
                       " bytes; at most ", kMaxEntityKeyBytes,
                       " bytes per key"));
    }
    for (unsigned char c : k) {
      if (c < 0x20 || c == 0x7f) {
        return InvalidFieldError(
            absl::StrCat("keys[", i, "]"), "ENTITY_KEY_INVALID",
            absl::StrCat("`keys`: key ", i + 1,
                         " holds a control character (byte ", int{c},
                         "); keys are plain text"));
      }
    }
  }
  std::vector<std::string> out = keys;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.empty()) {
    return InvalidFieldError(
        "keys", "ENTITY_KEY_INVALID",
        absl::StrCat("`keys`: no key given for dataset \"", target.name, "\""));
  }
  if (out.size() > kMaxEntityKeys) {
    return InvalidFieldError(
        "keys", "ENTITY_KEYS_TOO_MANY",
        absl::StrCat("`keys`: ", out.size(), " distinct keys; at most ",
                     kMaxEntityKeys,
                     " per backfill (split the keys into several backfills, "
                     "or backfill whole partitions without `keys`)"));
  }
  return out;
}

std::string DescribeEntityKeys(const std::vector<std::string>& keys,
                               size_t shown) {
  if (keys.size() <= shown) return absl::StrJoin(keys, ", ");
  std::vector<std::string> first(keys.begin(), keys.begin() + shown);
  return absl::StrCat(absl::StrJoin(first, ", "), " and ", keys.size() - shown,
                      " more");
}

}  // namespace backfill
