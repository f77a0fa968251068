#include "server/proto_convert.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/error_details.h"
#include "core/model/partition.h"
#include "core/run/progress.h"
#include "server/vocabulary_convert.h"
#include "server/wire_text.h"

namespace backfill {

BackfillRequest RequestFromProto(const v1::BackfillRequest& proto) {
  BackfillRequest request;
  request.dataset = proto.dataset();
  request.from = proto.from_partition();
  request.to = proto.to_partition();
  request.partitions.assign(proto.partitions().begin(),
                            proto.partitions().end());
  request.reason = proto.reason();
  request.ticket = proto.ticket();
  request.requested_by = proto.requested_by();
  request.exclude_downstream = proto.exclude_downstream();
  request.priority = proto.priority();
  request.max_parallel = proto.max_parallel();
  request.affected_by = proto.affected_by();
  request.auto_detect = proto.auto_detect();
  request.max_cost = proto.max_cost();
  request.keys.assign(proto.keys().begin(), proto.keys().end());
  request.override_frozen = proto.override_frozen();
  return request;
}

v1::BackfillRequest RequestToProto(const BackfillRequest& request) {
  v1::BackfillRequest proto;
  proto.set_dataset(request.dataset);
  proto.set_from_partition(request.from);
  proto.set_to_partition(request.to);
  for (const std::string& p : request.partitions) proto.add_partitions(p);
  proto.set_reason(request.reason);
  proto.set_ticket(request.ticket);
  proto.set_requested_by(request.requested_by);
  proto.set_exclude_downstream(request.exclude_downstream);
  proto.set_priority(request.priority);
  proto.set_max_parallel(request.max_parallel);
  proto.set_affected_by(request.affected_by);
  proto.set_auto_detect(request.auto_detect);
  proto.set_max_cost(request.max_cost);
  for (const std::string& k : request.keys) proto.add_keys(k);
  proto.set_override_frozen(request.override_frozen);
  return proto;
}

v1::BackfillState StateToProto(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return v1::BACKFILL_STATE_QUEUED;
    case JobState::kRunning:
      return v1::BACKFILL_STATE_RUNNING;
    case JobState::kValidating:
      return v1::BACKFILL_STATE_VALIDATING;
    case JobState::kAwaitingApproval:
      return v1::BACKFILL_STATE_AWAITING_APPROVAL;
    case JobState::kPublishing:
      return v1::BACKFILL_STATE_PUBLISHING;
    case JobState::kConfirming:
      return v1::BACKFILL_STATE_CONFIRMING;
    case JobState::kSucceeded:
      return v1::BACKFILL_STATE_SUCCEEDED;
    case JobState::kFailed:
      return v1::BACKFILL_STATE_FAILED;
    case JobState::kCancelled:
      return v1::BACKFILL_STATE_CANCELLED;
    case JobState::kPaused:
      return v1::BACKFILL_STATE_PAUSED;
    case JobState::kRolledBack:
      return v1::BACKFILL_STATE_ROLLED_BACK;
    case JobState::kValidationFailed:
      return v1::BACKFILL_STATE_VALIDATION_FAILED;
    case JobState::kDownstreamUnhealthy:
      return v1::BACKFILL_STATE_DOWNSTREAM_UNHEALTHY;
  }
  return v1::BACKFILL_STATE_UNSPECIFIED;
}

std::optional<JobState> StateFromProto(v1::BackfillState state) {
  switch (state) {
    case v1::BACKFILL_STATE_QUEUED:
      return JobState::kQueued;
    case v1::BACKFILL_STATE_RUNNING:
      return JobState::kRunning;
    case v1::BACKFILL_STATE_VALIDATING:
      return JobState::kValidating;
    case v1::BACKFILL_STATE_AWAITING_APPROVAL:
      return JobState::kAwaitingApproval;
    case v1::BACKFILL_STATE_PUBLISHING:
      return JobState::kPublishing;
    case v1::BACKFILL_STATE_CONFIRMING:
      return JobState::kConfirming;
    case v1::BACKFILL_STATE_SUCCEEDED:
      return JobState::kSucceeded;
    case v1::BACKFILL_STATE_FAILED:
      return JobState::kFailed;
    case v1::BACKFILL_STATE_CANCELLED:
      return JobState::kCancelled;
    case v1::BACKFILL_STATE_PAUSED:
      return JobState::kPaused;
    case v1::BACKFILL_STATE_ROLLED_BACK:
      return JobState::kRolledBack;
    case v1::BACKFILL_STATE_VALIDATION_FAILED:
      return JobState::kValidationFailed;
    case v1::BACKFILL_STATE_DOWNSTREAM_UNHEALTHY:
      return JobState::kDownstreamUnhealthy;
    default:
      return std::nullopt;
  }
}

