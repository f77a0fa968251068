#include "core/run/confirm_step.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace backfill {

absl::StatusOr<ConfirmOutcome> ConfirmDownstream(
    const JobLayout& layout, const ConfirmContext& context) {
  ConfirmOutcome out;
  ConsumerConfirmer confirmer(context.engine, context.http, context.commands,
                              context.clock, context.stopping);
  // Every consumer of every dataset, in catalog and file order. Each one's
  // timeout starts now: they are confirmed side by side, not one after the
  // other.
  std::vector<ConsumerConfirmation> all;
  for (const JobLayout::Item& item : layout.items) {
    if (item.dataset == nullptr || item.partitions.empty()) continue;
    for (const ConsumerSpec& consumer : item.dataset->consumers) {
      all.push_back(confirmer.Begin(*item.dataset, consumer, layout.job_id,
                                    item.partitions));
    }
  }
  // One loop over them all: the step due first goes next, an invalidation
  // before any probe that is due as well, so that every consumer is told to
  // drop the old numbers before any is probed; then their probe rounds
  // interleave, each on its own schedule and deadline.
  std::vector<bool> reported(all.size(), false);
  while (true) {
    ConsumerConfirmation* next = nullptr;
    for (size_t i = 0; i < all.size(); ++i) {
      ConsumerConfirmation& c = all[i];
      if (c.done && !reported[i]) {
        // Reported as each ends, so its latency is its own.
        reported[i] = true;
        // A warehouse that could not be read says nothing about the
        // consumer's health: its gauge keeps its last value.
        if (context.observer != nullptr && !c.result.warehouse_error) {
          context.observer->OnConsumerConfirmed(
              c.result.dataset, c.result.consumer, c.result.healthy,
              c.result.latency);
        }
      }
      if (c.done) continue;
      if (next == nullptr || c.next < next->next ||
          (c.next == next->next && c.invalidating && !next->invalidating)) {
        next = &c;
      }
    }
    if (next == nullptr) break;
    const bool waited = confirmer.WaitUntil(next->next);
    if (waited) confirmer.Step(next);
    if (!waited || next->result.interrupted) {
      return absl::CancelledError(
          absl::StrCat("stopping while confirming ", next->who));
    }
  }
  for (ConsumerConfirmation& c : all)
    out.results.push_back(std::move(c.result));
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
