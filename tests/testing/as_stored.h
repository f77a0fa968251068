// AsStored: values as the SQLite state store keeps them
// (storage/sqlite/state/state_encoding.h), so that the in-memory store
// (memory_state_store.h) reads back what the durable one would: times to
// the microsecond (rounded down, as unix microseconds are), an infinite
// time as "not yet" (InfinitePast), a duration in whole microseconds
// (truncated, as absl::ToInt64Microseconds does), a double printed with 17
// significant digits.
//
// Pure functions; thread-safe.

#ifndef BACKFILL_TESTS_TESTING_AS_STORED_H_
#define BACKFILL_TESTS_TESTING_AS_STORED_H_

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace backfill::testing {

inline absl::Time StoredTime(absl::Time t) {
  if (t == absl::InfinitePast() || t == absl::InfiniteFuture()) {
    return absl::InfinitePast();
  }
  return absl::FromUnixMicros(absl::ToUnixMicros(t));
}

inline absl::Duration StoredDuration(absl::Duration d) {
  return absl::Microseconds(absl::ToInt64Microseconds(d));
}

inline double StoredDouble(double v) {
  double out = 0;
  return absl::SimpleAtod(absl::StrFormat("%.17g", v), &out) ? out : v;
}

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_AS_STORED_H_
