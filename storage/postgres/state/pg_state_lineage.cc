#include "storage/postgres/state/pg_state_lineage.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/model/job_state_machine.h"
#include "core/model/transition_guard.h"
#include "storage/postgres/state/pg_state_governance.h"
#include "storage/postgres/state/pg_state_jobs.h"
#include "storage/postgres/state/pg_state_tasks.h"

namespace backfill::pg_state {
namespace {

// The columns ReadLineage reads, of the table aliased `l`.
constexpr char kLineageColumns[] =
    "l.dataset, l.\"partition\", l.job_id, l.transform_version, l.inputs, "
    "l.output_fingerprint, l.row_count, l.reason, l.ticket, l.requested_by, "
    "l.published_at, l.action, l.approved_from, l.approved_by, "
    "l.approval_reason, l.approval_override, l.approved_at, l.id";

absl::StatusOr<std::vector<LineageRecord>> ReadLineage(const PgResult& r) {
  std::vector<LineageRecord> out;
  out.reserve(r.rows.size());
  for (const Row& row : r.rows) {
    LineageRecord rec;
    rec.dataset = ColText(row, 0);
    rec.partition = ColText(row, 1);
    rec.job_id = ColText(row, 2);
    rec.transform_version = ColText(row, 3);
    ASSIGN_OR_RETURN(rec.inputs, DecodeInputs(ColText(row, 4)));
    rec.output_fingerprint = ColText(row, 5);
    rec.row_count = ColInt(row, 6);
    rec.reason = ColText(row, 7);
    rec.ticket = ColText(row, 8);
    rec.requested_by = ColText(row, 9);
    rec.published_at = ColTime(row, 10);
    ASSIGN_OR_RETURN(rec.action, ParseLineageAction(ColText(row, 11)));
    if (!ColIsNull(row, 12)) {
      Approval approval;
      ASSIGN_OR_RETURN(approval.from_state, ParseJobState(ColText(row, 12)));
      approval.approved_by = ColText(row, 13);
      approval.reason = ColText(row, 14);
      approval.override_validation = ColInt(row, 15) != 0;
      approval.approved_at = ColTime(row, 16);
      rec.approval = std::move(approval);
    }
    rec.id = ColInt(row, 17);
    out.push_back(std::move(rec));
  }
  return out;
}

absl::StatusOr<std::optional<LineageRecord>> ReadNewest(const PgResult& r) {
  ASSIGN_OR_RETURN(std::vector<LineageRecord> records, ReadLineage(r));
  if (records.empty()) return std::optional<LineageRecord>();
  return std::optional<LineageRecord>(std::move(records.front()));
}

absl::Status InsertLineage(PgConnection* conn, LineageAction action,
                           const std::string& job_id,
                           const std::vector<LineageRecord>& lineage,
                           absl::Time now) {
  const bool publish = action == LineageAction::kPublish;
  RETURN_IF_ERROR(LockHistory(conn));
  for (const LineageRecord& rec : lineage) {
    const bool approved = publish && rec.approval.has_value();
    RETURN_IF_ERROR(
        conn->Exec(
                "INSERT INTO backfill_state.lineage (dataset, \"partition\", "
                "job_id, transform_version, inputs, output_fingerprint, "
                "row_count, reason, ticket, requested_by, published_at, "
                "approved_from, approved_by, approval_reason, "
                "approval_override, approved_at, action) VALUES ($1, $2, $3, "
                "$4, $5, $6, $7::bigint, $8, $9, $10, $11::bigint, $12, $13, "
                "$14, $15::bigint, $16::bigint, $17)",
                {Text(rec.dataset), Text(rec.partition),
                 Text(publish || rec.job_id.empty() ? job_id : rec.job_id),
                 Text(rec.transform_version), Text(EncodeInputs(rec.inputs)),
                 Text(rec.output_fingerprint), Int(rec.row_count),
                 Text(rec.reason), Text(rec.ticket), Text(rec.requested_by),
                 Time(rec.published_at == absl::InfinitePast()
                          ? now
                          : rec.published_at),
                 approved ? Text(JobStateText(rec.approval->from_state))
                          : Null(),
                 Text(approved ? rec.approval->approved_by : ""),
                 Text(approved ? rec.approval->reason : ""),
                 Int(approved && rec.approval->override_validation ? 1 : 0),
                 approved ? Time(rec.approval->approved_at) : Null(),
                 Text(LineageActionName(action))})
            .status());
  }
  return absl::OkStatus();
}

absl::Status WriteRollbackInfo(
    PgConnection* conn, const std::string& job_id, const RollbackInfo& info,
    const std::vector<std::pair<std::string, JobState>>& jobs, absl::Time now) {
  for (const auto& [id, state] : jobs) {
    const bool main = id == job_id;
    RETURN_IF_ERROR(
        conn->Exec(
                "INSERT INTO backfill_state.rollbacks (job_id, requested_by, "
                "reason, at, forced, with_job, also_rolled_back, partitions, "
                "rows_restored) VALUES ($1, $2, $3, $4::bigint, $5::bigint, "
                "$6, $7, $8::bigint, $9::bigint) ON CONFLICT (job_id) DO "
                "UPDATE SET requested_by = excluded.requested_by, reason = "
                "excluded.reason, at = excluded.at, forced = excluded.forced, "
                "with_job = excluded.with_job, also_rolled_back = "
                "excluded.also_rolled_back, partitions = excluded.partitions, "
                "rows_restored = excluded.rows_restored",
                {Text(id), Text(info.requested_by), Text(info.reason),
                 Time(info.at == absl::InfinitePast() ? now : info.at),
                 Int(info.forced ? 1 : 0), Text(main ? info.with_job : job_id),
                 Text(main ? EncodeFields(info.also_rolled_back)
                           : std::string()),
                 Int(main ? info.partitions : 0), Int(main ? info.rows : 0)})
            .status());
  }
  return absl::OkStatus();
}

// Columns `first` to `first` + 5 of `row`: rows before and after, added,
// removed, changed, unchanged.
void ReadDiffCounts(const Row& row, size_t first, PartitionDiff* p) {
  p->rows_before = ColInt(row, first);
  p->rows_after = ColInt(row, first + 1);
  p->added = ColInt(row, first + 2);
  p->removed = ColInt(row, first + 3);
  p->changed = ColInt(row, first + 4);
  p->unchanged = ColInt(row, first + 5);
}

}  // namespace

absl::Status RecordPublication(PgConnection* conn, const std::string& job_id,
                               PublicationLineage& lineage, JobState to,
                               absl::Time now) {
  ASSIGN_OR_RETURN(JobState from, StateOf(conn, job_id, true));
  ASSIGN_OR_RETURN(PgResult recorded,
                   conn->Exec("SELECT COUNT(*) FROM backfill_state.lineage "
                              "WHERE job_id = $1 AND action = 'publish'",
                              {Text(job_id)}));
  ASSIGN_OR_RETURN(
      bool record,
      GuardPublication(job_id, from, ColInt(recorded.rows[0], 0) > 0, to));
  if (!record) return absl::OkStatus();  // a repeat after a restart
  RETURN_IF_ERROR(BuildPublicationLineage(
      job_id, lineage,
      [&](const TaskQuery& page) { return ListTaskPage(conn, page); },
      [&](const std::vector<LineageRecord>& records) {
        return InsertLineage(conn, LineageAction::kPublish, job_id, records,
                             now);
      }));
  RETURN_IF_ERROR(PublishStagedTasks(conn, job_id, now));
  return WriteTransition(conn, job_id, from, to, lineage.Message(), now);
}

absl::Status RecordRollback(PgConnection* conn, const std::string& job_id,
                            const RollbackInfo& info,
                            const std::vector<LineageRecord>& lineage,
                            const std::string& message,
                            const std::string& also_message, absl::Time now) {
  ASSIGN_OR_RETURN(JobState from, StateOf(conn, job_id, true));
  if (from == JobState::kRolledBack) return absl::OkStatus();  // recorded
  std::vector<std::pair<std::string, JobState>> jobs = {{job_id, from}};
  for (const std::string& other : info.also_rolled_back) {
    if (other == job_id) continue;
    ASSIGN_OR_RETURN(JobState state, StateOf(conn, other, true));
    jobs.push_back({other, state});
  }
  RETURN_IF_ERROR(GuardRollback(jobs));
  RETURN_IF_ERROR(
      InsertLineage(conn, LineageAction::kRollback, job_id, lineage, now));
  RETURN_IF_ERROR(WriteRollbackInfo(conn, job_id, info, jobs, now));
  for (const auto& [id, state] : jobs) {
    RETURN_IF_ERROR(WriteTransition(conn, id, state, JobState::kRolledBack,
                                    id == job_id ? message : also_message,
                                    now));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<RollbackInfo>> LoadRollbackInfo(
    PgConnection* conn, const std::string& job_id) {
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("SELECT requested_by, reason, at, forced, with_job, "
                 "also_rolled_back, partitions, rows_restored FROM "
                 "backfill_state.rollbacks WHERE job_id = $1",
                 {Text(job_id)}));
  if (r.rows.empty()) return std::optional<RollbackInfo>();
  const Row& row = r.rows[0];
  RollbackInfo info;
  info.requested_by = ColText(row, 0);
  info.reason = ColText(row, 1);
  info.at = ColTime(row, 2);
  info.forced = ColInt(row, 3) != 0;
  info.with_job = ColText(row, 4);
  ASSIGN_OR_RETURN(info.also_rolled_back, DecodeFields(ColText(row, 5)));
  info.partitions = ColInt(row, 6);
  info.rows = ColInt(row, 7);
  return std::optional<RollbackInfo>(std::move(info));
}

absl::StatusOr<std::vector<LineageRecord>> GetLineage(
    PgConnection* conn, const std::string& dataset,
    const std::string& partition) {
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec(absl::StrCat("SELECT ", kLineageColumns,
                              " FROM backfill_state.lineage l WHERE "
                              "l.dataset = $1 AND l.\"partition\" = $2 "
                              "ORDER BY l.id DESC"),
                 {Text(dataset), Text(partition)}));
  return ReadLineage(r);
}

absl::StatusOr<std::vector<std::optional<LineageRecord>>> NewestLineages(
    PgConnection* conn,
    const std::vector<std::pair<std::string, std::string>>& keys) {
  std::vector<std::optional<LineageRecord>> out;
  out.reserve(keys.size());
  for (const auto& [dataset, partition] : keys) {
    ASSIGN_OR_RETURN(
        PgResult r,
        conn->Exec(absl::StrCat("SELECT ", kLineageColumns,
                                " FROM backfill_state.lineage l WHERE "
                                "l.dataset = $1 AND l.\"partition\" = $2 "
                                "ORDER BY l.id DESC LIMIT 1"),
                   {Text(dataset), Text(partition)}));
    ASSIGN_OR_RETURN(std::optional<LineageRecord> newest, ReadNewest(r));
    out.push_back(std::move(newest));
  }
  return out;
}

absl::StatusOr<std::optional<LineageRecord>> NewestLineageOf(
    PgConnection* conn, const std::string& dataset) {
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec(absl::StrCat("SELECT ", kLineageColumns,
                              " FROM backfill_state.lineage l WHERE "
                              "l.dataset = $1 ORDER BY l.id DESC LIMIT 1"),
                 {Text(dataset)}));
  return ReadNewest(r);
}

