#include "core/run/confirm_step.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/plan/early_cutoff.h"
#include "core/run/crash_point.h"

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

absl::StatusOr<bool> ConfirmJob(const StepContext& ctx, ActiveJob* job) {
  CrashPoint("confirm");
  const std::string& id = job->job.id;
  JobLayout layout;
  CutoffCounts cut;
  std::vector<std::string> unprobed;
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    layout = WithoutCutOff(job->layout, job->tasks);
    cut = CountCutOff(job->tasks);
    unprobed = UnprobedConsumers(job->layout, layout);
  }
  ConfirmContext context;
  context.engine = ctx.engine();
  context.http = ctx.options().http;
  context.commands = ctx.options().commands;
  context.clock = ctx.clock();
  context.observer = ctx.observer();
  context.stopping = [&ctx] { return ctx.Stopping(); };
  absl::StatusOr<ConfirmOutcome> outcome = ConfirmDownstream(layout, context);
  if (outcome.ok() && (cut.unchanged > 0 || cut.skipped > 0)) {
    // Early cutoff: say what was not republished, or that nothing was,
    // and which declared consumers were therefore not probed.
    if (layout.items.empty()) {
      outcome->message = NothingChangedMessage(cut);
    } else if (outcome->results.empty() && !unprobed.empty()) {
      outcome->message = "published; no consumer was probed";
      absl::StrAppend(&outcome->message, CutoffNote(cut));
    } else {
      absl::StrAppend(&outcome->message, CutoffNote(cut));
    }
    if (!layout.items.empty() && !unprobed.empty()) {
      absl::StrAppend(&outcome->message,
                      "; not probed, as nothing they read "
                      "was republished: ",
                      absl::StrJoin(unprobed, ", "));
    }
  }
  if (!outcome.ok()) return outcome.status();
  // What each consumer was found doing, recorded before the state that
  // follows from it (the health gauge reads both).
  std::vector<ConsumerFinding> found;
  found.reserve(outcome->results.size());
  const absl::Time now = ctx.clock()->Now();
  for (const ConsumerResult& r : outcome->results) {
    // A warehouse that could not be read says nothing of the consumer.
    if (r.warehouse_error) continue;
    ConsumerFinding c;
    c.dataset = r.dataset;
    c.consumer = r.consumer;
    c.healthy = r.healthy;
    c.message = r.message;
    c.latency = r.latency;
    c.at = now;
    found.push_back(std::move(c));
  }
  RETURN_IF_ERROR(ctx.Persist(
      JobObserver::Storage::kStateStore, "recording consumer confirmations",
      [&] { return ctx.store()->ReplaceConsumerConfirmations(id, found); }));
  // Published: from here the job only goes forward. Leftover staging is
  // harmless and swept at the next start.
  ctx.engine()->DropStaging(id).IgnoreError();
  RETURN_IF_ERROR(ctx.Move(
      job,
      outcome->healthy ? JobState::kSucceeded : JobState::kDownstreamUnhealthy,
      outcome->message, JobPhase::kFinishing));
  double estimate;
  JobState end;
  bool again;
  {
    absl::MutexLock lock(ctx.jobs()->mu());
    estimate = job->job.plan.cost.backfill;
    end = job->state;
    again = job->reconfirming;
  }
  if (!again) ctx.ReportFinished(id, end, estimate);
  return !again;
}

absl::Status CheckConfirmable(const Job& stored, const Catalog& catalog) {
  const std::string& id = stored.id;
  if (stored.state != JobState::kSucceeded &&
      stored.state != JobState::kDownstreamUnhealthy) {
    std::string why;
    switch (stored.state) {
      case JobState::kRolledBack:
        why =
            ": its publication was rolled back, so its consumers have "
            "nothing of it to serve";
        break;
      case JobState::kConfirming:
        why = ": it is confirming its consumers now; watch it";
        break;
      case JobState::kFailed:
      case JobState::kCancelled:
      case JobState::kValidationFailed:
        why = ": nothing of it was published, so there is nothing to confirm";
        break;
      default:
        why =
            ": it has not published yet; it confirms its consumers itself "
            "once it has";
        break;
    }
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", JobStateName(stored.state), why,
                     ". Only a SUCCEEDED or DOWNSTREAM_UNHEALTHY job can be "
                     "confirmed again"));
  }
  // A confirmation that could not load the job would leave it CONFIRMING:
  // refused up front instead.
  bool complete = true;
  absl::StatusOr<JobLayout> layout = LayoutOf(catalog, stored, &complete);
  if (!layout.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id, " cannot be confirmed: ", layout.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace backfill
