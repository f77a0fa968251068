// FUZZ_CHECK: the invariant check of the fuzz targets (fuzz/). A failed
// check prints the condition and its place and aborts, which libFuzzer
// reports as a crash and saves the input. Unlike assert(), it is never
// compiled out. Header only; thread-safe (it writes to stderr).

#ifndef BACKFILL_FUZZ_FUZZ_CHECK_H_
#define BACKFILL_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, \
                   __LINE__, #cond);                                  \
      std::abort();                                                   \
    }                                                                 \
  } while (false)

#endif  // BACKFILL_FUZZ_FUZZ_CHECK_H_
