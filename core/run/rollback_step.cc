#include "core/run/rollback_step.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/run/admission.h"

namespace backfill {
namespace {

using Key = std::pair<std::string, std::string>;  // (dataset, partition)

// The history grouped by (dataset, partition), each in recorded order.
std::map<Key, std::vector<const LineageRecord*>> ByPartition(
    const std::vector<LineageRecord>& history) {
  std::map<Key, std::vector<const LineageRecord*>> out;
  for (const LineageRecord& r : history) {
    out[{r.dataset, r.partition}].push_back(&r);
  }
  return out;
}

// Jobs whose publish of the partition was undone by a rollback.
std::set<std::string> Undone(const std::vector<const LineageRecord*>& records) {
  std::set<std::string> out;
  for (const LineageRecord* r : records) {
    if (r->action == LineageAction::kRollback) out.insert(r->job_id);
  }
  return out;
}

// Index of `job_id`'s publish in `records`, or -1.
int PublishIndex(const std::vector<const LineageRecord*>& records,
                 const std::string& job_id) {
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i]->action == LineageAction::kPublish &&
        records[i]->job_id == job_id) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

std::string Plural(int64_t n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

}  // namespace

absl::StatusOr<std::vector<Job>> LaterJobs(
    const Job& job, const std::vector<LineageRecord>& history, bool force,
    const JobLookup& lookup) {
  // Later publishes still in force: job id -> (position of its newest
  // publish in the history, one of its partitions over `job`'s).
  struct Later {
    size_t newest = 0;
    Key example;
    int64_t partitions = 0;
  };
  std::map<std::string, Later> later;
  std::map<const LineageRecord*, size_t> position;
  for (size_t i = 0; i < history.size(); ++i) position[&history[i]] = i;
  for (const auto& [key, records] : ByPartition(history)) {
    const int mine = PublishIndex(records, job.id);
    if (mine < 0) continue;
    const std::set<std::string> undone = Undone(records);
    for (size_t i = mine + 1; i < records.size(); ++i) {
      const LineageRecord* r = records[i];
      if (r->action != LineageAction::kPublish || undone.count(r->job_id) ||
          r->job_id == job.id) {
        continue;
      }
      Later& l = later[r->job_id];
      if (l.partitions == 0 || position[r] > l.newest) {
        l.newest = position[r];
        l.example = key;
      }
      ++l.partitions;
    }
  }
  if (later.empty()) return std::vector<Job>();
  std::vector<std::string> ids;
  for (const auto& [id, l] : later) ids.push_back(id);
  std::sort(ids.begin(), ids.end(),
            [&](const std::string& a, const std::string& b) {
              return later[a].newest > later[b].newest;
            });
  const std::string& newest = ids.front();
  const Later& n = later[newest];
  const std::string partition_text =
      n.example.second.empty() ? absl::StrCat("dataset ", n.example.first)
                               : absl::StrCat("partition ", n.example.second,
                                              " of ", n.example.first);
  if (!force) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", newest, " has published ", partition_text, " since ", job.id,
        ids.size() > 1 ? absl::StrCat(" (later jobs over its partitions: ",
                                      absl::StrJoin(ids, ", "), ")")
                       : "",
        "; rolling back ", job.id,
        " alone would discard their rows. Roll back ",
        ids.size() > 1 ? "those jobs first, newest first"
                       : absl::StrCat(newest, " first"),
        ", or set `force` to roll them back together with ", job.id,
        " to the state before ", job.id,
        " (allowed only when every partition they published lies within ",
        job.id, "'s)"));
  }
  const Scope mine = ScopeOf(job.plan);
  std::vector<Job> out;
  for (const std::string& id : ids) {
    absl::StatusOr<Job> other = lookup(id);
    if (!other.ok()) return other.status();
    if (other->state != JobState::kSucceeded &&
        other->state != JobState::kDownstreamUnhealthy) {
      return absl::FailedPreconditionError(absl::StrCat(
          "`force` cannot roll back ", id, " together with ", job.id, ": ", id,
          " is ", JobStateName(other->state),
          ", and only SUCCEEDED or DOWNSTREAM_UNHEALTHY jobs are rolled "
          "back"));
    }
    for (const auto& [dataset, partition] : ScopeOf(other->plan)) {
      if (mine.count({dataset, partition})) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "`force` is refused: later job ", id, " also published ",
          partition.empty()
              ? absl::StrCat("dataset ", dataset)
              : absl::StrCat("partition ", partition, " of ", dataset),
          ", outside ", job.id, "'s partitions, so the state before ", job.id,
          " is not defined there. Roll back ", id, " first (",
          Plural(later[id].partitions, "partition", "partitions"), " over ",
          job.id, "'s), then ", job.id));
    }
    out.push_back(*std::move(other));
  }
  return out;
}

std::vector<LineageRecord> RollbackLineage(
    const Job& job, const std::vector<Job>& with_jobs,
    const std::vector<LineageRecord>& history,
    const std::vector<RestoredPartition>& restored, const RollbackInfo& info,
    absl::Time now) {
  const auto groups = ByPartition(history);
  // The version restored on each partition: the newest publish before
  // `job`'s that is still in force there.
  auto restored_version = [&](const Key& key) -> const LineageRecord* {
    auto it = groups.find(key);
    if (it == groups.end()) return nullptr;
    const std::vector<const LineageRecord*>& records = it->second;
    const int mine = PublishIndex(records, job.id);
    const std::set<std::string> undone = Undone(records);
    for (int i = mine - 1; i >= 0; --i) {
      const LineageRecord* r = records[i];
      if (r->action == LineageAction::kPublish && !undone.count(r->job_id)) {
        return r;
      }
    }
    return nullptr;
  };
  std::map<Key, const RestoredPartition*> by_key;
  for (const RestoredPartition& p : restored) {
    by_key[{p.dataset, p.partition}] = &p;
  }
  auto record = [&](const std::string& job_id, const RestoredPartition& p) {
    LineageRecord rec;
    rec.dataset = p.dataset;
    rec.partition = p.partition;
    rec.job_id = job_id;
    rec.action = LineageAction::kRollback;
    if (const LineageRecord* v = restored_version({p.dataset, p.partition})) {
      rec.transform_version = v->transform_version;
      rec.inputs = v->inputs;
    }
    rec.output_fingerprint = p.fingerprint;
    rec.row_count = p.rows;
    rec.reason = info.reason;
    rec.requested_by = info.requested_by;
    rec.published_at = now;
    return rec;
  };
  std::vector<LineageRecord> out;
  // Newest first, as they are undone.
  for (const Job& other : with_jobs) {
    for (const auto& key : ScopeOf(other.plan)) {
      auto it = by_key.find(key);
      if (it != by_key.end()) out.push_back(record(other.id, *it->second));
    }
  }
  for (const RestoredPartition& p : restored) out.push_back(record(job.id, p));
  return out;
}

}  // namespace backfill