bool TimeToProto(absl::Time time, google::protobuf::Timestamp* out) {
  if (time == absl::InfinitePast() || time == absl::InfiniteFuture()) {
    return false;
  }
  const int64_t seconds = absl::ToUnixSeconds(time);  // floors
  const int64_t nanos =
      absl::ToInt64Nanoseconds(time - absl::FromUnixSeconds(seconds));
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(nanos));
  return true;
}

v1::BackfillView ViewToProto(JobView view) {
  return view == JobView::kBasic ? v1::BACKFILL_VIEW_BASIC
                                 : v1::BACKFILL_VIEW_FULL;
}

absl::StatusOr<JobView> ViewFromProto(int view, JobView default_view) {
  switch (view) {
    case v1::BACKFILL_VIEW_UNSPECIFIED:
      return default_view;
    case v1::BACKFILL_VIEW_BASIC:
      return JobView::kBasic;
    case v1::BACKFILL_VIEW_FULL:
      return JobView::kFull;
    default:
      return InvalidFieldError(
          "view", "VIEW_INVALID",
          absl::StrCat("`view`: ", view,
                       " is not a backfill view (use BACKFILL_VIEW_BASIC, "
                       "BACKFILL_VIEW_FULL, or leave it unset for the method's "
                       "default)"));
  }
}

v1::PartitionState TaskStateToProto(TaskState state) {
  switch (state) {
    case TaskState::kPending:
      return v1::PARTITION_STATE_PENDING;
    case TaskState::kRunning:
      return v1::PARTITION_STATE_RUNNING;
    case TaskState::kStaged:
      return v1::PARTITION_STATE_STAGED;
    case TaskState::kPublished:
      return v1::PARTITION_STATE_PUBLISHED;
    case TaskState::kFailed:
      return v1::PARTITION_STATE_FAILED;
    case TaskState::kCancelled:
      return v1::PARTITION_STATE_CANCELLED;
    case TaskState::kUnchanged:
      return v1::PARTITION_STATE_UNCHANGED;
    case TaskState::kSkipped:
      return v1::PARTITION_STATE_SKIPPED;
  }
  return v1::PARTITION_STATE_UNSPECIFIED;
}

std::optional<TaskState> TaskStateFromProto(int state) {
  switch (state) {
    case v1::PARTITION_STATE_PENDING:
      return TaskState::kPending;
    case v1::PARTITION_STATE_RUNNING:
      return TaskState::kRunning;
    case v1::PARTITION_STATE_STAGED:
      return TaskState::kStaged;
    case v1::PARTITION_STATE_PUBLISHED:
      return TaskState::kPublished;
    case v1::PARTITION_STATE_FAILED:
      return TaskState::kFailed;
    case v1::PARTITION_STATE_CANCELLED:
      return TaskState::kCancelled;
    case v1::PARTITION_STATE_UNCHANGED:
      return TaskState::kUnchanged;
    case v1::PARTITION_STATE_SKIPPED:
      return TaskState::kSkipped;
    default:
      return std::nullopt;
  }
}

