#include "core/plan/cost_budget.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/error_details.h"

namespace backfill {
namespace {

std::string Grouped(std::string digits) {
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

}  // namespace

absl::Status ValidateMaxCost(double max_cost) {
  if (std::isnan(max_cost) || std::isinf(max_cost) || max_cost < 0) {
    return InvalidFieldError(
        "max_cost", "MAX_COST_INVALID",
        absl::StrCat("`max_cost` is ", max_cost, "; give a number of ",
                     kCostUnit, " >= 0 (0: no limit)"));
  }
  return absl::OkStatus();
}

std::string FormatCostFigure(double value) {
  if (std::isnan(value) || std::isinf(value)) return absl::StrCat(value);
  const bool negative = value < 0;
  const double v = std::fabs(value);
  const double whole = std::floor(v);
  std::string text = Grouped(absl::StrFormat("%.0f", whole));
  const double fraction = v - whole;
  if (fraction >= 0.005) {
    std::string f = absl::StrFormat("%.2f", fraction);  // "0.25"
    if (f == "1.00") {
      text = Grouped(absl::StrFormat("%.0f", whole + 1));
    } else {
      while (!f.empty() && f.back() == '0') f.pop_back();
      absl::StrAppend(&text, f.substr(1));
    }
  }
  return negative ? absl::StrCat("-", text) : text;
}

void ApplyBudgets(const Catalog& catalog, const BackfillRequest& request,
                  Plan* plan) {
  std::string first;
  if (request.max_cost > 0) {
    plan->cost.max_cost = request.max_cost;
    if (plan->cost.backfill > request.max_cost) {
      first = absl::StrCat(
          "estimated cost ", FormatCostFigure(plan->cost.backfill), " ",
          kCostUnit, " exceeds `max_cost` ", FormatCostFigure(request.max_cost),
          " (a full reload costs ", FormatCostFigure(plan->cost.full_reload),
          " ", kCostUnit, "): narrow the scope or raise the limit");
    }
  }
  for (DatasetPlan& dp : plan->datasets) {
    const DatasetSpec* spec = catalog.Find(dp.dataset);
    if (spec == nullptr || spec->max_cost <= 0) continue;
    dp.cost.max_cost = spec->max_cost;
    if (dp.cost.backfill <= spec->max_cost) continue;
    dp.cost.refused = absl::StrCat(
        "estimated cost of dataset ", dp.dataset, " ",
        FormatCostFigure(dp.cost.backfill), " ", kCostUnit,
        " exceeds its max_cost ", FormatCostFigure(spec->max_cost),
        spec->file.empty()
            ? ""
            : absl::StrCat(" (declared at ", spec->file, ":", spec->line, ")"),
        "; a full reload of ", dp.dataset, " costs ",
        FormatCostFigure(dp.cost.full_reload), " ", kCostUnit,
        ": narrow the scope, or raise max_cost in the pipeline file");
    if (first.empty()) first = dp.cost.refused;
  }
  plan->cost.refused = first;
}

}  // namespace backfill
