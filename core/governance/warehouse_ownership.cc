#include "core/governance/warehouse_ownership.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/model/job.h"

namespace backfill {
namespace {

constexpr char kWayOut[] =
    "If the two really belong together now, start backfilld once with "
    "--adopt-warehouse: this state store then takes the warehouse over as it "
    "is (new jobs are numbered after every job the warehouse has seen; the "
    "lineage of earlier jobs stays where it was recorded)";

// "bf-3, bf-4 and 7 more", in job number order.
std::string Ids(std::vector<std::string> ids) {
  std::sort(ids.begin(), ids.end(),
            [](const std::string& a, const std::string& b) {
              return JobNumberOf(a) < JobNumberOf(b);
            });
  constexpr size_t kShown = 5;
  std::string out = absl::StrJoin(
      ids.begin(), ids.begin() + std::min(ids.size(), kShown), ", ");
  if (ids.size() > kShown) {
    absl::StrAppend(&out, " and ", ids.size() - kShown, " more");
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> JobsWithPublications(
    StateStore* store) {
  std::vector<JobState> states = PublishedStates();
  states.push_back(JobState::kPublishing);
  return store->ListJobIds(states);
}

absl::StatusOr<OwnershipResult> CheckAndClaimWarehouse(
    StateStore* store, Engine* engine, bool adopt,
    const std::string& store_path, const std::string& warehouse_path) {
  ASSIGN_OR_RETURN(StoreInfo info, store->Info());
  ASSIGN_OR_RETURN(WarehouseInfo warehouse, engine->Inspect());
  OwnershipResult result;
  result.store_id = info.store_id;

  if (adopt) {
    int64_t highest = 0;
    for (const auto& [job, writer] : warehouse.publications) {
      highest = std::max(highest, JobNumberOf(job));
    }
    RETURN_IF_ERROR(store->ReserveJobNumbers(highest));
    RETURN_IF_ERROR(engine->Claim(info.store_id, /*take_over=*/true));
    result.adopted =
        absl::StrCat("state store ", store_path, " (", info.store_id,
                     ") adopted warehouse ", warehouse_path,
                     warehouse.owner_store_id.empty()
                         ? std::string(" (it had no owner)")
                         : absl::StrCat(" (it belonged to state store ",
                                        warehouse.owner_store_id, ")"),
                     "; it holds ", warehouse.publications.size(),
                     " publication markers; new jobs are numbered after bf-",
                     std::max(highest, info.last_job_number));
    return result;
  }

  if (!warehouse.owner_store_id.empty() &&
      warehouse.owner_store_id != info.store_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "warehouse ", warehouse_path, " belongs to state store ",
        warehouse.owner_store_id, ", but ", store_path, " is state store ",
        info.store_id, " (created ", absl::FormatTime(info.created_at),
        "): the state store was deleted, recreated or replaced. Restore the "
        "state store that belongs to this warehouse (its ",
        warehouse.publications.size(),
        " publications are recorded there), or point --data-dir at the right "
        "directory. ",
        kWayOut));
  }

  // This store's markers; before any claim, markers that name no store.
  std::set<std::string> mine;
  for (const auto& [job, writer] : warehouse.publications) {
    if (writer == info.store_id ||
        (warehouse.owner_store_id.empty() && writer.empty())) {
      mine.insert(job);
    }
  }
  // Other replicas of a group may publish while this one starts: a
  // publication commits its marker in the warehouse, then records the job
  // published (PUBLISHING, then CONFIRMING) in the store. PUBLISHING is
  // read before the published states, so that a job seen with its marker
  // is in one of the two lists even if it moves on between the reads.
  ASSIGN_OR_RETURN(std::vector<std::string> publishing,
                   store->ListJobIds({JobState::kPublishing}));
  ASSIGN_OR_RETURN(std::vector<std::string> recorded,
                   store->ListJobIds(PublishedStates()));
  // A job recorded published whose marker the warehouse did not show yet
  // may have been published after the warehouse was read: read it again.
  std::set<std::string> markers = mine;
  bool reread = false;

  std::vector<std::string> missing;
  for (const std::string& job : recorded) {
    if (mine.count(job)) continue;
    if (!reread) {
      reread = true;
      ASSIGN_OR_RETURN(WarehouseInfo again, engine->Inspect());
      for (const auto& [marked, writer] : again.publications) {
        if (writer == info.store_id ||
            (again.owner_store_id.empty() && writer.empty())) {
          markers.insert(marked);
        }
      }
    }
    if (markers.count(job)) continue;
    // A job whose partitions all came out unchanged published nothing and
    // left no marker: there is nothing of it to find.
    ASSIGN_OR_RETURN(Job progress, store->GetJobProgress(job));
    if (progress.counts.published == 0) continue;
    missing.push_back(job);
  }
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "state store ", store_path, " records ", recorded.size(),
        " published jobs, but warehouse ", warehouse_path,
        " holds no publication of ", missing.size(), " of them (", Ids(missing),
        "): the warehouse is missing, empty, replaced or "
        "restored from an older backup, or --data-dir points at the wrong "
        "directory. Restore the warehouse that matches the state store. ",
        kWayOut));
  }
  std::set<std::string> known(recorded.begin(), recorded.end());
  known.insert(publishing.begin(), publishing.end());
  std::vector<std::string> unknown;
  for (const std::string& job : mine) {
    if (!known.count(job)) unknown.push_back(job);
  }
  if (!unknown.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "warehouse ", warehouse_path, " holds publications of ", unknown.size(),
        " jobs (", Ids(unknown), ") that state store ", store_path,
        " does not record as published: the state store is older than the "
        "warehouse (restored from a backup?) or was recreated. Restore the "
        "newest state store. ",
        kWayOut));
  }
  RETURN_IF_ERROR(engine->Claim(info.store_id, /*take_over=*/false));
  return result;
}

}  // namespace backfill
