#include "core/validate_step.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/checks/check_set.h"
#include "core/plan/early_cutoff.h"

namespace backfill {

std::vector<std::string> DescribeFailures(
    const std::vector<CheckResult>& results, CheckSeverity severity,
    size_t max) {
  std::vector<std::string> lines;
  int64_t total = 0;
  for (const CheckResult& r : results) {
    if (r.severity != severity || r.passed) continue;
    if (r.summary) {
      // Partitions failed beyond those stored one by one.
      int64_t stored = 0;
      for (const CheckResult& d : results) {
        stored += !d.summary && !d.passed && d.check == r.check &&
                  d.dataset == r.dataset && !d.partition.empty();
      }
      total += std::max<int64_t>(0, r.partitions_failed - stored);
      continue;
    }
    ++total;
    if (lines.size() >= max) continue;
    lines.push_back(absl::StrCat(
        r.check, " on ", r.dataset,
        r.partition.empty() ? "" : absl::StrCat(" ", r.partition), ": ",
        r.message.empty() ? r.observed : r.message,
        r.samples.empty() ? ""
                          : absl::StrCat(" (e.g. ", r.samples.front(), ")")));
  }
  if (total > static_cast<int64_t>(lines.size())) {
    lines.push_back(absl::StrCat(
        "and ", total - static_cast<int64_t>(lines.size()), " more"));
  }
  return lines;
}

absl::StatusOr<ValidationOutcome> ValidateStaging(
    Engine* engine, const JobLayout& layout,
    const std::vector<PartitionTask>& tasks, const ValidateOptions& options) {
  // The checkpoints: task index per (dataset, partition).
  std::map<std::string, std::map<std::string, size_t>> checkpoint;
  for (size_t i = 0; i < tasks.size(); ++i) {
    // The early cutoff let go of these: nothing of them is staged.
    if (IsCutOff(tasks[i].state)) continue;
    checkpoint[tasks[i].dataset][tasks[i].partition] = i;
  }
  ValidationOutcome out;
  std::vector<std::string> lost_text;
  std::map<std::string, ValidationReport> reports;
  for (const JobLayout::Item& item : layout.items) {
    const std::string& name = item.dataset->name;
    ASSIGN_OR_RETURN(ValidationReport report,
                     engine->ValidateStaged(layout.job_id, *item.dataset));
    // Staging must hold, per partition, what its checkpoint says was
    // written; otherwise rows were lost (or changed) after the checkpoint
    // and publishing would replace good partitions with missing ones.
    for (const auto& [partition, index] : checkpoint[name]) {
      auto it = report.rows_by_partition.find(partition);
      const int64_t staged =
          it == report.rows_by_partition.end() ? 0 : it->second;
      if (staged != tasks[index].rows_written) {
        out.lost.push_back(index);
        lost_text.push_back(absl::StrCat(
            name, ": ", partition.empty() ? "(all)" : partition, " (staged ",
            staged, ", checkpoint ", tasks[index].rows_written, ")"));
      }
    }
    reports[name] = std::move(report);
  }
  const bool integrity_only = options.integrity_only || !out.lost.empty();
  for (const JobLayout::Item& item : layout.items) {
    const DatasetSpec& ds = *item.dataset;
    std::vector<std::unique_ptr<Check>> checks =
        ChecksFor(ds, options.catalog, integrity_only);
    CheckContext context;
    context.engine = engine;
    context.layout = &layout;
    context.dataset = &ds;
    context.partitions =
        ds.partition ? item.partitions : std::vector<std::string>{""};
    context.report = &reports[ds.name];
    Profile staged;
    Profile published;
    if (!integrity_only) {
      ProfileRequest request;
      request.samples = kMaxSampleRows;
      for (const auto& check : checks) check->Require(&request);
      ASSIGN_OR_RETURN(staged,
                       engine->ProfileStaged(layout.job_id, ds, request));
      ASSIGN_OR_RETURN(published,
                       engine->ProfilePublished(layout.job_id, ds, request));
    }
    context.staged = &staged;
    context.published = &published;
    for (const auto& check : checks) {
      ASSIGN_OR_RETURN(std::vector<CheckResult> results, check->Run(context));
      for (CheckResult& r : results) out.results.push_back(std::move(r));
    }
  }
  out.failures = DescribeFailures(out.results, CheckSeverity::kError);
  out.holds = DescribeFailures(out.results, CheckSeverity::kHold);
  out.warnings = DescribeFailures(out.results, CheckSeverity::kWarn);
  constexpr size_t kShown = 5;
  out.lost_summary = absl::StrJoin(
      lost_text.begin(), lost_text.begin() + std::min(lost_text.size(), kShown),
      "; ");
  if (lost_text.size() > kShown) {
    absl::StrAppend(&out.lost_summary, " and ", lost_text.size() - kShown,
                    " more");
  }
  return out;
}

}  // namespace backfill
