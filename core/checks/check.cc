#include "core/checks/check.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace backfill {

ResultBuilder::ResultBuilder(std::string check, std::string kind,
                             CheckSeverity severity, std::string dataset,
                             std::string allowed) {
  base_.check = std::move(check);
  base_.kind = std::move(kind);
  base_.severity = severity;
  base_.dataset = std::move(dataset);
  base_.allowed = std::move(allowed);
}

CheckResult ResultBuilder::Base() const { return base_; }

void ResultBuilder::Pass() { ++checked_; }

void ResultBuilder::Fail(const std::string& partition, std::string observed,
                         std::string message,
                         std::vector<std::string> samples) {
  ++checked_;
  ++failed_;
  if (static_cast<int>(failures_.size()) >= kMaxFailedResultsPerCheck) return;
  CheckResult r = Base();
  r.partition = partition;
  r.passed = false;
  r.observed = std::move(observed);
  r.message = std::move(message);
  if (samples.size() > static_cast<size_t>(kMaxSampleRows)) {
    samples.resize(kMaxSampleRows);
  }
  r.samples = std::move(samples);
  failures_.push_back(std::move(r));
}

void ResultBuilder::Whole(bool passed, std::string observed,
                          std::string message,
                          std::vector<std::string> samples) {
  CheckResult r = Base();
  r.passed = passed;
  r.observed = std::move(observed);
  r.message = std::move(message);
  if (samples.size() > static_cast<size_t>(kMaxSampleRows)) {
    samples.resize(kMaxSampleRows);
  }
  r.samples = std::move(samples);
  wholes_.push_back(std::move(r));
}

std::vector<CheckResult> ResultBuilder::Finish(bool summary) {
  std::vector<CheckResult> out;
  if (summary) {
    CheckResult s = Base();
    s.summary = true;
    s.partitions_checked = checked_;
    s.partitions_failed = failed_;
    s.passed = failed_ == 0;
    s.observed =
        failed_ == 0
            ? absl::StrCat(checked_,
                           checked_ == 1 ? " partition" : " partitions",
                           " passed")
            : absl::StrCat(failed_, " of ", checked_,
                           checked_ == 1 ? " partition" : " partitions",
                           " failed");
    s.message =
        absl::StrCat(base_.check, " on ", base_.dataset, ": ", s.observed);
    out.push_back(std::move(s));
  }
  for (CheckResult& r : wholes_) out.push_back(std::move(r));
  for (CheckResult& r : failures_) out.push_back(std::move(r));
  return out;
}

std::string PercentText(double fraction) {
  if (std::isinf(fraction)) return fraction > 0 ? "+inf%" : "-inf%";
  std::string text = absl::StrFormat("%.1f%%", fraction * 100);
  if (fraction > 0) text = "+" + text;
  return text;
}

std::string NumberText(double value) {
  if (std::isfinite(value) && value == std::floor(value) &&
      std::fabs(value) < 1e15) {
    return absl::StrFormat("%.0f", value);
  }
  return absl::StrFormat("%.6g", value);
}

std::string RowsText(int64_t rows) {
  return absl::StrCat(rows, rows == 1 ? " row" : " rows");
}

}  // namespace backfill
