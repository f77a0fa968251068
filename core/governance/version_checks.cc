#include "core/governance/version_checks.h"

#include <cstdint>
#include <map>
#include <utility>

namespace backfill {
namespace {

// What the job stored per check of the dataset, besides its summary.
struct Stored {
  int64_t failures_listed = 0;       // failing results of a partition
  const CheckResult* own = nullptr;  // the result of the partition asked
  bool has_summary = false;
};

}  // namespace

std::vector<CheckResult> VersionChecks(
    const std::vector<CheckResult>& job_results, const std::string& dataset,
    const std::string& partition) {
  std::map<std::string, Stored> by_check;
  for (const CheckResult& r : job_results) {
    if (r.dataset != dataset) continue;
    Stored& s = by_check[r.check];
    if (r.summary) {
      s.has_summary = true;
      continue;
    }
    if (r.partition.empty()) continue;  // about the whole dataset
    if (!r.passed) ++s.failures_listed;
    if (r.partition == partition && s.own == nullptr) s.own = &r;
  }
  std::vector<CheckResult> out;
  for (const CheckResult& r : job_results) {
    if (r.dataset != dataset) continue;
    const Stored& s = by_check[r.check];
    if (!r.summary) {
      if (r.partition.empty()) {
        out.push_back(r);  // dataset-wide
      } else if (&r == s.own && !s.has_summary) {
        out.push_back(r);
      }
      continue;
    }
    if (s.own != nullptr) {
      out.push_back(*s.own);
      continue;
    }
    const bool all_failures_listed = s.failures_listed == r.partitions_failed;
    if (!all_failures_listed || r.partitions_checked <= r.partitions_failed) {
      out.push_back(r);  // this partition's outcome was not kept
      continue;
    }
    CheckResult passed;
    passed.check = r.check;
    passed.kind = r.kind;
    passed.severity = r.severity;
    passed.dataset = r.dataset;
    passed.partition = partition;
    passed.passed = true;
    passed.allowed = r.allowed;
    passed.message = kDerivedPassedMessage;
    out.push_back(std::move(passed));
  }
  return out;
}

}  // namespace backfill