v1::BackfillPartition TaskToProto(const PartitionTask& task) {
  v1::BackfillPartition proto;
  proto.set_dataset(task.dataset);
  proto.set_partition(task.partition);
  proto.set_state(TaskStateToProto(task.state));
  proto.set_reason(task.reason);
  proto.set_attempts(task.attempts);
  proto.set_last_error(task.last_error);
  proto.set_rows_written(task.rows_written);
  int64_t input_rows = 0;
  for (const InputFingerprint& in : task.inputs) {
    input_rows += in.rows;
    v1::InputVersion* iv = proto.add_inputs();
    iv->set_dataset(in.dataset);
    iv->set_partition(in.partition);
    iv->set_fingerprint(in.fingerprint);
    iv->set_rows(in.rows);
  }
  proto.set_input_rows(input_rows);
  proto.set_output_fingerprint(task.output_fingerprint);
  proto.set_duration_seconds(task.duration_seconds);
  google::protobuf::Timestamp ts;
  if (TimeToProto(task.update_time, &ts)) *proto.mutable_update_time() = ts;
  MakeStringsUtf8(&proto);
  return proto;
}

v1::CostEstimate CostToProto(const Cost& cost) {
  v1::CostEstimate proto;
  proto.set_unit(v1::COST_UNIT_INPUT_ROWS);  // kCostUnit
  proto.set_backfill(cost.backfill);
  proto.set_full_reload(cost.full_reload);
  proto.set_ratio(cost.ratio());
  proto.set_max_cost(cost.max_cost);
  proto.set_refused(cost.refused);
  return proto;
}

v1::DatasetPlan DatasetPlanToProto(const DatasetPlan& plan,
                                   const Catalog& catalog, JobView view) {
  v1::DatasetPlan proto;
  proto.set_dataset(plan.dataset);
  if (const DatasetSpec* spec = catalog.Find(plan.dataset)) {
    proto.set_grain(GrainToProto(spec->layout().grain));
    if (spec->partition) {
      proto.set_partition_key_column(spec->partition->key_column);
    }
  }
  proto.set_partition_count(std::max(
      plan.partition_count, static_cast<int64_t>(plan.partitions.size())));
  proto.set_key_count(static_cast<int64_t>(plan.keys.size()));
  proto.set_reason(plan.reason);
  *proto.mutable_cost() = CostToProto(plan.cost);
  proto.set_partitions_from_history(plan.partitions_from_history);
  proto.set_estimate_source(EstimateSourceToProto(plan.estimate_source));
  if (view == JobView::kBasic) return proto;
  for (const std::string& p : plan.partitions) proto.add_partitions(p);
  // Reasons only when they are there for every partition (a job stored
  // before they were kept has none).
  if (plan.partition_reasons.size() == plan.partitions.size() &&
      std::any_of(plan.partition_reasons.begin(), plan.partition_reasons.end(),
                  [](const std::string& r) { return !r.empty(); })) {
    for (const std::string& r : plan.partition_reasons) {
      proto.add_partition_reasons(r);
    }
  }
  for (const std::string& k : plan.keys) proto.add_keys(k);
  return proto;
}

v1::CheckSeverity SeverityToProto(CheckSeverity severity) {
  switch (severity) {
    case CheckSeverity::kError:
      return v1::CHECK_SEVERITY_ERROR;
    case CheckSeverity::kHold:
      return v1::CHECK_SEVERITY_HOLD;
    case CheckSeverity::kWarn:
      return v1::CHECK_SEVERITY_WARN;
  }
  return v1::CHECK_SEVERITY_UNSPECIFIED;
}

v1::CheckResult CheckResultToProto(const CheckResult& result) {
  v1::CheckResult proto;
  proto.set_name(result.check);
  proto.set_kind(result.kind);
  proto.set_severity(SeverityToProto(result.severity));
  proto.set_dataset(result.dataset);
  proto.set_partition(result.partition);
  proto.set_passed(result.passed);
  proto.set_observed(result.observed);
  proto.set_allowed(result.allowed);
  proto.set_message(result.message);
  for (const std::string& row : result.samples) proto.add_sample_rows(row);
  proto.set_summary(result.summary);
  proto.set_partitions_checked(result.partitions_checked);
  proto.set_partitions_failed(result.partitions_failed);
  return proto;
}

