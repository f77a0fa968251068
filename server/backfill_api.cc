#include "server/backfill_api.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/base/error_details.h"
#include "core/governance/page_token.h"
#include "core/model/partition.h"
#include "server/access_policy.h"
#include "server/freshness_convert.h"
#include "server/governance_convert.h"
#include "server/node_convert.h"
#include "server/proto_convert.h"
#include "server/replay_policy_convert.h"

namespace backfill {
namespace {

absl::Status InvalidField(absl::string_view field, absl::string_view reason,
                          const std::string& message) {
  return InvalidFieldError(field, reason, message);
}

// The answer to a call that arrives, or is still waited on, while the
// daemon drains.
absl::Status ShuttingDown(absl::string_view what) {
  return WithReason(absl::UnavailableError(
                        absl::StrCat("backfilld is shutting down; ", what)),
                    "SHUTTING_DOWN");
}

// The fields of SubmitBackfillRequest beside `request`: an error about them
// is named at the top level, every other field inside `request`.
absl::Status NameSubmitFields(absl::Status status) {
  return PrefixFieldPaths(std::move(status), "request",
                          {"idempotency_key", "no_wait"});
}

}  // namespace

std::string PeerHost(std::string_view peer) {
  std::string_view rest = peer;
  if (rest.substr(0, 5) == "ipv4:") {
    rest.remove_prefix(5);
    const size_t colon = rest.rfind(':');
    return std::string(colon == std::string_view::npos ? rest
                                                       : rest.substr(0, colon));
  }
  if (rest.substr(0, 5) == "ipv6:") {
    rest.remove_prefix(5);
    if (!rest.empty() && rest.front() == '[') {
      const size_t close = rest.find(']');
      if (close != std::string_view::npos) {
        return std::string(rest.substr(1, close - 1));
      }
    }
    return std::string(rest);
  }
  return std::string(peer);
}

BackfillApi::BackfillApi(BackfillManager* manager, absl::Duration watch_poll,
                         size_t max_page_bytes, const ServiceLimits& limits)
    : manager_(manager),
      watch_poll_(watch_poll),
      max_page_bytes_(max_page_bytes),
      max_plan_answer_bytes_(limits.max_plan_answer_bytes),
      watch_min_interval_(limits.watch_min_interval),
      watch_slots_(limits.max_watch_streams_per_caller) {}

absl::Status BackfillApi::PlanBackfill(const Caller& caller,
                                       const v1::PlanBackfillRequest& request,
                                       v1::PlanBackfillResponse* response) {
  absl::StatusOr<Plan> plan =
      manager_->PlanBackfill(RequestFromProto(request.request()));
  if (!plan.ok()) {
    return PrefixFieldPaths(plan.status(), "request");
  }
  // The lists take at least their strings' bytes and two more each (a
  // tag and a length): a plan surely over the limit is not built whole.
  size_t listed = 0;
  for (const DatasetPlan& dataset : plan->datasets) {
    for (const std::string& p : dataset.partitions) listed += p.size() + 2;
    for (const std::string& r : dataset.partition_reasons) {
      listed += r.size() + 2;
    }
  }
  if (listed <= max_plan_answer_bytes_) {
    *response = PlanToProto(*plan, *manager_->catalog());
    if (response->ByteSizeLong() <= max_plan_answer_bytes_) {
      return absl::OkStatus();
    }
  }
  *response = PlanToProto(*plan, *manager_->catalog(), JobView::kBasic);
  return absl::OkStatus();
}

absl::Status BackfillApi::SubmitBackfill(
    const Caller& caller, const v1::SubmitBackfillRequest& request,
    v1::SubmitBackfillResponse* response) {
  if (shutting_down_.load()) {
    return ShuttingDown(
        "submit again once it is back (with the same idempotency_key a "
        "repeated submit never creates a second job)");
  }
  BackfillRequest backfill = RequestFromProto(request.request());
  const std::optional<Principal>& principal = caller.principal;
  // Closed periods are reopened by approvers only (with authentication
  // off, every caller is trusted as every role is).
  if (backfill.override_frozen && principal.has_value() &&
      !HoldsRole(*principal, Role::kApprover)) {
    return WithReason(
        absl::PermissionDeniedError(absl::StrCat(
            "override_frozen (--override-frozen) needs the approver role; ",
            principal->name, " holds ", RoleList(principal->roles),
            ": ask an approver to submit it, or submit without it to leave "
            "the frozen partitions out")),
        "OVERRIDE_FROZEN_NEEDS_APPROVER");
  }
  // Lineage always says who asked: the principal, else the name the client
  // gives, else at least the client's address.
  backfill.requested_by =
      ActingName(principal, backfill.requested_by,
                 absl::StrCat("unknown (", caller.peer, ")"));
  SubmitOptions options;
  options.idempotency_key = request.idempotency_key();
  options.no_wait = request.no_wait();
  options.abandoned = [&caller] { return caller.Cancelled(); };
  absl::StatusOr<SubmitResult> result = manager_->Submit(backfill, options);
  if (!result.ok()) return NameSubmitFields(result.status());
  *response->mutable_backfill() = Answer(result->job);
  response->set_created(result->created);
  return absl::OkStatus();
}

v1::Backfill BackfillApi::Answer(const Job& job) const {
  v1::Backfill whole = JobToProto(job, *manager_->catalog());
  if (whole.ByteSizeLong() <= max_page_bytes_) return whole;
  return JobToProto(job, *manager_->catalog(), JobView::kBasic);
}

absl::Status BackfillApi::GetBackfill(const Caller& caller,
                                      const v1::GetBackfillRequest& request,
                                      v1::Backfill* response) {
  if (absl::Status valid = ValidateJobId(request.id()); !valid.ok()) {
    return valid;
  }
  absl::StatusOr<JobView> view = ViewFromProto(request.view(), JobView::kFull);
  if (!view.ok()) return view.status();
  absl::StatusOr<Job> job = manager_->GetJob(request.id(), *view);
  if (!job.ok()) return job.status();
  *response = JobToProto(*job, *manager_->catalog(), *view);
  return absl::OkStatus();
}

absl::Status BackfillApi::ListBackfills(const Caller& caller,
                                        const v1::ListBackfillsRequest& request,
                                        v1::ListBackfillsResponse* response) {
  absl::StatusOr<JobPageQuery> query = JobPageQueryFromProto(request);
  if (!query.ok()) return query.status();
  absl::StatusOr<JobPage> page = manager_->ListJobPage(*query);
  if (!page.ok()) return page.status();
  *response =
      JobPageToProto(*page, *query, *manager_->catalog(), max_page_bytes_);
  return absl::OkStatus();
}

absl::Status BackfillApi::ListPartitions(
    const Caller& caller, const v1::ListPartitionsRequest& request,
    v1::ListPartitionsResponse* response) {
  absl::StatusOr<PartitionPageQuery> query =
      PartitionPageQueryFromProto(request);
  if (!query.ok()) return query.status();
  absl::StatusOr<PartitionPage> page = manager_->ListPartitions(*query);
  if (!page.ok()) return page.status();
  *response = PartitionPageToProto(*page, *query, max_page_bytes_);
  return absl::OkStatus();
}

absl::Status BackfillApi::WatchBackfill(
    const Caller& caller, const v1::WatchBackfillRequest& request,
    const std::function<bool(const v1::Backfill&)>& write) {
  if (absl::Status valid = ValidateJobId(request.id()); !valid.ok()) {
    return valid;
  }
  absl::StatusOr<JobView> view = ViewFromProto(request.view(), JobView::kBasic);
  if (!view.ok()) return view.status();
  // One slot of the caller's while the stream is open; given back however
  // the stream ends.
  const std::optional<Principal>& principal = caller.principal;
  const std::string who = principal.has_value()
                              ? absl::StrCat("principal ", principal->name)
                              : absl::StrCat("peer ", PeerHost(caller.peer));
  const std::optional<StreamSlots::Slot> slot = watch_slots_.TryAcquire(
      principal.has_value() ? absl::StrCat("principal:", principal->name)
                            : absl::StrCat("peer:", PeerHost(caller.peer)));
  if (!slot.has_value()) {
    return WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "too many WatchBackfill streams: ", who, " has ",
            watch_slots_.limit(),
            " open, the limit per principal (per peer host without "
            "authentication) set by backfilld "
            "--max-watch-streams-per-principal is ",
            watch_slots_.limit(), "; close a watch or wait for one to end")),
        "WATCH_STREAMS_EXHAUSTED",
        {{"limit", absl::StrCat(watch_slots_.limit())}});
  }
  uint64_t version = 0;  // 0: the first wait returns the current job at once
  std::optional<uint64_t> sent;
  while (true) {
    if (caller.Cancelled()) {
      return absl::CancelledError("watch cancelled");
    }
    if (shutting_down_.load()) {
      return ShuttingDown("watch again once it is back");
    }
    // Only the first read is in the view asked for; updates are basic.
    const JobView read_view = sent.has_value() ? JobView::kBasic : *view;
    absl::StatusOr<Job> job = manager_->WaitForChange(
        request.id(), &version, absl::Now() + watch_poll_, read_view);
    if (!job.ok()) return job.status();
    if (sent != version) {
      if (!write(JobToProto(*job, *manager_->catalog(), read_view))) {
        return absl::CancelledError("client went away");
      }
      sent = version;
      if (IsTerminal(job->state)) return absl::OkStatus();
      // Changes until then are coalesced into the next update, except the
      // job's end, which is sent as soon as it is reached.
      manager_->AwaitEnded(request.id(), absl::Now() + watch_min_interval_);
      continue;
    }
    if (IsTerminal(job->state)) {
      // The end read without a new version (the change was counted with
      // the update sent last): it is sent all the same, so that a stream
      // never ends on a state that is not the job's last.
      if (!write(JobToProto(*job, *manager_->catalog(), JobView::kBasic))) {
        return absl::CancelledError("client went away");
      }
      return absl::OkStatus();
    }
  }
}

