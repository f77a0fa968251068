// StaleDependents: the published partitions of a derived dataset that the
// recorded lineage shows to be stale — an input partition they were
// computed from has been replaced since, by a later job's publish (e.g. one
// submitted with --no-downstream, which leaves its dependents out) or by a
// rollback, and they were not recomputed after it.
//
// Derived from the state store only (no warehouse read): a partition's
// current version is StateStore::VerifiedVersions' (its newest publish of a
// job not rolled back, or a newer UNCHANGED recomputation); each input it
// read that belongs to a derived dataset is compared with that input's
// newest lineage record (publish or rollback: what its rows are now;
// newest in the order records were appended, not by clock). The version is
// stale through that input when the record's output fingerprint differs
// from the fingerprint the version read, and the record replaced the rows
// the version read:
//   - an older record of the input has the fingerprint the version read
//     (it read the rows that record left; whenever it was published, even
//     after the replacement, e.g. held for approval meanwhile), or
//   - no record has it (the rows it read were written outside backfilld)
//     and the newest record was appended after the version's own publish
//     record (for an UNCHANGED recomputation, which has none: published
//     after its job ended). A version computed later read the input as it
//     was then, whatever lineage said.
// An input read whole from a partitioned derived dataset (mapping `all`)
// has no one record to compare: the version is stale through it when any
// partition of that dataset has a lineage record appended after the
// version (StateStore::NewestLineageOf; now_fingerprint is then empty).
// Inputs of source datasets (no lineage) and datasets no longer in the
// catalog are not compared: `--auto` (core/plan/stale_lineage.h) compares every
// input against the warehouse itself.
//
// Stateless free functions over the interfaces they are given;
// thread-safe as far as those are.

#ifndef BACKFILL_CORE_PLAN_STALE_DEPENDENTS_H_
#define BACKFILL_CORE_PLAN_STALE_DEPENDENTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "core/ports/state_store.h"

namespace backfill {

// One input of a stale version whose rows were replaced since it was read.
struct StaleInput {
  std::string dataset;
  std::string partition;
  std::string read_fingerprint;  // as the stale version read it
  std::string now_fingerprint;   // of the input's newest lineage record
  // The job whose publish (kPublish) or rollback (kRollback) made the
  // input's newest lineage record, and when.
  std::string job_id;
  LineageAction action = LineageAction::kPublish;
  absl::Time at = absl::InfinitePast();
  // That job was submitted with --no-downstream (exclude_downstream): its
  // dependents were left out on purpose.
  bool excluded_downstream = false;
};

struct StaleDependent {
  std::string dataset;
  std::string partition;
  // The job whose version of the partition is current (it read the inputs).
  std::string version_job;
  std::vector<StaleInput> inputs;  // in the order read; never empty
  // "input daily_revenue/2025-03-01 changed: republished by bf-3 with
  // --no-downstream" (see StaleInputReason).
  std::string reason;
};

// The stale partitions of `dataset` among `partitions` (every published
// one when empty), sorted by partition. Empty for a source dataset.
absl::StatusOr<std::vector<StaleDependent>> FindStaleDependents(
    const Catalog& catalog, StateStore& store, const DatasetSpec& dataset,
    const std::vector<std::string>& partitions);

// What replaced the input: "republished by bf-3 with --no-downstream",
// "republished by bf-3", "restored by the rollback of bf-3".
std::string DescribeStaleInput(const StaleInput& input);

// "input daily_revenue/2025-03-01 changed: <DescribeStaleInput>", with
// " (+N more)" after "changed" for `more` other stale inputs: the reason
// `--auto` gives (InputChangedReason, core/plan/stale_reason.h) with the job
// named.
std::string StaleInputReason(const StaleInput& first, size_t more);

}  // namespace backfill

#endif  // BACKFILL_CORE_PLAN_STALE_DEPENDENTS_H_