namespace {

// The ETA and the current step (core/run/progress.h).
void SetProgress(const Job& job, v1::Backfill* proto) {
  if (std::optional<RecomputeEta> eta = EstimateRecompute(job)) {
    v1::RecomputeEta* out = proto->mutable_eta();
    out->set_remaining_seconds(absl::ToDoubleSeconds(eta->remaining));
    out->set_partition_seconds(absl::ToDoubleSeconds(eta->per_partition));
    out->set_parallelism(eta->parallelism);
  }
  proto->set_current_step(CurrentStep(job));
}

}  // namespace

v1::Backfill JobToProto(const Job& job, const Catalog& catalog, JobView view) {
  v1::Backfill proto;
  proto.set_id(job.id);
  proto.set_state(StateToProto(job.state));
  *proto.mutable_request() = RequestToProto(job.request);
  proto.set_view(ViewToProto(view));
  proto.set_requested_partition_count(
      static_cast<int64_t>(job.request.partitions.size()));
  if (view == JobView::kBasic) {
    proto.mutable_request()->clear_partitions();
    proto.mutable_request()->clear_keys();
  }
  proto.set_idempotency_key(job.idempotency_key);
  v1::PartitionCounts* counts = proto.mutable_partitions();
  counts->set_total(job.counts.total);
  counts->set_pending(job.counts.pending);
  counts->set_running(job.counts.running);
  counts->set_staged(job.counts.staged);
  counts->set_published(job.counts.published);
  counts->set_failed(job.counts.failed);
  counts->set_cancelled(job.counts.cancelled);
  counts->set_unchanged(job.counts.unchanged);
  counts->set_skipped(job.counts.skipped);
  for (const DatasetPlan& plan : job.plan.datasets) {
    *proto.add_plan() = DatasetPlanToProto(plan, catalog, view);
  }
  *proto.mutable_cost_estimate() = CostToProto(job.plan.cost);
  proto.set_actual_cost(job.actual_cost);
  proto.set_rows_written(job.rows_written);
  SetProgress(job, &proto);
  proto.set_message(job.message);
  google::protobuf::Timestamp ts;
  if (TimeToProto(job.create_time, &ts)) *proto.mutable_create_time() = ts;
  if (TimeToProto(job.update_time, &ts)) *proto.mutable_update_time() = ts;
  if (TimeToProto(job.start_time, &ts)) *proto.mutable_start_time() = ts;
  if (TimeToProto(job.end_time, &ts)) *proto.mutable_end_time() = ts;
  for (const CheckResult& r : job.checks) {
    *proto.add_checks() = CheckResultToProto(r);
  }
  for (const DiffSummary& summary : job.diff) {
    *proto.add_diff() = DiffSummaryToProto(summary);
  }
  for (const ConsumerFinding& c : job.consumers) {
    v1::ConsumerConfirmation* out = proto.add_confirmations();
    out->set_dataset(c.dataset);
    out->set_consumer(c.consumer);
    out->set_healthy(c.healthy);
    out->set_message(c.message);
    out->set_latency_seconds(absl::ToDoubleSeconds(c.latency));
    if (TimeToProto(c.at, &ts)) *out->mutable_confirm_time() = ts;
  }
  if (job.approval) *proto.mutable_approval() = ApprovalToProto(*job.approval);
  if (job.rollback) *proto.mutable_rollback() = RollbackToProto(*job.rollback);
  for (const DatasetPlan& plan : job.plan.datasets) {
    v1::DatasetCost* cost = proto.add_dataset_costs();
    cost->set_dataset(plan.dataset);
    cost->set_estimated(plan.cost.backfill);
    cost->set_actual(plan.actual_cost);
    cost->set_source(EstimateSourceToProto(plan.estimate_source));
    cost->set_partitions_from_history(plan.partitions_from_history);
  }
  MakeStringsUtf8(&proto);
  return proto;
}

v1::RollbackInfo RollbackToProto(const RollbackInfo& info) {
  v1::RollbackInfo proto;
  proto.set_requested_by(info.requested_by);
  proto.set_reason(info.reason);
  google::protobuf::Timestamp ts;
  if (TimeToProto(info.at, &ts)) *proto.mutable_time() = ts;
  proto.set_forced(info.forced);
  proto.set_rolled_back_with(info.with_job);
  for (const std::string& id : info.also_rolled_back) {
    proto.add_also_rolled_back(id);
  }
  proto.set_partitions_restored(info.partitions);
  proto.set_rows_restored(info.rows);
  return proto;
}