absl::StatusOr<std::vector<LineageRecord>> GetLineageOverlapping(
    PgConnection* conn, const std::string& job_id) {
  RETURN_IF_ERROR(StateOf(conn, job_id).status());
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec(
          absl::StrCat("SELECT ", kLineageColumns,
                       " FROM backfill_state.lineage m JOIN "
                       "backfill_state.lineage l ON l.dataset = m.dataset AND "
                       "l.\"partition\" = m.\"partition\" WHERE m.job_id = $1 "
                       "AND m.action = 'publish' ORDER BY l.id"),
          {Text(job_id)}));
  return ReadLineage(r);
}

absl::StatusOr<std::map<std::string, absl::Time>> PublicationTimes(
    PgConnection* conn, const std::vector<std::string>& job_ids) {
  std::map<std::string, absl::Time> out;
  for (const std::string& id : job_ids) {
    ASSIGN_OR_RETURN(
        PgResult r,
        conn->Exec("SELECT MIN(published_at) FROM backfill_state.lineage "
                   "WHERE job_id = $1 AND action = 'publish'",
                   {Text(id)}));
    if (!r.rows.empty() && !ColIsNull(r.rows[0], 0)) {
      out[id] = ColTime(r.rows[0], 0);
    }
  }
  return out;
}

