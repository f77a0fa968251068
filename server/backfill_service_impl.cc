#include "server/backfill_service_impl.h"

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
#include "server/governance_convert.h"
#include "server/node_convert.h"
#include "server/proto_convert.h"
#include "server/raw_request.h"
#include "server/replay_policy_convert.h"

namespace backfill {
namespace {

grpc::Status InvalidField(absl::string_view field, absl::string_view reason,
                          const std::string& message) {
  return ToGrpcStatus(InvalidFieldError(field, reason, message));
}

// The answer to a call that arrives, or is still waited on, while the
// daemon drains.
grpc::Status ShuttingDown(absl::string_view what) {
  return ToGrpcStatus(WithReason(absl::UnavailableError(absl::StrCat(
                                     "backfilld is shutting down; ", what)),
                                 "SHUTTING_DOWN"));
}

// The fields of SubmitBackfillRequest beside `request`: an error about them
// is named at the top level, every other field inside `request`.
absl::Status NameSubmitFields(absl::Status status) {
  return PrefixFieldPaths(std::move(status), "request",
                          {"idempotency_key", "no_wait"});
}

// A wrong method table is a programming error: say so (on stderr, whatever
// the logger) and stop.
void CheckMethod(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "BackfillServiceImpl: %s\n", what.c_str());
  std::abort();
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

BackfillServiceImpl::BackfillServiceImpl(BackfillManager* manager,
                                         absl::Duration watch_poll,
                                         size_t max_page_bytes,
                                         const CallAuth* auth,
                                         const ServiceLimits& limits)
    : manager_(manager),
      watch_poll_(watch_poll),
      max_page_bytes_(max_page_bytes),
      auth_(auth),
      watch_slots_(limits.max_watch_streams_per_caller) {
  ReceiveRequestsAsBytes();
}

CallGate BackfillServiceImpl::GateFor(std::string_view method) const {
  if (auth_ == nullptr || !auth_->enabled()) return {};
  return [auth = auth_,
          method = std::string(method)](grpc::ServerContext* context) {
    return auth->Admit(*context, method);
  };
}

std::string BackfillServiceImpl::ActorOf(
    const grpc::ServerContext& context) const {
  std::optional<Principal> caller = CallerOf(context);
  return caller.has_value() ? caller->name : "";
}

std::optional<Principal> BackfillServiceImpl::CallerOf(
    const grpc::ServerContext& context) const {
  if (auth_ == nullptr) return std::nullopt;
  // Admit() authenticated the call already; this repeats one hash.
  absl::StatusOr<std::optional<Principal>> who = auth_->Authenticate(context);
  return who.ok() ? *who : std::nullopt;
}

void BackfillServiceImpl::ReceiveRequestsAsBytes() {
  // The generated Service adds its methods in the order of the .proto, so a
  // method's index there is its index in the service's descriptor.
  const google::protobuf::ServiceDescriptor* service =
      v1::PlanBackfillRequest::descriptor()->file()->FindServiceByName(
          "BackfillService");
  CheckMethod(service != nullptr, "no backfill.v1.BackfillService");
  std::vector<bool> registered(service->method_count(), false);
  const auto receive_as_bytes =
      [&](const char* name, const google::protobuf::Descriptor* request_type,
          grpc::internal::MethodHandler* handler) {
        const google::protobuf::MethodDescriptor* method =
            service->FindMethodByName(name);
        CheckMethod(method != nullptr && method->input_type() == request_type,
                    absl::StrCat("no method ", name, " taking ",
                                 request_type->full_name()));
        // Every method has a decision on who may call it, or none but an
        // admin could (server/access_policy.h): say so now, not at a refusal.
        CheckMethod(RequiredRole(name).has_value(),
                    absl::StrCat("method ", name,
                                 " has no role in server/access_policy.cc"));
        MarkMethodStreamed(method->index(), handler);
        registered[method->index()] = true;
      };
  const auto unary = [&](const char* name,
                         const google::protobuf::Descriptor* request_type,
                         auto method) {
    receive_as_bytes(name, request_type,
                     NewUnaryHandler(this, method, GateFor(name)));
  };
  const auto streaming = [&](const char* name,
                             const google::protobuf::Descriptor* request_type,
                             auto method) {
    receive_as_bytes(name, request_type,
                     NewServerStreamingHandler(this, method, GateFor(name)));
  };
  unary("PlanBackfill", v1::PlanBackfillRequest::descriptor(),
        &BackfillServiceImpl::PlanBackfill);
  unary("SubmitBackfill", v1::SubmitBackfillRequest::descriptor(),
        &BackfillServiceImpl::SubmitBackfill);
  unary("GetBackfill", v1::GetBackfillRequest::descriptor(),
        &BackfillServiceImpl::GetBackfill);
  unary("ListBackfills", v1::ListBackfillsRequest::descriptor(),
        &BackfillServiceImpl::ListBackfills);
  streaming("WatchBackfill", v1::WatchBackfillRequest::descriptor(),
            &BackfillServiceImpl::Watch);
  unary("CancelBackfill", v1::CancelBackfillRequest::descriptor(),
        &BackfillServiceImpl::CancelBackfill);
  unary("PauseBackfill", v1::PauseBackfillRequest::descriptor(),
        &BackfillServiceImpl::PauseBackfill);
  unary("ResumeBackfill", v1::ResumeBackfillRequest::descriptor(),
        &BackfillServiceImpl::ResumeBackfill);
  unary("RetryBackfill", v1::RetryBackfillRequest::descriptor(),
        &BackfillServiceImpl::RetryBackfill);
  unary("RollbackBackfill", v1::RollbackBackfillRequest::descriptor(),
        &BackfillServiceImpl::RollbackBackfill);
  unary("ListDatasets", v1::ListDatasetsRequest::descriptor(),
        &BackfillServiceImpl::ListDatasets);
  unary("GetDataset", v1::GetDatasetRequest::descriptor(),
        &BackfillServiceImpl::GetDataset);
  unary("ApproveBackfill", v1::ApproveBackfillRequest::descriptor(),
        &BackfillServiceImpl::ApproveBackfill);
  unary("DiffBackfill", v1::DiffBackfillRequest::descriptor(),
        &BackfillServiceImpl::DiffBackfill);
  unary("ExplainPartition", v1::ExplainPartitionRequest::descriptor(),
        &BackfillServiceImpl::ExplainPartition);
  unary("ListAuditEvents", v1::ListAuditEventsRequest::descriptor(),
        &BackfillServiceImpl::ListAuditEvents);
  unary("ConfirmBackfill", v1::ConfirmBackfillRequest::descriptor(),
        &BackfillServiceImpl::ConfirmBackfill);
  unary("ListPartitions", v1::ListPartitionsRequest::descriptor(),
        &BackfillServiceImpl::ListPartitions);
  unary("ListReplayPolicies", v1::ListReplayPoliciesRequest::descriptor(),
        &BackfillServiceImpl::ListReplayPolicies);
  unary("EvaluateReplayPolicy", v1::EvaluateReplayPolicyRequest::descriptor(),
        &BackfillServiceImpl::EvaluateReplayPolicy);
  unary("PauseReplayPolicy", v1::PauseReplayPolicyRequest::descriptor(),
        &BackfillServiceImpl::PauseReplayPolicy);
  unary("ResumeReplayPolicy", v1::ResumeReplayPolicyRequest::descriptor(),
        &BackfillServiceImpl::ResumeReplayPolicy);
  unary("ListNodes", v1::ListNodesRequest::descriptor(),
        &BackfillServiceImpl::ListNodes);
  std::vector<std::string> missing;
  for (int i = 0; i < service->method_count(); ++i) {
    if (!registered[i]) missing.push_back(service->method(i)->name());
  }
  CheckMethod(missing.empty(), absl::StrCat("gRPC would parse the request of ",
                                            absl::StrJoin(missing, ", "),
                                            ": register every method of "
                                            "backfill.v1.BackfillService in "
                                            "ReceiveRequestsAsBytes()"));
}

grpc::Status BackfillServiceImpl::PlanBackfill(
    grpc::ServerContext* context, const v1::PlanBackfillRequest* request,
    v1::PlanBackfillResponse* response) {
  absl::StatusOr<Plan> plan =
      manager_->PlanBackfill(RequestFromProto(request->request()));
  if (!plan.ok()) {
    return ToGrpcStatus(PrefixFieldPaths(plan.status(), "request"));
  }
  *response = PlanToProto(*plan, *manager_->catalog());
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::SubmitBackfill(
    grpc::ServerContext* context, const v1::SubmitBackfillRequest* request,
    v1::SubmitBackfillResponse* response) {
  if (shutting_down_.load()) {
    return ShuttingDown(
        "submit again once it is back (with the same idempotency_key a "
        "repeated submit never creates a second job)");
  }
  BackfillRequest backfill = RequestFromProto(request->request());
  const std::optional<Principal> caller = CallerOf(*context);
  // Closed periods are reopened by approvers only (with authentication
  // off, every caller is trusted as every role is).
  if (backfill.override_frozen && caller.has_value() &&
      !HoldsRole(*caller, Role::kApprover)) {
    return ToGrpcStatus(WithReason(
        absl::PermissionDeniedError(absl::StrCat(
            "override_frozen (--override-frozen) needs the approver role; ",
            caller->name, " holds ", RoleList(caller->roles),
            ": ask an approver to submit it, or submit without it to leave "
            "the frozen partitions out")),
        "OVERRIDE_FROZEN_NEEDS_APPROVER"));
  }
  // Lineage always says who asked: the principal, else the name the client
  // gives, else at least the client's address.
  backfill.requested_by =
      ActingName(caller, backfill.requested_by,
                 absl::StrCat("unknown (", context->peer(), ")"));
  SubmitOptions options;
  options.idempotency_key = request->idempotency_key();
  options.no_wait = request->no_wait();
  options.abandoned = [context] { return context->IsCancelled(); };
  absl::StatusOr<SubmitResult> result = manager_->Submit(backfill, options);
  if (!result.ok()) return ToGrpcStatus(NameSubmitFields(result.status()));
  *response->mutable_backfill() = Answer(result->job);
  response->set_created(result->created);
  return grpc::Status::OK;
}

v1::Backfill BackfillServiceImpl::Answer(const Job& job) const {
  v1::Backfill whole = JobToProto(job, *manager_->catalog());
  if (whole.ByteSizeLong() <= max_page_bytes_) return whole;
  return JobToProto(job, *manager_->catalog(), JobView::kBasic);
}

grpc::Status BackfillServiceImpl::GetBackfill(
    grpc::ServerContext* context, const v1::GetBackfillRequest* request,
    v1::Backfill* response) {
  if (absl::Status valid = ValidateJobId(request->id()); !valid.ok()) {
    return ToGrpcStatus(valid);
  }
  absl::StatusOr<JobView> view = ViewFromProto(request->view(), JobView::kFull);
  if (!view.ok()) return ToGrpcStatus(view.status());
  absl::StatusOr<Job> job = manager_->GetJob(request->id(), *view);
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = JobToProto(*job, *manager_->catalog(), *view);
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::ListBackfills(
    grpc::ServerContext* context, const v1::ListBackfillsRequest* request,
    v1::ListBackfillsResponse* response) {
  absl::StatusOr<JobPageQuery> query = JobPageQueryFromProto(*request);
  if (!query.ok()) return ToGrpcStatus(query.status());
  absl::StatusOr<JobPage> page = manager_->ListJobPage(*query);
  if (!page.ok()) return ToGrpcStatus(page.status());
  *response =
      JobPageToProto(*page, *query, *manager_->catalog(), max_page_bytes_);
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::ListPartitions(
    grpc::ServerContext* context, const v1::ListPartitionsRequest* request,
    v1::ListPartitionsResponse* response) {
  absl::StatusOr<PartitionPageQuery> query =
      PartitionPageQueryFromProto(*request);
  if (!query.ok()) return ToGrpcStatus(query.status());
  absl::StatusOr<PartitionPage> page = manager_->ListPartitions(*query);
  if (!page.ok()) return ToGrpcStatus(page.status());
  *response = PartitionPageToProto(*page, *query, max_page_bytes_);
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::Watch(
    grpc::ServerContext* context, const v1::WatchBackfillRequest* request,
    const std::function<bool(const v1::Backfill&)>& write) {
  if (absl::Status valid = ValidateJobId(request->id()); !valid.ok()) {
    return ToGrpcStatus(valid);
  }
  absl::StatusOr<JobView> view =
      ViewFromProto(request->view(), JobView::kBasic);
  if (!view.ok()) return ToGrpcStatus(view.status());
  // One slot of the caller's while the stream is open; given back however
  // the stream ends.
  const std::optional<Principal> caller = CallerOf(*context);
  const std::string who =
      caller.has_value() ? absl::StrCat("principal ", caller->name)
                         : absl::StrCat("peer ", PeerHost(context->peer()));
  const std::optional<StreamSlots::Slot> slot = watch_slots_.TryAcquire(
      caller.has_value() ? absl::StrCat("principal:", caller->name)
                         : absl::StrCat("peer:", PeerHost(context->peer())));
  if (!slot.has_value()) {
    return ToGrpcStatus(WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "too many WatchBackfill streams: ", who, " has ",
            watch_slots_.limit(),
            " open, the limit per principal (per peer host without "
            "authentication) set by backfilld "
            "--max-watch-streams-per-principal is ",
            watch_slots_.limit(), "; close a watch or wait for one to end")),
        "WATCH_STREAMS_EXHAUSTED",
        {{"limit", absl::StrCat(watch_slots_.limit())}}));
  }
  uint64_t version = 0;  // 0: the first wait returns the current job at once
  std::optional<uint64_t> sent;
  while (true) {
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled");
    }
    if (shutting_down_.load()) {
      return ShuttingDown("watch again once it is back");
    }
    // Only the first read is in the view asked for; updates are basic.
    const JobView read_view = sent.has_value() ? JobView::kBasic : *view;
    absl::StatusOr<Job> job = manager_->WaitForChange(
        request->id(), &version, absl::Now() + watch_poll_, read_view);
    if (!job.ok()) return ToGrpcStatus(job.status());
    if (sent != version) {
      if (!write(JobToProto(*job, *manager_->catalog(), read_view))) {
        return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      }
      sent = version;
      if (IsTerminal(job->state)) return grpc::Status::OK;
      absl::SleepFor(watch_min_interval_);
    }
    if (IsTerminal(job->state)) return grpc::Status::OK;
  }
}

grpc::Status BackfillServiceImpl::CancelBackfill(
    grpc::ServerContext* context, const v1::CancelBackfillRequest* request,
    v1::Backfill* response) {
  if (absl::Status valid = ValidateJobId(request->id()); !valid.ok()) {
    return ToGrpcStatus(valid);
  }
  absl::StatusOr<Job> job =
      manager_->Cancel(request->id(), request->reason(), ActorOf(*context));
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = Answer(*job);
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::PauseBackfill(
    grpc::ServerContext* context, const v1::PauseBackfillRequest* request,
    v1::Backfill* response) {
  if (absl::Status valid = ValidateJobId(request->id()); !valid.ok()) {
    return ToGrpcStatus(valid);
  }
  absl::StatusOr<Job> job =
      manager_->Pause(request->id(), request->reason(), ActorOf(*context));
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = Answer(*job);
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::ResumeBackfill(
    grpc::ServerContext* context, const v1::ResumeBackfillRequest* request,
    v1::Backfill* response) {
  if (absl::Status valid = ValidateJobId(request->id()); !valid.ok()) {
    return ToGrpcStatus(valid);
  }
  absl::StatusOr<Job> job =
      manager_->Resume(request->id(), request->reason(), ActorOf(*context));
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = Answer(*job);
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::RetryBackfill(
    grpc::ServerContext* context, const v1::RetryBackfillRequest* request,
    v1::Backfill* response) {
  if (absl::Status valid = ValidateJobId(request->id()); !valid.ok()) {
    return ToGrpcStatus(valid);
  }
  absl::StatusOr<Job> job =
      manager_->Retry(request->id(), request->reason(), ActorOf(*context));
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = Answer(*job);
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::RollbackBackfill(
    grpc::ServerContext* context, const v1::RollbackBackfillRequest* request,
    v1::Backfill* response) {
  if (absl::Status valid = ValidateJobId(request->id()); !valid.ok()) {
    return ToGrpcStatus(valid);
  }
  RollbackRequest rollback;
  rollback.reason = request->reason();
  rollback.force = request->force();
  // Lineage always says who asked: the principal, else the name the client
  // gives, else at least the client's address.
  rollback.requested_by =
      ActingName(CallerOf(*context), request->requested_by(),
                 absl::StrCat("unknown (", context->peer(), ")"));
  absl::StatusOr<Job> job = manager_->Rollback(request->id(), rollback);
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = Answer(*job);
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::ConfirmBackfill(
    grpc::ServerContext* context, const v1::ConfirmBackfillRequest* request,
    v1::Backfill* response) {
  if (absl::Status valid = ValidateJobId(request->id()); !valid.ok()) {
    return ToGrpcStatus(valid);
  }
  absl::StatusOr<Job> job = manager_->Confirm(request->id(), ActorOf(*context));
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = Answer(*job);
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::ListDatasets(
    grpc::ServerContext* context, const v1::ListDatasetsRequest* request,
    v1::ListDatasetsResponse* response) {
  const std::shared_ptr<const Catalog> snapshot = manager_->catalog();
  const Catalog& catalog = *snapshot;
  for (const DatasetSpec& spec : catalog.datasets()) {
    *response->add_datasets() = DatasetToProto(spec, catalog);
  }
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::GetDataset(
    grpc::ServerContext* context, const v1::GetDatasetRequest* request,
    v1::Dataset* response) {
  if (request->name().empty()) {
    return InvalidField("name", "DATASET_MISSING",
                        "`name` is empty: name a declared dataset "
                        "(`ListDatasets` lists them)");
  }
  const std::shared_ptr<const Catalog> catalog = manager_->catalog();
  const DatasetSpec* spec = catalog->Find(request->name());
  if (spec == nullptr) {
    return ToGrpcStatus(WithReason(
        absl::NotFoundError(absl::StrCat(
            "no dataset ", QuoteValue(request->name()),
            " is declared in the pipelines (`ListDatasets` lists them)")),
        "DATASET_NOT_FOUND", {{"dataset", request->name()}}));
  }
  *response = DatasetToProto(*spec, *catalog);
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::ApproveBackfill(
    grpc::ServerContext* context, const v1::ApproveBackfillRequest* request,
    v1::Backfill* response) {
  if (absl::Status valid = ValidateJobId(request->id()); !valid.ok()) {
    return ToGrpcStatus(valid);
  }
  Approval approval;
  approval.reason = request->reason();
  approval.override_validation = request->override_validation();
  // The audit log always says who approved: the principal, else the name
  // the client gives, else at least the client's address.
  approval.approved_by =
      ActingName(CallerOf(*context), request->approved_by(),
                 absl::StrCat("unknown (", context->peer(), ")"));
  absl::StatusOr<Job> job = manager_->Approve(request->id(), approval);
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = Answer(*job);
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::DiffBackfill(
    grpc::ServerContext* context, const v1::DiffBackfillRequest* request,
    v1::DiffBackfillResponse* response) {
  if (absl::Status valid = ValidateJobId(request->id()); !valid.ok()) {
    return ToGrpcStatus(valid);
  }
  DiffRequest diff;
  diff.id = request->id();
  diff.dataset = request->dataset();
  diff.sample_rows =
      request->has_sample_rows() ? request->sample_rows() : kDefaultDiffSamples;
  if (diff.sample_rows < 0 || diff.sample_rows > kDiffStoredSamples) {
    return InvalidField(
        "sample_rows", "SAMPLE_ROWS_OUT_OF_RANGE",
        absl::StrCat("`sample_rows` ", diff.sample_rows,
                     " is out of range: use 0..", kDiffStoredSamples,
                     " (default ", kDefaultDiffSamples, ")"));
  }
  absl::StatusOr<int> page_size = PageSizeFromProto(
      request->page_size(), kDefaultDiffPageSize, kMaxDiffPageSize);
  if (!page_size.ok()) return ToGrpcStatus(page_size.status());
  diff.limit = *page_size;
  // The token holds the offset of the page's first partition (a diff
  // never changes once computed).
  const uint64_t filters =
      FilterHash(PageList::kDiff, {request->id(), request->dataset()});
  if (!request->page_token().empty()) {
    absl::StatusOr<int64_t> offset =
        DecodePageToken(PageList::kDiff, request->page_token(), filters,
                        "id and dataset", /*min_position=*/1);
    if (!offset.ok()) return ToGrpcStatus(offset.status());
    diff.offset = *offset;
  }
  absl::StatusOr<DiffPage> page = manager_->Diff(diff);
  if (!page.ok()) return ToGrpcStatus(page.status());
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
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::ExplainPartition(
    grpc::ServerContext* context, const v1::ExplainPartitionRequest* request,
    v1::ExplainPartitionResponse* response) {
  if (request->dataset().empty()) {
    return InvalidField("dataset", "DATASET_MISSING",
                        "`dataset` is empty: name a declared dataset "
                        "(`ListDatasets` lists them)");
  }
  absl::StatusOr<PartitionHistory> history =
      manager_->ExplainPartition(request->dataset(), request->partition());
  if (!history.ok()) return ToGrpcStatus(history.status());
  *response = PartitionHistoryToProto(*history);
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::ListAuditEvents(
    grpc::ServerContext* context, const v1::ListAuditEventsRequest* request,
    v1::ListAuditEventsResponse* response) {
  absl::StatusOr<AuditQuery> query = AuditQueryFromProto(*request);
  if (!query.ok()) return ToGrpcStatus(query.status());
  absl::StatusOr<AuditPage> page = manager_->ListAuditEvents(*query);
  if (!page.ok()) return ToGrpcStatus(page.status());
  *response = AuditPageToProto(*page, AuditFilterHash(*request));
  return grpc::Status::OK;
}

// ---- replay policies --------------------------------------------------

namespace {

// A dataset named in a replay method: present, and a policy of it kept.
grpc::Status CheckPolicyDataset(const std::string& dataset,
                                const ReplayKeeper* keeper) {
  if (dataset.empty()) {
    return InvalidField("dataset", "DATASET_MISSING",
                        "`dataset` is empty: name a dataset that declares "
                        "`replay:` (`ListReplayPolicies` lists them)");
  }
  if (keeper == nullptr) {
    return ToGrpcStatus(
        absl::FailedPreconditionError("this server keeps no replay policies"));
  }
  return grpc::Status::OK;
}

// The not-found of a dataset without a policy, with its reason.
grpc::Status PolicyError(const absl::Status& status) {
  if (status.code() == absl::StatusCode::kNotFound) {
    return ToGrpcStatus(WithReason(status, "REPLAY_POLICY_NOT_FOUND"));
  }
  return ToGrpcStatus(status);
}

}  // namespace

grpc::Status BackfillServiceImpl::ListReplayPolicies(
    grpc::ServerContext* context, const v1::ListReplayPoliciesRequest* request,
    v1::ListReplayPoliciesResponse* response) {
  if (replay_ == nullptr) return grpc::Status::OK;
  const std::shared_ptr<const Catalog> catalog = manager_->catalog();
  for (const ReplayPolicyStatus& status : replay_->Policies()) {
    *response->add_policies() = ReplayPolicyToProto(status, *catalog);
  }
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::EvaluateReplayPolicy(
    grpc::ServerContext* context,
    const v1::EvaluateReplayPolicyRequest* request,
    v1::ReplayEvaluation* response) {
  if (grpc::Status s = CheckPolicyDataset(request->dataset(), replay_);
      !s.ok()) {
    return s;
  }
  if (request->submit()) {
    const std::optional<Principal> caller = CallerOf(*context);
    if (caller.has_value() && !HoldsRole(*caller, Role::kOperator)) {
      return ToGrpcStatus(WithReason(
          absl::PermissionDeniedError(absl::StrCat(
              "submitting a replay (`submit`) needs the operator role; ",
              caller->name, " holds ", RoleList(caller->roles),
              ": evaluate without `submit` to see what it would do")),
          "SUBMIT_NEEDS_OPERATOR"));
    }
  }
  absl::StatusOr<ReplayEvaluation> ev =
      replay_->Evaluate(request->dataset(), request->submit());
  if (!ev.ok()) return PolicyError(ev.status());
  *response = ReplayEvaluationToProto(*ev, *manager_->catalog());
  return grpc::Status::OK;
}

grpc::Status BackfillServiceImpl::PauseReplayPolicy(
    grpc::ServerContext* context, const v1::PauseReplayPolicyRequest* request,
    v1::ReplayPolicy* response) {
  if (grpc::Status s = CheckPolicyDataset(request->dataset(), replay_);
      !s.ok()) {
    return s;
  }
  if (absl::StripAsciiWhitespace(request->reason()).empty()) {
    return InvalidField("reason", "REASON_REQUIRED",
                        "pausing a replay policy needs a `reason`");
  }
  const std::string by =
      ActingName(CallerOf(*context), request->requested_by(),
                 absl::StrCat("unknown (", context->peer(), ")"));
  if (absl::Status s =
          replay_->Pause(request->dataset(), request->reason(), by);
      !s.ok()) {
    return PolicyError(s);
  }
  return AnswerPolicy(request->dataset(), response);
}

grpc::Status BackfillServiceImpl::ResumeReplayPolicy(
    grpc::ServerContext* context, const v1::ResumeReplayPolicyRequest* request,
    v1::ReplayPolicy* response) {
  if (grpc::Status s = CheckPolicyDataset(request->dataset(), replay_);
      !s.ok()) {
    return s;
  }
  const std::string by =
      ActingName(CallerOf(*context), request->requested_by(),
                 absl::StrCat("unknown (", context->peer(), ")"));
  if (absl::Status s = replay_->Resume(request->dataset(), by); !s.ok()) {
    return PolicyError(s);
  }
  return AnswerPolicy(request->dataset(), response);
}

grpc::Status BackfillServiceImpl::AnswerPolicy(const std::string& dataset,
                                               v1::ReplayPolicy* response) {
  const std::shared_ptr<const Catalog> catalog = manager_->catalog();
  for (const ReplayPolicyStatus& status : replay_->Policies()) {
    if (status.dataset != dataset) continue;
    *response = ReplayPolicyToProto(status, *catalog);
    return grpc::Status::OK;
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

grpc::Status BackfillServiceImpl::ListNodes(grpc::ServerContext* context,
                                            const v1::ListNodesRequest* request,
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
    return grpc::Status::OK;
  }
  absl::StatusOr<std::vector<NodeRecord>> nodes = store->ListNodes();
  if (!nodes.ok()) {
    return ToGrpcStatus(GroupReadError(nodes.status(), "the group's replicas"));
  }
  absl::StatusOr<std::vector<JobLease>> leases = store->ListLeases();
  if (!leases.ok()) {
    return ToGrpcStatus(GroupReadError(leases.status(), "the job leases"));
  }
  // Heartbeats are stamped by the state store's clock; their ages are
  // measured on this server's clock (absl::Now(), as the watch deadlines
  // are), read after the store so that no heartbeat read is newer. A skew
  // between the two clocks shifts `live` by as much; the lease time
  // (seconds) is meant to be far larger than the skew of synchronized
  // clocks.
  *response = GroupNodesToProto(*nodes, *leases, self, absl::Now(), lease_time);
  return grpc::Status::OK;
}

}  // namespace backfill
