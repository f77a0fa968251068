// SortUnique: sorts a vector and drops its repeated elements, leaving each
// value once in ascending order.
//
// A pure function of its argument; thread-safe for distinct vectors.

#ifndef BACKFILL_CORE_BASE_SORT_UNIQUE_H_
#define BACKFILL_CORE_BASE_SORT_UNIQUE_H_

#include <algorithm>
#include <vector>

namespace backfill {

template <typename T>
void SortUnique(std::vector<T>* values) {
  std::sort(values->begin(), values->end());
  values->erase(std::unique(values->begin(), values->end()), values->end());
}

}  // namespace backfill

#endif  // BACKFILL_CORE_BASE_SORT_UNIQUE_H_