absl::Status ReplaceJobDiff(PgConnection* conn, const JobDiffHeader& header,
                            DiffPages& pages) {
  RETURN_IF_ERROR(StateOf(conn, header.job_id, true).status());
  for (const char* sql :
       {"DELETE FROM backfill_state.job_diff_partitions WHERE job_id = $1",
        "DELETE FROM backfill_state.job_diff_datasets WHERE job_id = $1"}) {
    RETURN_IF_ERROR(conn->Exec(sql, {Text(header.job_id)}).status());
  }
  int64_t ordinal = 0;
  for (const JobDiffHeader::Dataset& d : header.datasets) {
    RETURN_IF_ERROR(
        conn->Exec("INSERT INTO backfill_state.job_diff_datasets (job_id, "
                   "ordinal, dataset, by_key, key_columns, value_columns, "
                   "measure_columns, computed_at) VALUES ($1, $2::bigint, "
                   "$3, $4::bigint, $5, $6, $7, $8::bigint)",
                   {Text(header.job_id), Int(ordinal++), Text(d.dataset),
                    Int(d.columns.by_key ? 1 : 0),
                    Text(EncodeFields(d.columns.key)),
                    Text(EncodeFields(d.columns.values)),
                    Text(EncodeFields(d.columns.measures)),
                    Time(header.computed_at)})
            .status());
  }
  return WriteDiffPages(
      header, pages,
      [&](size_t dataset,
          const std::vector<PartitionDiff>& partitions) -> absl::Status {
        const std::string& name = header.datasets[dataset].dataset;
        for (const PartitionDiff& p : partitions) {
          RETURN_IF_ERROR(
              conn->Exec("INSERT INTO backfill_state.job_diff_partitions "
                         "(job_id, dataset, \"partition\", rows_before, "
                         "rows_after, added, removed, changed, unchanged, "
                         "measures, samples, error) VALUES ($1, $2, $3, "
                         "$4::bigint, $5::bigint, $6::bigint, $7::bigint, "
                         "$8::bigint, $9::bigint, $10, $11, $12)",
                         {Text(header.job_id), Text(name), Text(p.partition),
                          Int(p.rows_before), Int(p.rows_after), Int(p.added),
                          Int(p.removed), Int(p.changed), Int(p.unchanged),
                          Text(EncodeMeasures(p.measures)),
                          Text(EncodeSamples(p.samples)), Text(p.error)})
                  .status());
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<std::optional<JobDiff>> LoadJobDiff(PgConnection* conn,
                                                   const std::string& job_id,
                                                   const std::string& dataset,
                                                   bool with_samples) {
  RETURN_IF_ERROR(StateOf(conn, job_id).status());
  JobDiff diff;
  diff.job_id = job_id;
  {
    ASSIGN_OR_RETURN(
        PgResult r,
        conn->Exec("SELECT dataset, by_key, key_columns, value_columns, "
                   "measure_columns, computed_at FROM "
                   "backfill_state.job_diff_datasets WHERE job_id = $1 ORDER "
                   "BY ordinal",
                   {Text(job_id)}));
    if (r.rows.empty()) return std::nullopt;
    for (const Row& row : r.rows) {
      diff.computed_at = ColTime(row, 5);
      if (!dataset.empty() && ColText(row, 0) != dataset) continue;
      DatasetDiff d;
      d.dataset = ColText(row, 0);
      d.columns.by_key = ColInt(row, 1) != 0;
      ASSIGN_OR_RETURN(d.columns.key, DecodeFields(ColText(row, 2)));
      ASSIGN_OR_RETURN(d.columns.values, DecodeFields(ColText(row, 3)));
      ASSIGN_OR_RETURN(d.columns.measures, DecodeFields(ColText(row, 4)));
      diff.datasets.push_back(std::move(d));
    }
  }
  const std::string sql = absl::StrCat(
      "SELECT \"partition\", rows_before, rows_after, added, removed, "
      "changed, unchanged, measures, ",
      with_samples ? "samples" : "''",
      ", error FROM backfill_state.job_diff_partitions WHERE job_id = $1 "
      "AND dataset = $2 ORDER BY \"partition\" COLLATE \"C\"");
  for (DatasetDiff& d : diff.datasets) {
    ASSIGN_OR_RETURN(PgResult r,
                     conn->Exec(sql, {Text(job_id), Text(d.dataset)}));
    for (const Row& row : r.rows) {
      PartitionDiff p;
      p.dataset = d.dataset;
      p.partition = ColText(row, 0);
      ReadDiffCounts(row, 1, &p);
      ASSIGN_OR_RETURN(p.measures,
                       DecodeMeasures(ColText(row, 7), d.columns.measures));
      ASSIGN_OR_RETURN(p.samples, DecodeSamples(ColText(row, 8)));
      p.error = ColText(row, 9);
      d.partitions.push_back(std::move(p));
    }
  }
  return diff;
}

absl::StatusOr<std::map<std::string, PartitionDiff>> PartitionDiffs(
    PgConnection* conn, const std::string& dataset,
    const std::string& partition) {
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("SELECT p.job_id, p.rows_before, p.rows_after, p.added, "
                 "p.removed, p.changed, p.unchanged, p.measures, p.error, "
                 "d.measure_columns FROM backfill_state.job_diff_partitions "
                 "p JOIN backfill_state.job_diff_datasets d ON d.job_id = "
                 "p.job_id AND d.dataset = p.dataset WHERE p.dataset = $1 "
                 "AND p.\"partition\" = $2",
                 {Text(dataset), Text(partition)}));
  std::map<std::string, PartitionDiff> out;
  for (const Row& row : r.rows) {
    PartitionDiff p;
    p.dataset = dataset;
    p.partition = partition;
    ReadDiffCounts(row, 1, &p);
    ASSIGN_OR_RETURN(std::vector<std::string> columns,
                     DecodeFields(ColText(row, 9)));
    ASSIGN_OR_RETURN(p.measures, DecodeMeasures(ColText(row, 7), columns));
    p.error = ColText(row, 8);
    out.emplace(ColText(row, 0), std::move(p));
  }
  return out;
}

absl::StatusOr<std::map<std::string, int64_t>> LastRunInputRows(
    PgConnection* conn, const std::string& dataset,
    const std::vector<std::string>& partitions) {
  std::map<std::string, int64_t> out;
  if (partitions.empty()) return out;
  const auto [first, last] =
      std::minmax_element(partitions.begin(), partitions.end());
  // Newest job first per partition: the first row of each partition wins.
  // Compared byte-wise (COLLATE "C"), as std::string orders the bounds.
  ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("SELECT t.\"partition\", t.input_rows FROM "
                 "backfill_state.tasks t JOIN backfill_state.jobs j ON j.id "
                 "= t.job_id WHERE t.dataset = $1 AND t.\"partition\" "
                 "COLLATE \"C\" >= $2 AND t.\"partition\" COLLATE \"C\" <= $3 "
                 "AND t.state IN ('PUBLISHED', 'UNCHANGED') ORDER BY "
                 "t.\"partition\", j.seq DESC",
                 {Text(dataset), Text(*first), Text(*last)}));
  absl::flat_hash_set<std::string> wanted(partitions.begin(), partitions.end());
  for (const Row& row : r.rows) {
    std::string partition = ColText(row, 0);
    if (!wanted.contains(partition)) continue;
    out.emplace(std::move(partition), ColInt(row, 1));  // keeps the first
  }
  return out;
}

absl::StatusOr<std::map<std::string, VerifiedVersion>> VerifiedVersions(
    PgConnection* conn, const std::string& dataset,
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
  // its target ($1): no version of the whole partition.
  constexpr char kKeyedOnTarget[] =
      "(j.dataset = $1 AND EXISTS (SELECT 1 FROM backfill_state.job_keys k "
      "WHERE k.job_id = j.id))";
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
    ASSIGN_OR_RETURN(
        PgResult r,
        conn->Exec(
            absl::StrCat("SELECT l.\"partition\", l.job_id, j.seq, "
                         "l.transform_version, l.inputs FROM "
                         "backfill_state.lineage l JOIN backfill_state.jobs j "
                         "ON j.id = l.job_id WHERE l.dataset = $1 AND l.action "
                         "= 'publish' AND j.state <> 'ROLLED_BACK' AND NOT ",
                         kKeyedOnTarget),
            {Text(dataset)}));
    for (const Row& row : r.rows) {
      VerifiedVersion v;
      v.partition = ColText(row, 0);
      if (!keep(v.partition)) continue;
      v.job_id = ColText(row, 1);
      v.transform_version = ColText(row, 3);
      ASSIGN_OR_RETURN(v.inputs, DecodeInputs(ColText(row, 4)));
      offer(ColInt(row, 2), std::move(v));
    }
  }
  // The newest rollback recorded per partition (unix micros).
  std::map<std::string, int64_t> rolled_back_at;
  {
    ASSIGN_OR_RETURN(
        PgResult r,
        conn->Exec("SELECT \"partition\", MAX(published_at) FROM "
                   "backfill_state.lineage WHERE dataset = $1 AND action = "
                   "'rollback' GROUP BY \"partition\"",
                   {Text(dataset)}));
    for (const Row& row : r.rows) {
      rolled_back_at[ColText(row, 0)] = ColInt(row, 1);
    }
  }
  {
    // UNCHANGED tasks of jobs whose publish committed (not rolled back),
    // with the version the job computed the dataset with.
    Params params = {Text(dataset)};
    for (JobState state : PublishedStates()) {
      if (state != JobState::kRolledBack) {
        params.push_back(Text(JobStateText(state)));
      }
    }
    ASSIGN_OR_RETURN(
        PgResult r,
        conn->Exec(
            absl::StrCat(
                "SELECT t.\"partition\", t.job_id, j.seq, COALESCE((SELECT "
                "d.transform_version FROM backfill_state.job_datasets d "
                "WHERE d.job_id = t.job_id AND d.dataset = t.dataset ORDER "
                "BY d.ordinal DESC LIMIT 1), ''), t.inputs, "
                "COALESCE(j.end_time, 0) FROM backfill_state.tasks t JOIN "
                "backfill_state.jobs j ON j.id = t.job_id WHERE t.dataset = "
                "$1 AND t.state = 'UNCHANGED' AND j.state IN (",
                Placeholders(2, params.size() - 1), ") AND NOT ",
                kKeyedOnTarget),
            params));
    for (const Row& row : r.rows) {
      VerifiedVersion v;
      v.partition = ColText(row, 0);
      if (!keep(v.partition)) continue;
      auto rb = rolled_back_at.find(v.partition);
      if (rb != rolled_back_at.end() && rb->second >= ColInt(row, 5)) continue;
      v.job_id = ColText(row, 1);
      v.unchanged = true;
      v.transform_version = ColText(row, 3);
      ASSIGN_OR_RETURN(v.inputs, DecodeInputs(ColText(row, 4)));
      offer(ColInt(row, 2), std::move(v));
    }
  }
  std::map<std::string, VerifiedVersion> out;
  for (auto& [p, c] : best) out.emplace(p, std::move(c.version));
  return out;
}

}  // namespace backfill::pg_state
