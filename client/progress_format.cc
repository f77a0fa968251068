#include "client/progress_format.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli_terms.h"
#include "client/value_format.h"

namespace backfill {
namespace cli {
namespace {

// Percent of partitions done, in integers so the bar and the line agree; a
// job that succeeded with nothing to do is complete.
int64_t PercentDone(const v1::Backfill& backfill) {
  const v1::PartitionCounts& counts = backfill.partitions();
  if (counts.total() <= 0) {
    return backfill.state() == v1::BACKFILL_STATE_SUCCEEDED ? 100 : 0;
  }
  return std::clamp<int64_t>(DonePartitions(counts) * 100 / counts.total(), 0,
                             100);
}

// "45s", "3m20s", "2h05m": an ETA, rounded up to whole seconds.
std::string EtaText(double seconds) {
  // A value from the network: NaN, negative or absurd is shown bounded.
  if (!std::isfinite(seconds) || seconds > 1e9) return "more than 30 years";
  const int64_t s = static_cast<int64_t>(std::ceil(std::max(seconds, 0.0)));
  if (s < 60) return absl::StrFormat("%ds", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

// "  ETA 3m20s" when the job's ETA is known, else "".
std::string EtaSuffix(const v1::Backfill& backfill) {
  if (!backfill.has_eta()) return "";
  return absl::StrCat("  ETA ", EtaText(backfill.eta().remaining_seconds()));
}

// "  cost 1.2k/3000 input_rows" (actual so far / estimated) once the job
// has an estimate or has read anything, else "".
std::string CostSoFar(const v1::Backfill& backfill) {
  if (backfill.cost_estimate().backfill() <= 0 && backfill.actual_cost() <= 0) {
    return "";
  }
  return absl::StrCat("  cost ", HumanCount(backfill.actual_cost()), "/",
                      HumanCount(backfill.cost_estimate().backfill()), " ",
                      UnitOr(backfill.cost_estimate().unit()));
}

}  // namespace

std::string FormatProgressBar(const v1::Backfill& backfill,
                              double elapsed_seconds, int bar_width) {
  const v1::PartitionCounts& counts = backfill.partitions();
  const int64_t done = DonePartitions(counts);
  const int64_t percent = PercentDone(backfill);
  int64_t filled =
      counts.total() > 0
          ? std::clamp<int64_t>(done * bar_width / counts.total(), 0, bar_width)
          : percent * bar_width / 100;
  std::string out = absl::StrFormat(
      "[%s%s] %3d%%  %d/%d partitions  %s  %.1f s",
      std::string(static_cast<size_t>(filled), '#'),
      std::string(static_cast<size_t>(bar_width - filled), '.'), percent, done,
      counts.total(), StateName(backfill.state()), elapsed_seconds);
  absl::StrAppend(&out, EtaSuffix(backfill), CostSoFar(backfill));
  if (const std::string cut = CutoffText(counts); !cut.empty()) {
    absl::StrAppend(&out, "  ", cut);
  }
  if (counts.failed() > 0) {
    absl::StrAppend(&out, "  ", counts.failed(), " failed");
  }
  return out;
}

std::string FormatProgressBarFitting(const v1::Backfill& backfill,
                                     double elapsed_seconds, int columns) {
  const size_t fits = static_cast<size_t>(std::max(columns - 1, 1));
  std::string line;
  for (int bar = 20; bar >= 5; bar -= 5) {
    line = FormatProgressBar(backfill, elapsed_seconds, bar);
    if (line.size() <= fits) return line;
  }
  line.resize(fits);  // ASCII: the state, numbers and units only
  return line;
}

std::string FormatProgressLine(const v1::Backfill& backfill,
                               double elapsed_seconds) {
  const v1::PartitionCounts& counts = backfill.partitions();
  std::string out = absl::StrFormat(
      "job %s: %s  %d/%d partitions  %d%%  %.1f s", TerminalText(backfill.id()),
      StateName(backfill.state()), DonePartitions(counts), counts.total(),
      PercentDone(backfill), elapsed_seconds);
  absl::StrAppend(&out, EtaSuffix(backfill), CostSoFar(backfill));
  if (const std::string cut = CutoffText(counts); !cut.empty()) {
    absl::StrAppend(&out, "  ", cut);
  }
  if (counts.failed() > 0) {
    absl::StrAppend(&out, "  ", counts.failed(), " failed");
  }
  if (!backfill.current_step().empty()) {
    absl::StrAppend(&out, "  now: ", TerminalText(backfill.current_step()));
  }
  if (!backfill.message().empty()) {
    absl::StrAppend(&out, "  (", TerminalText(InCliTerms(backfill.message())),
                    ")");
  }
  return out;
}

}  // namespace cli
}  // namespace backfill
