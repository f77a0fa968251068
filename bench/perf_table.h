// The table the performance suite prints: one Row per measure, and the
// formatting its figures share (counts with thousands separators, seconds,
// medians).
//
// Plain values and free functions; thread-safe.

#ifndef BACKFILL_BENCH_PERF_TABLE_H_
#define BACKFILL_BENCH_PERF_TABLE_H_

#include <optional>
#include <string>
#include <vector>

namespace backfill::bench {

// One line of the table.
struct Row {
  std::string measure;
  std::string goal;
  std::string figures;  // the raw measurements the result comes from
  std::string result;
  std::optional<bool> met;  // nullopt: reported, no pass/fail
};

// 1,234,567; a whole multiple of 100,000 from a million on as 1.2M.
std::string Count(double n);

// Seconds as "0.123 s", or "1.23 ms" below 10 ms.
std::string Sec(double s);

// The middle value (the upper one of an even count); 0 when empty.
double Median(std::vector<double> v);

// The value at fraction `q` (0..1] of the values, by nearest rank (p99 of
// 200 values: the 198th smallest); 0 when empty.
double Quantile(std::vector<double> v, double q);

}  // namespace backfill::bench

#endif  // BACKFILL_BENCH_PERF_TABLE_H_