absl::Status BackfillApi::Decide(
    absl::StatusOr<Job> (BackfillManager::*decide)(const std::string&,
                                                   const std::string&,
                                                   const std::string&),
    const std::string& id, const std::string& reason, const Caller& caller,
    v1::Backfill* response) {
  if (absl::Status valid = ValidateJobId(id); !valid.ok()) return valid;
  absl::StatusOr<Job> job = (manager_->*decide)(id, reason, caller.Actor());
  if (!job.ok()) return job.status();
  *response = Answer(*job);
  return absl::OkStatus();
}

absl::Status BackfillApi::CancelBackfill(
    const Caller& caller, const v1::CancelBackfillRequest& request,
    v1::Backfill* response) {
  return Decide(&BackfillManager::Cancel, request.id(), request.reason(),
                caller, response);
}

absl::Status BackfillApi::PauseBackfill(const Caller& caller,
                                        const v1::PauseBackfillRequest& request,
                                        v1::Backfill* response) {
  return Decide(&BackfillManager::Pause, request.id(), request.reason(), caller,
                response);
}

absl::Status BackfillApi::ResumeBackfill(
    const Caller& caller, const v1::ResumeBackfillRequest& request,
    v1::Backfill* response) {
  return Decide(&BackfillManager::Resume, request.id(), request.reason(),
                caller, response);
}

