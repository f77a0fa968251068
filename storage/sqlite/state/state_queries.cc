#include "storage/sqlite/state/state_queries.h"

#include <algorithm>
#include <array>
#include <set>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/base/status_macros.h"
#include "core/model/job_state_machine.h"
#include "storage/sqlite/state/state_encoding.h"
#include "storage/sqlite/state/state_jobs.h"
#include "storage/sqlite/state/state_record_checksums.h"

namespace backfill::sqlite_state {

namespace sr = state_records;

using sqlite::Statement;

absl::StatusOr<std::map<std::string, int64_t>> LastRunInputRows(
    const StateDb& db, const std::string& dataset,
    const std::vector<std::string>& partitions) {
  std::map<std::string, int64_t> out;
  if (partitions.empty()) return out;
  const auto [first, last] =
      std::minmax_element(partitions.begin(), partitions.end());
  // The partitions asked for, as views of `partitions`; built only once a
  // row comes back (a plan of partitions that never ran reads none).
  absl::flat_hash_set<absl::string_view> wanted;
  // Newest job first per partition: the first row of each partition wins.
  static const std::string& kSql = Once(absl::StrCat(
      "SELECT t.\"partition\", t.input_rows, t.job_id, ",
      sr::IntactSql(sr::Tasks(), "t"),
      " FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE t.dataset = ?1 AND "
      "t.\"partition\" >= ?2 AND t.\"partition\" <= ?3 AND "
      "t.state IN ('PUBLISHED', 'UNCHANGED') ORDER BY t.\"partition\", j.seq "
      "DESC"));
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kSql));
  RETURN_IF_ERROR(q.BindText(1, dataset));
  RETURN_IF_ERROR(q.BindText(2, *first));
  RETURN_IF_ERROR(q.BindText(3, *last));
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    if (wanted.empty()) wanted.insert(partitions.begin(), partitions.end());
    std::string partition = q.ColumnText(0);
    if (!wanted.contains(partition)) continue;
    if (q.ColumnInt(3) != 1) {
      return sr::Damaged(sr::TaskRecord(q.ColumnText(2), dataset, partition),
                         db.path);
    }
    out.emplace(std::move(partition), q.ColumnInt(1));  // keeps the first
  }
  return out;
}

