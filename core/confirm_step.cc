#include "core/confirm_step.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace backfill {

absl::StatusOr<ConfirmOutcome> ConfirmDownstream(
    const JobLayout& layout, const ConfirmContext& context) {
  ConfirmOutcome out;
  ConsumerConfirmer confirmer(context.engine, context.http, context.commands,
                              context.clock, context.stopping);
  for (const JobLayout::Item& item : layout.items) {
    if (item.dataset == nullptr || item.partitions.empty()) continue;
    for (const ConsumerSpec& consumer : item.dataset->consumers) {
      ConsumerResult r = confirmer.Confirm(*item.dataset, consumer,
                                           layout.job_id, item.partitions);
      if (r.interrupted) {
        return absl::CancelledError(
            absl::StrCat("stopping while confirming consumer ", consumer.name,
                         " of ", item.dataset->name));
      }
      // A warehouse that could not be read says nothing about the
      // consumer's health: its gauge keeps its last value.
      if (context.observer != nullptr && !r.warehouse_error) {
        context.observer->OnConsumerConfirmed(r.dataset, r.consumer, r.healthy,
                                              r.latency);
      }
      out.results.push_back(std::move(r));
    }
  }
  if (out.results.empty()) {
    out.message =
        "published; no downstream consumers are declared, so there is "
        "nothing to confirm";
    return out;
  }
  std::vector<std::string> healthy;
  const ConsumerResult* first_bad = nullptr;
  int bad = 0;
  for (const ConsumerResult& r : out.results) {
    if (r.healthy) {
      healthy.push_back(absl::StrCat(r.consumer, " of ", r.dataset));
    } else {
      ++bad;
      if (first_bad == nullptr) first_bad = &r;
    }
  }
  out.healthy = bad == 0;
  if (out.healthy) {
    out.message =
        absl::StrCat("published and confirmed downstream: ",
                     out.results.size() == 1
                         ? out.results.front().message
                         : absl::StrCat(out.results.size(),
                                        " consumers serve the new "
                                        "numbers (",
                                        absl::StrJoin(healthy, ", "), ")"));
  } else {
    out.message = absl::StrCat(first_bad->warehouse_error
                                   ? "published, but downstream could not be "
                                     "confirmed: "
                                   : "published, but downstream is unhealthy: ",
                               first_bad->message);
    if (bad > 1) {
      absl::StrAppend(&out.message, " (", bad - 1,
                      bad == 2 ? " other consumer is" : " other consumers are",
                      " unhealthy too; see the job's consumer results)");
    }
  }
  return out;
}

}  // namespace backfill