absl::Status BackfillApi::RetryBackfill(const Caller& caller,
                                        const v1::RetryBackfillRequest& request,
                                        v1::Backfill* response) {
  return Decide(&BackfillManager::Retry, request.id(), request.reason(), caller,
                response);
}

absl::Status BackfillApi::RollbackBackfill(
    const Caller& caller, const v1::RollbackBackfillRequest& request,
    v1::Backfill* response) {
  if (absl::Status valid = ValidateJobId(request.id()); !valid.ok()) {
    return valid;
  }
  RollbackRequest rollback;
  rollback.reason = request.reason();
  rollback.force = request.force();
  // Lineage always says who asked: the principal, else the name the client
  // gives, else at least the client's address.
  rollback.requested_by =
      ActingName(caller.principal, request.requested_by(),
                 absl::StrCat("unknown (", caller.peer, ")"));
  absl::StatusOr<Job> job = manager_->Rollback(request.id(), rollback);
  if (!job.ok()) return job.status();
  *response = Answer(*job);
  return absl::OkStatus();
}

absl::Status BackfillApi::ConfirmBackfill(
    const Caller& caller, const v1::ConfirmBackfillRequest& request,
    v1::Backfill* response) {
  if (absl::Status valid = ValidateJobId(request.id()); !valid.ok()) {
    return valid;
  }
  absl::StatusOr<Job> job =
      manager_->Confirm(request.id(), caller.Actor(), request.reason());
  if (!job.ok()) return job.status();
  *response = Answer(*job);
  return absl::OkStatus();
}