absl::StatusOr<std::map<std::string, VerifiedVersion>> VerifiedVersions(
    const StateDb& db, const std::string& dataset,
    const std::vector<std::string>& partitions) {
  const std::set<std::string> wanted(partitions.begin(), partitions.end());
  auto keep = [&wanted](const std::string& p) {
    return wanted.empty() || wanted.count(p) > 0;
  };
  struct Candidate {
    int64_t seq = 0;
    VerifiedVersion version;
  };
  // A job with entity keys (job_keys) recomputed only its keys' rows of
  // its target (?1 here): no version of the whole partition.
  constexpr char kKeyedOnTarget[] =
      "(j.dataset = ?1 AND EXISTS (SELECT 1 FROM job_keys k WHERE k.job_id = "
      "j.id))";
  std::map<std::string, Candidate> best;
  auto offer = [&best](int64_t seq, VerifiedVersion v) {
    auto it = best.find(v.partition);
    if (it == best.end() || seq > it->second.seq) {
      std::string partition = v.partition;
      best[partition] = Candidate{seq, std::move(v)};
    }
  };
  {
    // Publish records of jobs that were not rolled back.
    static const std::string& kSql = Once(absl::StrCat(
        "SELECT l.\"partition\", l.job_id, j.seq, l.transform_version, "
        "l.inputs, ",
        sr::IntactSql(sr::Lineage(), "l"),
        " FROM lineage l JOIN jobs j ON j.id = l.job_id WHERE l.dataset = ?1 "
        "AND l.action = 'publish' AND j.state <> 'ROLLED_BACK' AND NOT ",
        kKeyedOnTarget));
    ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kSql));
    RETURN_IF_ERROR(q.BindText(1, dataset));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      VerifiedVersion v;
      v.partition = q.ColumnText(0);
      if (!keep(v.partition)) continue;
      v.job_id = q.ColumnText(1);
      if (q.ColumnInt(5) != 1) {
        return sr::Damaged(
            sr::LineageRecordName(v.job_id, dataset, v.partition), db.path);
      }
      v.transform_version = q.ColumnText(3);
      ASSIGN_OR_RETURN(v.inputs, DecodeInputs(q.ColumnText(4)));
      offer(q.ColumnInt(2), std::move(v));
    }
  }
  // The newest rollback recorded per partition (unix micros).
  std::map<std::string, int64_t> rolled_back_at;
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db.db->PrepareCached("SELECT \"partition\", MAX(published_at) "
                             "FROM lineage WHERE dataset = ?1 AND action "
                             "= 'rollback' GROUP BY \"partition\""));
    RETURN_IF_ERROR(q.BindText(1, dataset));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      rolled_back_at[q.ColumnText(0)] = q.ColumnInt(1);
    }
  }
  {
    // UNCHANGED tasks of jobs whose publish committed (not rolled back, as
    // for lineage above), with the version the job computed the dataset
    // with.
    std::vector<JobState> vouching;
    for (JobState state : PublishedStates()) {
      if (state != JobState::kRolledBack) vouching.push_back(state);
    }
    ASSIGN_OR_RETURN(
        Statement q,
        db.db->PrepareCached(absl::StrCat(
            "SELECT t.\"partition\", t.job_id, j.seq, "
            "COALESCE((SELECT d.transform_version FROM job_datasets d WHERE "
            "d.job_id = t.job_id AND d.dataset = t.dataset ORDER BY "
            "d.ordinal DESC LIMIT 1), ''), t.inputs, COALESCE(j.end_time, 0), ",
            sr::IntactSql(sr::Tasks(), "t"),
            " FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE t.dataset = ?1 "
            "AND t.state = 'UNCHANGED' AND j.state IN (",
            Placeholders(2, vouching.size()), ") AND NOT ", kKeyedOnTarget)));
    RETURN_IF_ERROR(q.BindText(1, dataset));
    RETURN_IF_ERROR(BindStates(q, 2, vouching));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      VerifiedVersion v;
      v.partition = q.ColumnText(0);
      if (!keep(v.partition)) continue;
      auto rb = rolled_back_at.find(v.partition);
      if (rb != rolled_back_at.end() && rb->second >= q.ColumnInt(5)) continue;
      v.job_id = q.ColumnText(1);
      if (q.ColumnInt(6) != 1) {
        return sr::Damaged(sr::TaskRecord(v.job_id, dataset, v.partition),
                           db.path);
      }
      v.unchanged = true;
      v.transform_version = q.ColumnText(3);
      ASSIGN_OR_RETURN(v.inputs, DecodeInputs(q.ColumnText(4)));
      offer(q.ColumnInt(2), std::move(v));
    }
  }
  std::map<std::string, VerifiedVersion> out;
  for (auto& [p, c] : best) out.emplace(p, std::move(c.version));
  return out;
}

namespace {

// The rows (state name, count) of `sql`, each count at its state's index
// of `counts` (the state parsed by `parse`).
template <typename State, size_t N>
absl::Status ReadCountsByState(const StateDb& db, const char* sql,
                               absl::StatusOr<State> (*parse)(std::string_view),
                               std::array<int64_t, N>* counts) {
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(sql));
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return absl::OkStatus();
    ASSIGN_OR_RETURN(State state, parse(q.ColumnText(0)));
    (*counts)[static_cast<size_t>(state)] = q.ColumnInt(1);
  }
}

}  // namespace

absl::StatusOr<StoreStats> Stats(const StateDb& db) {
  StoreStats stats;
  RETURN_IF_ERROR(
      ReadCountsByState(db, "SELECT state, COUNT(*) FROM jobs GROUP BY state",
                        ParseJobState, &stats.jobs_by_state));
  RETURN_IF_ERROR(ReadCountsByState(db,
                                    "SELECT state, n FROM task_state_counts",
                                    ParseTaskState, &stats.tasks_by_state));
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db.db->PrepareCached(
            "SELECT COUNT(*), TOTAL(t.state IN ('STAGED', "
            "'PUBLISHED', 'UNCHANGED', 'SKIPPED')) FROM tasks t JOIN "
            "jobs j ON j.id = "
            "t.job_id WHERE j.state = 'RUNNING'"));
    RETURN_IF_ERROR(q.Step().status());
    stats.running_tasks_total = q.ColumnInt(0);
    stats.running_tasks_done = static_cast<int64_t>(q.ColumnDouble(1));
  }
  ASSIGN_OR_RETURN(stats.last_lineage_id,
                   db.db->QueryInt("SELECT COALESCE(MAX(id), 0) FROM lineage"));
  ASSIGN_OR_RETURN(
      stats.last_audit_seq,
      db.db->QueryInt("SELECT MAX(m) FROM (SELECT COALESCE(MAX(seq), 0) "
                      "AS m FROM audit_events UNION ALL SELECT "
                      "COALESCE(MAX(seq), 0) FROM policy_audit_events)"));
  return stats;
}