v1::MeasureDelta MeasureToProto(const MeasureTotals& measure) {
  v1::MeasureDelta proto;
  proto.set_column(measure.column);
  proto.set_before(measure.before);
  proto.set_after(measure.after);
  proto.set_delta(measure.after - measure.before);
  return proto;
}

v1::DatasetDiff DiffSummaryToProto(const DiffSummary& summary) {
  v1::DatasetDiff proto;
  proto.set_dataset(summary.dataset);
  proto.set_by_primary_key(summary.columns.by_key);
  for (const std::string& c : summary.columns.key) proto.add_key_columns(c);
  for (const std::string& c : summary.columns.values) {
    proto.add_value_columns(c);
  }
  proto.set_partitions(summary.partitions);
  proto.set_partitions_changed(summary.partitions_changed);
  proto.set_partitions_failed(summary.partitions_failed);
  proto.set_rows_before(summary.rows_before);
  proto.set_rows_after(summary.rows_after);
  proto.set_added(summary.added);
  proto.set_removed(summary.removed);
  proto.set_changed(summary.changed);
  proto.set_unchanged(summary.unchanged);
  for (const MeasureTotals& m : summary.measures) {
    *proto.add_measures() = MeasureToProto(m);
  }
  MakeStringsUtf8(&proto);
  return proto;
}

v1::PartitionDiff PartitionDiffToProto(const PartitionDiff& diff) {
  v1::PartitionDiff proto;
  proto.set_dataset(diff.dataset);
  proto.set_partition(diff.partition);
  proto.set_rows_before(diff.rows_before);
  proto.set_rows_after(diff.rows_after);
  proto.set_added(diff.added);
  proto.set_removed(diff.removed);
  proto.set_changed(diff.changed);
  proto.set_unchanged(diff.unchanged);
  for (const MeasureTotals& m : diff.measures) {
    *proto.add_measures() = MeasureToProto(m);
  }
  for (const DiffSample& sample : diff.samples) {
    v1::DiffSampleRow* row = proto.add_samples();
    row->set_change(DiffChangeName(sample.change));
    for (const std::string& v : sample.key) row->add_key(v);
    for (const std::string& v : sample.before) row->add_before(v);
    for (const std::string& v : sample.after) row->add_after(v);
  }
  proto.set_error(diff.error);
  MakeStringsUtf8(&proto);
  return proto;
}

v1::Approval ApprovalToProto(const Approval& approval) {
  v1::Approval proto;
  proto.set_approved_by(approval.approved_by);
  proto.set_reason(approval.reason);
  proto.set_override_validation(approval.override_validation);
  proto.set_approved_state(StateToProto(approval.from_state));
  google::protobuf::Timestamp ts;
  if (TimeToProto(approval.approved_at, &ts)) {
    *proto.mutable_approve_time() = ts;
  }
  return proto;
}

v1::PlanBackfillResponse PlanToProto(const Plan& plan, const Catalog& catalog,
                                     JobView view) {
  v1::PlanBackfillResponse proto;
  for (const DatasetPlan& dataset : plan.datasets) {
    *proto.add_datasets() = DatasetPlanToProto(dataset, catalog, view);
  }
  proto.set_total_partitions(plan.total_partitions());
  *proto.mutable_cost() = CostToProto(plan.cost);
  for (const FrozenPartitions& f : plan.frozen) {
    v1::FrozenPartitions* out = proto.add_frozen();
    out->set_dataset(f.dataset);
    out->set_rule(f.rule);
    for (const std::string& p : f.partitions) out->add_partitions(p);
    out->set_overridden(f.overridden);
  }
  for (const Conflict& conflict : plan.conflicts) {
    v1::Conflict* c = proto.add_conflicts();
    c->set_backfill_id(conflict.job_id);
    c->set_dataset(conflict.dataset);
    c->set_partition(conflict.partition);
  }
  MakeStringsUtf8(&proto);
  return proto;
}

