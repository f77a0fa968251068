// IsIdentifier: whether a name from a spec (a dataset, table, column,
// partition key or consumer name) is one the service accepts: ASCII
// letters, digits and '_', not starting with a digit, at most 128 bytes.
// Such a name needs no escaping to be read, though every SQL statement
// still quotes it.
//
// A pure function; thread-safe.

#ifndef BACKFILL_CORE_MODEL_IDENTIFIER_H_
#define BACKFILL_CORE_MODEL_IDENTIFIER_H_

#include <string_view>

namespace backfill {

bool IsIdentifier(std::string_view s);

// Whether `c` may appear in such a name (an ASCII letter, digit or '_').
bool IsIdentifierChar(char c);

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_IDENTIFIER_H_