absl::StatusOr<std::vector<ConsumerStanding>> ListConsumerStandings(
    const StateDb& db) {
  // One row per (dataset, consumer) ever confirmed, then one per job that
  // holds it unhealthy. Job ids sort by creation as their numbers do.
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached(
          "SELECT c.dataset, c.consumer, NULL, NULL FROM "
          "consumer_confirmations c GROUP BY c.dataset, c.consumer "
          "UNION ALL "
          "SELECT c.dataset, c.consumer, c.job_id, "
          "CAST(substr(c.job_id, 4) AS INTEGER) FROM consumer_confirmations c "
          "JOIN jobs j ON j.id = c.job_id WHERE c.healthy = 0 AND j.state = ?1 "
          "GROUP BY c.dataset, c.consumer, c.job_id "
          "ORDER BY 1, 2, 4"));
  RETURN_IF_ERROR(q.BindText(1, JobStateText(JobState::kDownstreamUnhealthy)));
  std::vector<ConsumerStanding> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    if (q.ColumnIsNull(2)) {
      ConsumerStanding s;
      s.dataset = q.ColumnText(0);
      s.consumer = q.ColumnText(1);
      out.push_back(std::move(s));
    } else if (!out.empty()) {
      out.back().unhealthy_jobs.push_back(q.ColumnText(2));
    }
  }
  return out;
}

absl::StatusOr<StoreInfo> Info(const StateDb& db) {
  StoreInfo info;
  ASSIGN_OR_RETURN(info.store_id,
                   db.db->QueryText("SELECT value FROM meta WHERE key = "
                                    "'store_id'"));
  ASSIGN_OR_RETURN(int64_t created,
                   db.db->QueryInt("SELECT CAST(value AS INTEGER) FROM meta "
                                   "WHERE key = 'created_at'"));
  info.created_at = absl::FromUnixMicros(created);
  ASSIGN_OR_RETURN(info.last_job_number,
                   db.db->QueryInt("SELECT value FROM counters WHERE name = "
                                   "'job'"));
  return info;
}

absl::StatusOr<std::vector<std::string>> ListJobIds(
    const StateDb& db, const std::vector<JobState>& states) {
  std::vector<std::string> ids;
  if (states.empty()) return ids;
  ASSIGN_OR_RETURN(Statement q,
                   db.db->PrepareCached(absl::StrCat(
                       "SELECT id FROM jobs WHERE state IN (",
                       Placeholders(1, states.size()), ") ORDER BY seq")));
  RETURN_IF_ERROR(BindStates(q, 1, states));
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    ids.push_back(q.ColumnText(0));
  }
  return ids;
}

absl::StatusOr<std::vector<Job>> ListJobs(const StateDb& db,
                                          const JobFilter& filter,
                                          StateReadCache* cache) {
  std::string sql = "SELECT id FROM jobs WHERE 1";
  int next = 1;
  if (!filter.states.empty()) {
    absl::StrAppend(&sql, " AND state IN (",
                    Placeholders(next, filter.states.size()), ")");
    next += static_cast<int>(filter.states.size());
  }
  const int dataset_param = next;
  if (!filter.dataset.empty()) {
    absl::StrAppend(&sql,
                    " AND EXISTS (SELECT 1 FROM job_datasets d WHERE "
                    "d.job_id = jobs.id AND d.dataset = ?",
                    next++, ")");
  }
  const int before_param = next;
  if (filter.before_number > 0) {
    absl::StrAppend(&sql, " AND seq < ?", next++);
  }
  absl::StrAppend(&sql, " ORDER BY seq DESC LIMIT ?", next);
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(sql));
  RETURN_IF_ERROR(BindStates(q, 1, filter.states));
  if (!filter.dataset.empty()) {
    RETURN_IF_ERROR(q.BindText(dataset_param, filter.dataset));
  }
  if (filter.before_number > 0) {
    RETURN_IF_ERROR(q.BindInt(before_param, filter.before_number));
  }
  RETURN_IF_ERROR(q.BindInt(next, filter.limit > 0 ? filter.limit : -1));
  std::vector<std::string> ids;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    ids.push_back(q.ColumnText(0));
  }
  std::vector<Job> jobs;
  for (const std::string& id : ids) {
    ASSIGN_OR_RETURN(Job job,
                     LoadJob(db, id, filter.view == JobView::kFull, cache));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

}  // namespace backfill::sqlite_state