absl::Status BackfillApi::ListDatasets(const Caller& caller,
                                       const v1::ListDatasetsRequest& request,
                                       v1::ListDatasetsResponse* response) {
  const std::shared_ptr<const Catalog> snapshot = manager_->catalog();
  const Catalog& catalog = *snapshot;
  for (const DatasetSpec& spec : catalog.datasets()) {
    *response->add_datasets() = DatasetToProto(spec, catalog);
  }
  return absl::OkStatus();
}

absl::Status BackfillApi::GetDataset(const Caller& caller,
                                     const v1::GetDatasetRequest& request,
                                     v1::Dataset* response) {
  if (request.name().empty()) {
    return InvalidField("name", "DATASET_MISSING",
                        "`name` is empty: name a declared dataset "
                        "(`ListDatasets` lists them)");
  }
  const std::shared_ptr<const Catalog> catalog = manager_->catalog();
  const DatasetSpec* spec = catalog->Find(request.name());
  if (spec == nullptr) {
    return WithReason(
        absl::NotFoundError(absl::StrCat(
            "no dataset ", QuoteValue(request.name()),
            " is declared in the pipelines (`ListDatasets` lists them)")),
        "DATASET_NOT_FOUND", {{"dataset", request.name()}});
  }
  *response = DatasetToProto(*spec, *catalog);
  return absl::OkStatus();
}

absl::Status BackfillApi::ListDatasetPartitions(
    const Caller& caller, const v1::ListDatasetPartitionsRequest& request,
    v1::ListDatasetPartitionsResponse* response) {
  absl::StatusOr<FreshnessQuery> query = FreshnessQueryFromProto(request);
  if (!query.ok()) return query.status();
  // What the dataset's replay policy found due at its last evaluation.
  FreshnessContext context;
  if (replay_ != nullptr) {
    for (const ReplayPolicyStatus& status : replay_->Policies()) {
      if (status.dataset != query->dataset || !status.last.has_value()) {
        continue;
      }
      context.evaluated_at = status.last->at;
      for (const StalePartition& sp : status.last->due.due) {
        context.due.insert(sp.partition);
      }
    }
  }
  const absl::Time evaluated_at = context.evaluated_at;
  absl::StatusOr<FreshnessPage> page =
      manager_->DatasetFreshness(*query, std::move(context));
  if (!page.ok()) return page.status();
  *response = FreshnessPageToProto(*page, *query, evaluated_at);
  return absl::OkStatus();
}

absl::Status BackfillApi::ApproveBackfill(
    const Caller& caller, const v1::ApproveBackfillRequest& request,
    v1::Backfill* response) {
  if (absl::Status valid = ValidateJobId(request.id()); !valid.ok()) {
    return valid;
  }
  Approval approval;
  approval.reason = request.reason();
  approval.override_validation = request.override_validation();
  // The audit log always says who approved: the principal, else the name
  // the client gives, else at least the client's address.
  approval.approved_by =
      ActingName(caller.principal, request.approved_by(),
                 absl::StrCat("unknown (", caller.peer, ")"));
  absl::StatusOr<Job> job = manager_->Approve(request.id(), approval);
  if (!job.ok()) return job.status();
  *response = Answer(*job);
  return absl::OkStatus();
}

absl::Status BackfillApi::DiffBackfill(const Caller& caller,
                                       const v1::DiffBackfillRequest& request,
                                       v1::DiffBackfillResponse* response) {
  if (absl::Status valid = ValidateJobId(request.id()); !valid.ok()) {
    return valid;
  }
  DiffRequest diff;
  diff.id = request.id();
  diff.dataset = request.dataset();
  diff.sample_rows =
      request.has_sample_rows() ? request.sample_rows() : kDefaultDiffSamples;
  if (diff.sample_rows < 0 || diff.sample_rows > kDiffStoredSamples) {
    return InvalidField(
        "sample_rows", "SAMPLE_ROWS_OUT_OF_RANGE",
        absl::StrCat("`sample_rows` ", diff.sample_rows,
                     " is out of range: use 0..", kDiffStoredSamples,
                     " (default ", kDefaultDiffSamples, ")"));
  }
  absl::StatusOr<int> page_size = PageSizeFromProto(
      request.page_size(), kDefaultDiffPageSize, kMaxDiffPageSize);
  if (!page_size.ok()) return page_size.status();
  diff.limit = *page_size;
  // The token holds the offset of the page's first partition (a diff
  // never changes once computed).
  const uint64_t filters =
      FilterHash(PageList::kDiff, {request.id(), request.dataset()});
  if (!request.page_token().empty()) {
    absl::StatusOr<int64_t> offset =
        DecodePageToken(PageList::kDiff, request.page_token(), filters,
                        "id and dataset", /*min_position=*/1);
    if (!offset.ok()) return offset.status();
    diff.offset = *offset;
  }
  absl::StatusOr<DiffPage> page = manager_->Diff(diff);
  if (!page.ok()) return page.status();
  response->set_id(page->job.id);
  response->set_state(StateToProto(page->job.state));
  google::protobuf::Timestamp ts;
  if (TimeToProto(page->diff.computed_at, &ts)) {
    *response->mutable_compute_time() = ts;
  }
  for (const DiffSummary& summary : page->summaries) {
    *response->add_datasets() = DiffSummaryToProto(summary);
  }
  for (const DatasetDiff& d : page->diff.datasets) {
    for (const PartitionDiff& p : d.partitions) {
      *response->add_partitions() = PartitionDiffToProto(p);
    }
  }
  if (page->next_offset > 0) {
    response->set_next_page_token(
        EncodePageToken(PageList::kDiff, filters, page->next_offset));
  }
  return absl::OkStatus();
}

