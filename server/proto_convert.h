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

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.pb.h"
#include "core/catalog.h"
#include "core/job.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/support/status.h"

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

// One dataset's part of a plan; the grain comes from the catalog ("" when
// the dataset is not in it).
v1::DatasetPlan DatasetPlanToProto(const DatasetPlan& plan,
                                   const Catalog& catalog);

// The job as the API shows it: state, request, counts, plan, costs,
// timestamps (unset while InfinitePast), diff summary, approval.
v1::Backfill JobToProto(const Job& job, const Catalog& catalog);

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

// Step 1's answer: datasets with partitions and cost, totals, conflicts.
v1::PlanBackfillResponse PlanToProto(const Plan& plan, const Catalog& catalog);

// A declared dataset; downstream from Catalog::DirectDependents,
// declared_at as "file:line", retention for a derived dataset.
v1::Dataset DatasetToProto(const DatasetSpec& spec, const Catalog& catalog);

// The wire-level check of a request's job id: OK when `id` looks like one,
// "bf-<digits>"; else INVALID_ARGUMENT.
absl::Status ValidateJobId(const std::string& id);

// The same canonical code and the same message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace backfill

#endif  // BACKFILL_SERVER_PROTO_CONVERT_H_
