// DatasetFreshness: how current each published partition of one derived
// dataset is, for a person deciding what to backfill next — the version the
// recorded history holds now (which job published it or last rolled it
// back, when, how many rows), whether it is stale by its lineage
// (core/plan/stale_lineage.h: its transform version or an input changed),
// whether the dataset's frozen rule closes it, whether its replay policy's
// last evaluation found it due, and which active job holds it.
//
// The partitions listed are those the recorded history vouches for
// (StateStore::VerifiedVersions): published by a job and not rolled back to
// rows backfilld never published. They are listed in partition order and
// paged by partition value, so that a partition published between two pages
// neither repeats nor shifts the pages after it.
//
// Each call reads the dataset's versions and lineage from the store and the
// current fingerprints of every input those versions read from the engine:
// one staleness computation of the whole dataset, as `--auto` does. What is
// due comes from the caller (the replay keeper's last evaluation), as does
// what active jobs hold.
//
// Stateless free function over the interfaces it is given; thread-safe as
// far as they are.

#ifndef BACKFILL_CORE_GOVERNANCE_DATASET_FRESHNESS_H_
#define BACKFILL_CORE_GOVERNANCE_DATASET_FRESHNESS_H_

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "core/ports/engine.h"
#include "core/ports/state_store.h"

namespace backfill {

// One partition's standing, most pressing last.
enum class Freshness {
  kCurrent,  // matches its lineage
  kStale,    // stale, and no replay is due for it
  kDue,      // stale, and its policy's last evaluation found it due
  kFrozen,   // stale, but the frozen rule closes it: never replayed
};
inline constexpr int kFreshnessCount = 4;
const char* FreshnessName(Freshness freshness);  // "current", ...

struct PartitionFreshness {
  std::string partition;
  Freshness freshness = Freshness::kCurrent;
  // The newest lineage record of the partition: the job that published it
  // (kPublish) or whose rollback restored its rows (kRollback), when, and
  // the rows there now; and the transform version they were made with.
  std::string job_id;
  LineageAction action = LineageAction::kPublish;
  absl::Time recorded_at = absl::InfinitePast();
  int64_t rows = 0;
  std::string transform_version;
  // A later job that recomputed the partition identical to those rows
  // (early cutoff), so vouches for them now; "" when none.
  std::string confirmed_by;
  // Why it is stale ("" when current): the reason `--auto` gives.
  std::string stale_reason;
  // The dataset's frozen rule closes the partition (stale or not).
  bool frozen = false;
  // An active job (not in a final state) that plans the partition; "" none.
  std::string held_by;
};

// What the caller knows beside the store and the engine.
struct FreshnessContext {
  // Partitions the replay policy's last evaluation found due, and when it
  // ran (InfinitePast: the dataset has no policy, or it never ran).
  std::set<std::string> due;
  absl::Time evaluated_at = absl::InfinitePast();
  // Partition -> the active job that holds it.
  std::map<std::string, std::string> held;
  absl::Time now = absl::InfinitePast();  // for `frozen.older_than`
};

struct FreshnessQuery {
  std::string dataset;
  std::vector<Freshness> only;  // empty: every standing
  std::string after;            // partitions after this value ("": first)
  int limit = 100;              // >= 1
};

struct FreshnessPage {
  std::vector<PartitionFreshness> partitions;
  // Set when more partitions follow: the last one returned.
  std::string last;
  // Over every listed partition of the dataset (not only this page, and
  // whatever `only` asks for), by Freshness.
  std::array<int64_t, kFreshnessCount> counts{};
  std::string frozen_rule;  // FrozenRule::Describe(); "" when none
};

// One page of `query.dataset`'s partitions. NOT_FOUND naming the dataset
// when the catalog does not declare it; FAILED_PRECONDITION for a source
// dataset (backfilld never publishes one). A dataset nothing was published
// to yet has no partitions.
absl::StatusOr<FreshnessPage> ReadDatasetFreshness(
    const Catalog& catalog, Engine& engine, StateStore& store,
    const FreshnessContext& context, const FreshnessQuery& query);

}  // namespace backfill

#endif  // BACKFILL_CORE_GOVERNANCE_DATASET_FRESHNESS_H_