absl::Status BackfillApi::ExplainPartition(
    const Caller& caller, const v1::ExplainPartitionRequest& request,
    v1::ExplainPartitionResponse* response) {
  if (request.dataset().empty()) {
    return InvalidField("dataset", "DATASET_MISSING",
                        "`dataset` is empty: name a declared dataset "
                        "(`ListDatasets` lists them)");
  }
  absl::StatusOr<PartitionHistory> history =
      manager_->ExplainPartition(request.dataset(), request.partition());
  if (!history.ok()) return history.status();
  *response = PartitionHistoryToProto(*history);
  return absl::OkStatus();
}

absl::Status BackfillApi::ListAuditEvents(
    const Caller& caller, const v1::ListAuditEventsRequest& request,
    v1::ListAuditEventsResponse* response) {
  absl::StatusOr<AuditQuery> query = AuditQueryFromProto(request);
  if (!query.ok()) return query.status();
  absl::StatusOr<AuditPage> page = manager_->ListAuditEvents(*query);
  if (!page.ok()) return page.status();
  *response = AuditPageToProto(*page, AuditFilterHash(request));
  return absl::OkStatus();
}

// ---- replay policies --------------------------------------------------

namespace {

// A dataset named in a replay method: present, and a policy of it kept.
absl::Status CheckPolicyDataset(const std::string& dataset,
                                const ReplayKeeper* keeper) {
  if (dataset.empty()) {
    return InvalidField("dataset", "DATASET_MISSING",
                        "`dataset` is empty: name a dataset that declares "
                        "`replay:` (`ListReplayPolicies` lists them)");
  }
  if (keeper == nullptr) {
    return absl::FailedPreconditionError(
        "this server keeps no replay policies");
  }
  return absl::OkStatus();
}

// The not-found of a dataset without a policy, with its reason.
absl::Status PolicyError(const absl::Status& status) {
  if (status.code() == absl::StatusCode::kNotFound) {
    return WithReason(status, "REPLAY_POLICY_NOT_FOUND");
  }
  return status;
}

}  // namespace

absl::Status BackfillApi::ListReplayPolicies(
    const Caller& caller, const v1::ListReplayPoliciesRequest& request,
    v1::ListReplayPoliciesResponse* response) {
  if (replay_ == nullptr) return absl::OkStatus();
  const std::shared_ptr<const Catalog> catalog = manager_->catalog();
  for (const ReplayPolicyStatus& status : replay_->Policies()) {
    *response->add_policies() = ReplayPolicyToProto(status, *catalog);
  }
  return absl::OkStatus();
}

absl::Status BackfillApi::EvaluateReplayPolicy(
    const Caller& caller, const v1::EvaluateReplayPolicyRequest& request,
    v1::ReplayEvaluation* response) {
  if (absl::Status s = CheckPolicyDataset(request.dataset(), replay_);
      !s.ok()) {
    return s;
  }
  if (request.submit()) {
    const std::optional<Principal>& principal = caller.principal;
    if (principal.has_value() && !HoldsRole(*principal, Role::kOperator)) {
      return WithReason(
          absl::PermissionDeniedError(absl::StrCat(
              "submitting a replay (`submit`) needs the operator role; ",
              principal->name, " holds ", RoleList(principal->roles),
              ": evaluate without `submit` to see what it would do")),
          "SUBMIT_NEEDS_OPERATOR");
    }
  }
  absl::StatusOr<ReplayEvaluation> ev =
      replay_->Evaluate(request.dataset(), request.submit());
  if (!ev.ok()) return PolicyError(ev.status());
  *response = ReplayEvaluationToProto(*ev, *manager_->catalog());
  return absl::OkStatus();
}

