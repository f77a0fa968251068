// What the two halves of FakeEngine (fake_engine.cc, fake_engine_rollback.cc)
// share: its fingerprints, which job ids it lists, row sums. Stateless;
// thread-safe. Used by FakeEngine only.

#ifndef BACKFILL_TESTS_TESTING_FAKE_ENGINE_INTERNAL_H_
#define BACKFILL_TESTS_TESTING_FAKE_ENGINE_INTERNAL_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/model/fingerprint.h"

namespace backfill::testing::fake_engine_internal {

// "<16 hex digits>:<rows>", a function of its parts only.
inline std::string FingerprintOf(const std::string& dataset,
                                 const std::string& salt,
                                 const std::string& partition, int64_t rows) {
  return absl::StrCat(
      HashHex(absl::StrCat(dataset.size(), ":", dataset, salt.size(), ":", salt,
                           partition.size(), ":", partition, rows)),
      ":", rows);
}

// Ids SqliteEngine can read back from its table names: "bf-<digits>".
inline bool IsStoreJobId(const std::string& id) {
  if (id.size() <= 3 || id.compare(0, 3, "bf-") != 0) return false;
  return std::all_of(id.begin() + 3, id.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

inline int64_t Sum(const std::map<std::string, int64_t>& rows) {
  int64_t sum = 0;
  for (const auto& [partition, n] : rows) sum += n;
  return sum;
}

}  // namespace backfill::testing::fake_engine_internal

#endif  // BACKFILL_TESTS_TESTING_FAKE_ENGINE_INTERNAL_H_
