// Conversions between the domain model (core/) and the backfill.v1 wire
// messages, and from absl::Status to grpc::Status.
//
// Every message built here has well-formed UTF-8 in its string fields:
// stored text that is not is escaped ("\xNN", server/wire_text.h), so one
// bad byte never makes a response fail to serialize.
//
// Pure functions over values; they own nothing and keep no state, so they
// are thread-safe. The Catalog arguments are only read (for grains and
// dependents) and must outlive the call.

#ifndef BACKFILL_SERVER_PROTO_CONVERT_H_
#define BACKFILL_SERVER_PROTO_CONVERT_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.pb.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/support/status.h"
#include "server/grpc_status.h"

namespace backfill {

// BackfillRequest, both ways. Field for field; no validation (the core
// validates requests).
BackfillRequest RequestFromProto(const v1::BackfillRequest& proto);
v1::BackfillRequest RequestToProto(const BackfillRequest& request);

// JobState <-> BackfillState: kX <-> BACKFILL_STATE_X. BACKFILL_STATE_
// UNSPECIFIED and unknown numbers have no JobState (nullopt).
v1::BackfillState StateToProto(JobState state);
std::optional<JobState> StateFromProto(v1::BackfillState state);

// A time as a Timestamp; returns false (and leaves `out` alone) for
// absl::InfinitePast() / InfiniteFuture(), which mean "not yet".
bool TimeToProto(absl::Time time, google::protobuf::Timestamp* out);

// Cost in kCostUnit with its ratio.
v1::CostEstimate CostToProto(const Cost& cost);

// JobView <-> BackfillView. UNSPECIFIED is `default_view` (the method's
// default); a number that is no BackfillView is INVALID_ARGUMENT naming the
// field "view".
v1::BackfillView ViewToProto(JobView view);
absl::StatusOr<JobView> ViewFromProto(int view, JobView default_view);

// TaskState <-> PartitionState: kX <-> PARTITION_STATE_X. UNSPECIFIED and
// unknown numbers have no TaskState (nullopt).
v1::PartitionState TaskStateToProto(TaskState state);
std::optional<TaskState> TaskStateFromProto(int state);

// One partition of a job (ListPartitions) with its input rows summed.
v1::BackfillPartition TaskToProto(const PartitionTask& task);

// One dataset's part of a plan; the grain comes from the catalog ("" when
// the dataset is not in it). partition_count and key_count are always set;
// kBasic leaves out the lists (partitions, partition_reasons, keys).
v1::DatasetPlan DatasetPlanToProto(const DatasetPlan& plan,
                                   const Catalog& catalog,
                                   JobView view = JobView::kFull);

// The job as the API shows it: state, request, counts, plan, costs,
// timestamps (unset while InfinitePast), diff summary, approval, and the
// view it is in. kBasic leaves out the lists BACKFILL_VIEW_BASIC names
// (request.partitions and keys, the plan's lists; their counts stay); the
// caller reads the job in the same view (or whole).
v1::Backfill JobToProto(const Job& job, const Catalog& catalog,
                        JobView view = JobView::kFull);

// How a job was rolled back (Backfill.rollback).
v1::RollbackInfo RollbackToProto(const RollbackInfo& info);

// A measure's totals with their delta.
v1::MeasureDelta MeasureToProto(const MeasureTotals& measure);

// A dataset's diff totals.
v1::DatasetDiff DiffSummaryToProto(const DiffSummary& summary);

// One partition's diff with its sample rows.
v1::PartitionDiff PartitionDiffToProto(const PartitionDiff& diff);

// An approval, its time unset while InfinitePast.
v1::Approval ApprovalToProto(const Approval& approval);

v1::CheckSeverity SeverityToProto(CheckSeverity severity);
v1::CheckResult CheckResultToProto(const CheckResult& result);

// Step 1's answer: datasets with partitions and cost, totals, conflicts;
// kBasic leaves out each dataset's lists (as DatasetPlanToProto).
v1::PlanBackfillResponse PlanToProto(const Plan& plan, const Catalog& catalog,
                                     JobView view = JobView::kFull);

// A declared dataset; downstream from Catalog::DirectDependents,
// declared_at as "file:line", retention for a derived dataset.
v1::Dataset DatasetToProto(const DatasetSpec& spec, const Catalog& catalog);

// The wire-level check of a request's job id: OK when `id` looks like one,
// "bf-<digits>"; else INVALID_ARGUMENT naming `field`, the request field
// that carried it.
absl::Status ValidateJobId(const std::string& id,
                           absl::string_view field = "id");

// The page size a list request's `page_size` asks for, as AIP-158 reads it:
// 0 is `default_size`, a size above `max_size` is served as `max_size`.
// INVALID_ARGUMENT naming `page_size` when it is negative.
absl::StatusOr<int> PageSizeFromProto(int page_size, int default_size,
                                      int max_size);

}  // namespace backfill

#endif  // BACKFILL_SERVER_PROTO_CONVERT_H_
