#include "client/cli_job_commands.h"

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "client/cli_args.h"
#include "client/cli_format.h"
#include "client/governance_format.h"
#include "client/rpc_error.h"

namespace backfill {
namespace cli {

v1::BackfillRequest MakeRequest(const ScopeOptions& scope) {
  v1::BackfillRequest request;
  request.set_dataset(scope.dataset);
  request.set_from_partition(scope.from);
  request.set_to_partition(scope.to);
  for (const std::string& partition : scope.partitions) {
    request.add_partitions(partition);
  }
  request.set_exclude_downstream(scope.no_downstream);
  request.set_affected_by(scope.affected_by);
  request.set_auto_detect(scope.auto_detect);
  request.set_max_cost(scope.max_cost);
  for (const std::string& key : scope.keys) request.add_keys(key);
  request.set_override_frozen(scope.override_frozen);
  return request;
}

JobCommands::JobCommands(const GlobalOptions& globals)
    : output_(globals),
      client_(BackfillClient::Connect(globals.server, globals.security)),
      follower_(client_.get(), &output_) {
  client_->set_rpc_timeout(absl::Seconds(globals.timeout_seconds));
  client_->set_token(globals.token);
}

int JobCommands::Health(bool answering) {
  absl::StatusOr<bool> serving =
      client_->CheckHealth(v1::BackfillService::service_full_name());
  if (!serving.ok()) return RpcError(serving.status());
  std::cout << (*serving ? "SERVING" : "NOT_SERVING") << std::endl;
  return *serving || answering ? kExitOk : kExitFailure;
}

int JobCommands::Nodes() {
  absl::StatusOr<v1::ListNodesResponse> response = client_->ListNodes();
  if (!response.ok()) return RpcError(response.status());
  return Print(*response, cli::FormatNodes(*response));
}

int JobCommands::Datasets() {
  absl::StatusOr<v1::ListDatasetsResponse> response = client_->ListDatasets();
  if (!response.ok()) return RpcError(response.status());
  return Print(*response, cli::FormatDatasets(*response));
}

int JobCommands::Plan(const ScopeOptions& scope) {
  absl::StatusOr<v1::PlanBackfillResponse> response =
      client_->Plan(MakeRequest(scope));
  if (!response.ok()) return RpcError(response.status());
  return Print(*response, cli::FormatPlan(*response));
}

int JobCommands::Submit(const ScopeOptions& scope,
                        const SubmitOptions& options) {
  v1::SubmitBackfillRequest submit;
  v1::BackfillRequest& request = *submit.mutable_request();
  request = MakeRequest(scope);
  request.set_reason(options.reason);
  request.set_ticket(options.ticket);
  request.set_requested_by(options.requested_by);
  request.set_priority(options.priority);
  request.set_max_parallel(options.max_parallel);
  // Always a key, so that a retry (ours below, or the user's) can never
  // make a second job.
  const bool own_key = options.idempotency_key.empty();
  const std::string key = own_key ? NewRandomUuid() : options.idempotency_key;
  submit.set_idempotency_key(key);
  submit.set_no_wait(options.no_wait);

  SubmitRetryOptions retry;
  retry.on_retry = [](const SubmitRetry& failed) {
    std::cerr << "backfillctl: submit attempt " << failed.attempt << " of "
              << failed.max_attempts << " failed ("
              << absl::StatusCodeToString(failed.status.code()) << ": "
              << cli::TerminalText(absl::StrReplaceAll(
                     failed.status.message(), {{"\n", " "}, {"\r", " "}}))
              << "); retrying in " << absl::FormatDuration(failed.backoff)
              << " with the same idempotency key \""
              << cli::TerminalText(failed.idempotency_key) << "\"" << std::endl;
  };
  absl::StatusOr<v1::SubmitBackfillResponse> response =
      client_->SubmitWithRetries(submit, retry);
  if (!response.ok()) {
    if (!IsRetryableSubmitError(response.status())) {
      return RpcError(response.status());
    }
    // The job may exist: the last attempt's answer may have been lost.
    return RpcError(
        response.status(),
        absl::StrCat(" (gave up after ", retry.max_attempts,
                     " attempts; the job may have been created: submit again "
                     "with --idempotency-key ",
                     key, " to get it without creating another)"));
  }
  const v1::Backfill& job = response->backfill();
  std::string headline;
  if (response->created()) {
    headline = absl::StrCat("submitted backfill ", job.id());
  } else if (own_key) {
    // Nobody else knows this key: an attempt of ours made the job.
    headline = absl::StrCat("submitted backfill ", job.id(),
                            " (by an earlier attempt whose answer was lost)");
  } else {
    headline = absl::StrCat("backfill ", job.id(),
                            " already exists for idempotency key \"",
                            options.idempotency_key, "\" (nothing submitted)");
  }
  headline = cli::TerminalText(headline);
  if (!options.wait) {
    return Print(*response,
                 absl::StrCat(headline, "\n\n", cli::FormatBackfill(job)));
  }
  std::cerr << headline << "; waiting for it to finish" << std::endl;
  return follower_.Finish(follower_.Follow(job.id(), job));
}

int JobCommands::Status(const std::string& id) {
  absl::StatusOr<v1::Backfill> job = client_->Get(id);
  // A job of more than about 150,000 partitions is larger whole than the
  // 4 MiB a gRPC client receives: its basic view (the counts without the
  // lists) is shown instead.
  if (job.status().code() == absl::StatusCode::kResourceExhausted) {
    job = client_->Get(id, v1::BACKFILL_VIEW_BASIC);
    if (job.ok()) {
      std::cerr << "backfillctl: job " << cli::TerminalText(id)
                << " is too large to show whole; its partitions are not "
                   "listed (backfillctl partitions lists them)"
                << std::endl;
    }
  }
  if (!job.ok()) return RpcError(job.status());
  return Print(*job, cli::FormatBackfill(*job));
}

int JobCommands::List(const ListOptions& options) {
  v1::ListBackfillsRequest request;
  absl::StatusOr<std::vector<std::string>> states =
      cli::SplitListFlag("--state", options.state_args);
  if (!states.ok()) return Fail(kExitUsage, states.status().message());
  for (const std::string& text : *states) {
    absl::StatusOr<v1::BackfillState> state = cli::ParseState(text);
    if (!state.ok()) {
      return Fail(kExitUsage,
                  absl::StrCat("--state: ", state.status().message()));
    }
    request.add_states(*state);
  }
  request.set_dataset(options.dataset);
  request.set_view(options.full ? v1::BACKFILL_VIEW_FULL
                                : v1::BACKFILL_VIEW_BASIC);
  const int64_t limit = options.limit > 0 ? options.limit : kDefaultListLimit;
  // Page after page, into one response (one JSON document with --json),
  // until the limit or the last page.
  v1::ListBackfillsResponse all;
  bool more = false;
  while (true) {
    const int64_t wanted =
        options.all
            ? kListPageSize
            : std::min<int64_t>(kListPageSize, limit - all.backfills_size());
    request.set_page_size(static_cast<int>(wanted));
    absl::StatusOr<v1::ListBackfillsResponse> page = client_->List(request);
    if (!page.ok()) return RpcError(page.status());
    for (v1::Backfill& job : *page->mutable_backfills()) {
      *all.add_backfills() = std::move(job);
    }
    if (page->next_page_token().empty()) break;
    if (!options.all && all.backfills_size() >= limit) {
      more = true;
      break;
    }
    request.set_page_token(page->next_page_token());
  }
  if (more) {
    std::cerr << "backfillctl: the newest " << all.backfills_size()
              << " jobs are shown; more match (--limit N or --all for more)"
              << std::endl;
  }
  return Print(all, cli::FormatBackfills(all));
}

int JobCommands::Partitions(const PartitionsOptions& options) {
  v1::ListPartitionsRequest request;
  request.set_backfill_id(options.id);
  request.set_dataset(options.dataset);
  absl::StatusOr<std::vector<std::string>> states =
      cli::SplitListFlag("--state", options.state_args);
  if (!states.ok()) return Fail(kExitUsage, states.status().message());
  for (const std::string& text : *states) {
    absl::StatusOr<v1::PartitionState> state = cli::ParsePartitionState(text);
    if (!state.ok()) {
      return Fail(kExitUsage,
                  absl::StrCat("--state: ", state.status().message()));
    }
    request.add_states(*state);
  }
  request.set_page_size(kListPageSize);
  // Every page, into one response (one JSON document with --json).
  v1::ListPartitionsResponse all;
  while (true) {
    absl::StatusOr<v1::ListPartitionsResponse> page =
        client_->ListPartitions(request);
    if (!page.ok()) return RpcError(page.status());
    for (v1::BackfillPartition& p : *page->mutable_partitions()) {
      *all.add_partitions() = std::move(p);
    }
    if (page->next_page_token().empty()) break;
    request.set_page_token(page->next_page_token());
  }
  return Print(all, cli::FormatPartitions(all));
}

int JobCommands::Freshness(const FreshnessOptions& options) {
  v1::ListDatasetPartitionsRequest request;
  request.set_dataset(options.dataset);
  absl::StatusOr<std::vector<std::string>> only =
      cli::SplitListFlag("--only", options.only_args);
  if (!only.ok()) return Fail(kExitUsage, only.status().message());
  for (const std::string& text : *only) {
    absl::StatusOr<v1::PartitionFreshness> freshness =
        cli::ParseFreshness(text);
    if (!freshness.ok()) {
      return Fail(kExitUsage,
                  absl::StrCat("--only: ", freshness.status().message()));
    }
    request.add_freshness(*freshness);
  }
  request.set_page_size(kListPageSize);
  // Every page, into one response (one JSON document with --json); the
  // counts, frozen rule and evaluation time are the last page's, the
  // newest (each page is computed when it is read).
  v1::ListDatasetPartitionsResponse all;
  while (true) {
    absl::StatusOr<v1::ListDatasetPartitionsResponse> page =
        client_->ListDatasetPartitions(request);
    if (!page.ok()) return RpcError(page.status());
    for (v1::DatasetPartition& p : *page->mutable_partitions()) {
      *all.add_partitions() = std::move(p);
    }
    page->clear_partitions();
    page->mutable_partitions()->Swap(all.mutable_partitions());
    all = *std::move(page);
    if (all.next_page_token().empty()) break;
    request.set_page_token(all.next_page_token());
  }
  return Print(all, cli::FormatDatasetPartitions(all));
}

int JobCommands::Watch(const std::string& id) {
  return follower_.Finish(follower_.Follow(id, v1::Backfill()));
}

int JobCommands::Decide(JobAction action, const JobOptions& options) {
  absl::StatusOr<v1::Backfill> job;
  switch (action) {
    case JobAction::kCancel:
      job = client_->Cancel(options.id, options.reason);
      break;
    case JobAction::kPause:
      job = client_->Pause(options.id, options.reason);
      break;
    case JobAction::kResume:
      job = client_->Resume(options.id, options.reason);
      break;
    case JobAction::kRetry:
      job = client_->Retry(options.id, options.reason);
      break;
  }
  if (!job.ok()) return RpcError(job.status());
  return Print(*job, cli::FormatBackfill(*job));
}

int JobCommands::Rollback(const std::string& id,
                          const RollbackOptions& options) {
  v1::RollbackBackfillRequest request;
  request.set_id(id);
  request.set_reason(options.reason);
  request.set_requested_by(options.requested_by.empty()
                               ? cli::DefaultRequestedBy()
                               : options.requested_by);
  request.set_force(options.force);
  absl::StatusOr<v1::Backfill> job = client_->Rollback(request);
  if (!job.ok()) return RpcError(job.status());
  return Print(*job, cli::FormatBackfill(*job));
}

int JobCommands::Confirm(const std::string& id, const std::string& reason,
                         bool wait) {
  absl::StatusOr<v1::Backfill> job = client_->Confirm(id, reason);
  if (!job.ok()) return RpcError(job.status());
  if (!wait) return Print(*job, cli::FormatBackfill(*job));
  std::cerr << cli::TerminalText(absl::StrCat(
                   "confirming the downstream consumers of backfill ",
                   job->id(), " again; waiting for the result"))
            << std::endl;
  return follower_.Finish(follower_.Follow(job->id(), *job));
}

int JobCommands::Approve(const ApproveOptions& options) {
  v1::ApproveBackfillRequest request;
  request.set_id(options.id);
  request.set_reason(options.reason);
  request.set_override_validation(options.override_validation);
  request.set_approved_by(options.approved_by);
  absl::StatusOr<v1::Backfill> job = client_->Approve(request);
  if (!job.ok()) return RpcError(job.status());
  return Print(*job, absl::StrCat(cli::TerminalText(absl::StrCat(
                                      "approved backfill ", job->id(),
                                      "; it is ", cli::StateName(job->state()),
                                      " (backfillctl watch ", job->id(),
                                      " follows it)")),
                                  "\n\n", cli::FormatBackfill(*job)));
}

int JobCommands::Diff(const DiffOptions& options) {
  // Every page, merged into one response (one JSON document with --json).
  v1::DiffBackfillRequest request;
  request.set_id(options.id);
  request.set_dataset(options.dataset);
  request.set_sample_rows(options.samples);
  v1::DiffBackfillResponse all;
  while (true) {
    absl::StatusOr<v1::DiffBackfillResponse> page = client_->Diff(request);
    if (!page.ok()) return RpcError(page.status());
    if (request.page_token().empty()) {
      all = *page;
    } else {
      for (const v1::PartitionDiff& p : page->partitions()) {
        *all.add_partitions() = p;
      }
    }
    if (page->next_page_token().empty()) break;
    request.set_page_token(page->next_page_token());
  }
  all.clear_next_page_token();
  return Print(all, cli::FormatDiff(all));
}

int JobCommands::Why(const WhyOptions& options) {
  absl::StatusOr<v1::ExplainPartitionResponse> response =
      client_->ExplainPartition(options.dataset, options.partition);
  if (!response.ok()) return RpcError(response.status());
  return Print(*response, cli::FormatPartitionHistory(*response));
}

int JobCommands::Audit(const AuditOptions& options) {
  v1::ListAuditEventsRequest request;
  if (!options.since.empty()) {
    absl::StatusOr<google::protobuf::Timestamp> since =
        cli::ParseSince(options.since);
    if (!since.ok()) return Fail(kExitUsage, since.status().message());
    *request.mutable_since() = *since;
  }
  request.set_backfill_id(options.job);
  request.set_page_size(1000);
  // Every page: one JSON line per event as it comes, or (--json) one
  // document with them all.
  v1::ListAuditEventsResponse all;
  while (true) {
    absl::StatusOr<v1::ListAuditEventsResponse> page =
        client_->ListAuditEvents(request);
    if (!page.ok()) return RpcError(page.status());
    for (const v1::AuditEvent& event : page->events()) {
      if (output_.globals().json) {
        *all.add_events() = event;
        continue;
      }
      absl::StatusOr<std::string> line = cli::AuditEventJsonLine(event);
      if (!line.ok()) return Fail(kExitFailure, line.status().message());
      std::cout << *line;
    }
    if (page->next_page_token().empty()) break;
    request.set_page_token(page->next_page_token());
  }
  if (output_.globals().json) return Print(all, "");
  std::cout << std::flush;
  return kExitOk;
}

}  // namespace cli
}  // namespace backfill