v1::Dataset DatasetToProto(const DatasetSpec& spec, const Catalog& catalog) {
  v1::Dataset proto;
  proto.set_name(spec.name);
  proto.set_kind(DatasetKindToProto(spec.kind));
  proto.set_table(spec.table);
  proto.set_grain(GrainToProto(spec.grain()));
  if (spec.partition) {
    proto.set_partition_column(spec.partition->column);
    proto.set_partition_key_column(spec.partition->key_column);
    for (const std::string& key : spec.partition->keys) {
      proto.add_partition_keys(key);
    }
  }
  for (const UpstreamEdge& edge : spec.upstream) {
    v1::Upstream* up = proto.add_upstream();
    up->set_dataset(edge.dataset);
    up->set_mapping(MappingToProto(edge.mapping));
    if (edge.mapping == Mapping::kLookback) up->set_lookback(edge.lookback);
  }
  for (const DatasetSpec* dependent : catalog.DirectDependents(spec.name)) {
    proto.add_downstream(dependent->name);
  }
  proto.set_transform_version(spec.transform_version);
  for (const ColumnSpec& column : spec.columns) {
    v1::Column* c = proto.add_columns();
    c->set_name(column.name);
    c->set_type(column.type);
  }
  for (const std::string& key : spec.primary_key) proto.add_primary_key(key);
  for (const CheckSpec& check : spec.checks) proto.add_checks(check.text);
  if (!spec.file.empty()) {
    proto.set_declared_at(absl::StrCat(spec.file, ":", spec.line));
  }
  if (spec.is_derived()) {
    v1::RetentionPolicy* retention = proto.mutable_retention();
    retention->set_versions(spec.retention.versions);
    retention->set_max_age_seconds(
        absl::ToInt64Seconds(spec.retention.max_age));
    retention->set_declared(spec.retention.declared);
  }
  proto.set_require_approval(spec.require_approval);
  proto.set_max_cost(spec.max_cost);
  proto.set_entity_key(spec.entity_key);
  for (const ConsumerSpec& consumer : spec.consumers) {
    v1::Consumer* c = proto.add_consumers();
    c->set_name(consumer.name);
    c->set_kind(ConsumerKindToProto(consumer.kind));
    c->set_invalidate(DescribeInvalidate(consumer));
    c->set_probe(consumer.kind == ConsumerKind::kHttp
                     ? absl::StrCat("GET ", consumer.probe_url)
                     : absl::StrJoin(consumer.probe_command, " "));
    c->set_field(consumer.field);
    c->set_sample(consumer.sample);
    c->set_expect(consumer.expect);
    c->set_timeout(absl::FormatDuration(consumer.timeout));
    for (const auto& header : consumer.headers) {
      c->add_header_names(header.first);
    }
  }
  MakeStringsUtf8(&proto);
  return proto;
}

absl::Status ValidateJobId(const std::string& id, absl::string_view field) {
  if (id.empty()) {
    return InvalidFieldError(
        field, "BACKFILL_ID_MISSING",
        absl::StrCat("`", field,
                     "` is empty: give a backfill id, \"bf-<number>\", e.g. "
                     "\"bf-12\""));
  }
  const bool ok = absl::StartsWith(id, "bf-") && id.size() > 3 &&
                  id.size() <= 23 &&
                  std::all_of(id.begin() + 3, id.end(),
                              [](char c) { return absl::ascii_isdigit(c); });
  if (!ok) {
    return InvalidFieldError(
        field, "BACKFILL_ID_MALFORMED",
        absl::StrCat("malformed backfill id ", QuoteValue(id), " in `", field,
                     "`: expected \"bf-<number>\", e.g. \"bf-12\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> PageSizeFromProto(int page_size, int default_size,
                                      int max_size) {
  if (page_size < 0) {
    return InvalidFieldError(
        "page_size", "PAGE_SIZE_OUT_OF_RANGE",
        absl::StrCat("`page_size` ", page_size, " is negative: use 1..",
                     max_size, " (0 means ", default_size, "; a larger one ",
                     max_size, ")"));
  }
  if (page_size == 0) return default_size;
  return std::min(page_size, max_size);
}

}  // namespace backfill