absl::Status BackfillApi::PauseReplayPolicy(
    const Caller& caller, const v1::PauseReplayPolicyRequest& request,
    v1::ReplayPolicy* response) {
  if (absl::Status s = CheckPolicyDataset(request.dataset(), replay_);
      !s.ok()) {
    return s;
  }
  if (absl::StripAsciiWhitespace(request.reason()).empty()) {
    return InvalidField("reason", "REASON_REQUIRED",
                        "pausing a replay policy needs a `reason`");
  }
  const std::string by =
      ActingName(caller.principal, request.requested_by(),
                 absl::StrCat("unknown (", caller.peer, ")"));
  if (absl::Status s = replay_->Pause(request.dataset(), request.reason(), by);
      !s.ok()) {
    return PolicyError(s);
  }
  return AnswerPolicy(request.dataset(), response);
}

absl::Status BackfillApi::ResumeReplayPolicy(
    const Caller& caller, const v1::ResumeReplayPolicyRequest& request,
    v1::ReplayPolicy* response) {
  if (absl::Status s = CheckPolicyDataset(request.dataset(), replay_);
      !s.ok()) {
    return s;
  }
  const std::string by =
      ActingName(caller.principal, request.requested_by(),
                 absl::StrCat("unknown (", caller.peer, ")"));
  if (absl::Status s = replay_->Resume(request.dataset(), by, request.reason());
      !s.ok()) {
    return PolicyError(s);
  }
  return AnswerPolicy(request.dataset(), response);
}

absl::Status BackfillApi::AnswerPolicy(const std::string& dataset,
                                       v1::ReplayPolicy* response) {
  const std::shared_ptr<const Catalog> catalog = manager_->catalog();
  for (const ReplayPolicyStatus& status : replay_->Policies()) {
    if (status.dataset != dataset) continue;
    *response = ReplayPolicyToProto(status, *catalog);
    return absl::OkStatus();
  }
  return PolicyError(absl::NotFoundError(
      absl::StrCat("dataset \"", dataset, "\" declares no replay policy")));
}

// ---- replicas ------------------------------------------------------------

namespace {

// A LeaseStore error with its code and details, its message saying what
// could not be read.
absl::Status GroupReadError(const absl::Status& status,
                            absl::string_view what) {
  absl::Status out(status.code(),
                   absl::StrCat("cannot read ", what,
                                " from the state store: ", status.message()));
  status.ForEachPayload(
      [&out](absl::string_view type_url, const absl::Cord& payload) {
        out.SetPayload(type_url, payload);
      });
  return out;
}

}  // namespace

absl::Status BackfillApi::ListNodes(const Caller& caller,
                                    const v1::ListNodesRequest& request,
                                    v1::ListNodesResponse* response) {
  LeaseStore* store;
  NodeRecord self;
  absl::Duration lease_time;
  {
    absl::MutexLock lock(&group_mu_);
    store = leases_;
    self = self_;
    lease_time = lease_time_;
  }
  if (store == nullptr) {
    *response = AloneNodeToProto(self, absl::Now());
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<NodeRecord>> nodes = store->ListNodes();
  if (!nodes.ok()) {
    return GroupReadError(nodes.status(), "the group's replicas");
  }
  absl::StatusOr<std::vector<JobLease>> leases = store->ListLeases();
  if (!leases.ok()) {
    return GroupReadError(leases.status(), "the job leases");
  }
  // Heartbeats are stamped by the state store's clock; their ages are
  // measured on this server's clock (absl::Now(), as the watch deadlines
  // are), read after the store so that no heartbeat read is newer. A skew
  // between the two clocks shifts `live` by as much; the lease time
  // (seconds) is meant to be far larger than the skew of synchronized
  // clocks.
  *response = GroupNodesToProto(*nodes, *leases, self, absl::Now(), lease_time);
  return absl::OkStatus();
}

}  // namespace backfill
