#include "bench/perf_table.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace backfill::bench {

std::string Count(double n) {
  if (n >= 1e6 && static_cast<int64_t>(n) % 100'000 == 0) {
    return absl::StrFormat("%.1fM", n / 1e6);
  }
  std::string digits = absl::StrCat(static_cast<int64_t>(n));
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) {
    digits.insert(static_cast<size_t>(i), ",");
  }
  return digits;
}

std::string Sec(double s) {
  if (s < 0.01) return absl::StrFormat("%.2f ms", s * 1e3);
  return absl::StrFormat("%.3f s", s);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * v.size()));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace backfill::bench
