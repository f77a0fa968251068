#include "storage/sqlite/state/state_lineage.h"

#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"
#include "core/model/transition_guard.h"
#include "storage/sqlite/state/state_encoding.h"
#include "storage/sqlite/state/state_jobs.h"
#include "storage/sqlite/state/state_record_checksums.h"
#include "storage/sqlite/state/state_tasks.h"

namespace backfill::sqlite_state {
namespace {

namespace sr = state_records;

using sqlite::Statement;

constexpr char kLineageColumns[] =
    "dataset, \"partition\", job_id, transform_version, inputs, "
    "output_fingerprint, row_count, reason, ticket, requested_by, "
    "published_at, action, approved_from, approved_by, approval_reason, "
    "approval_override, approved_at, id";

// kLineageColumns of the table aliased `alias` ("" for none), and whether
// the record is intact (column 18).
std::string LineageColumns(std::string_view alias) {
  std::vector<std::string> columns = absl::StrSplit(kLineageColumns, ", ");
  if (!alias.empty()) {
    for (std::string& c : columns) c = absl::StrCat(Sv(alias), ".", c);
  }
  columns.push_back(sr::IntactSql(sr::Lineage(), alias));
  return absl::StrJoin(columns, ", ");
}

// Every row of `q`, which selects LineageColumns; DATA_LOSS naming the
// first record that fails its checksum.
absl::StatusOr<std::vector<LineageRecord>> ReadLineage(Statement& q,
                                                       std::string_view path) {
  std::vector<LineageRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    if (q.ColumnInt(18) != 1) {
      return sr::Damaged(sr::LineageRecordName(q.ColumnText(2), q.ColumnText(0),
                                               q.ColumnText(1)),
                         path);
    }
    LineageRecord rec;
    rec.dataset = q.ColumnText(0);
    rec.partition = q.ColumnText(1);
    rec.job_id = q.ColumnText(2);
    rec.transform_version = q.ColumnText(3);
    ASSIGN_OR_RETURN(rec.inputs, DecodeInputs(q.ColumnText(4)));
    rec.output_fingerprint = q.ColumnText(5);
    rec.row_count = q.ColumnInt(6);
    rec.reason = q.ColumnText(7);
    rec.ticket = q.ColumnText(8);
    rec.requested_by = q.ColumnText(9);
    rec.published_at = ColumnTime(q, 10);
    ASSIGN_OR_RETURN(rec.action, ParseLineageAction(q.ColumnText(11)));
    if (!q.ColumnIsNull(12)) {
      Approval approval;
      ASSIGN_OR_RETURN(approval.from_state, ParseJobState(q.ColumnText(12)));
      approval.approved_by = q.ColumnText(13);
      approval.reason = q.ColumnText(14);
      approval.override_validation = q.ColumnInt(15) != 0;
      approval.approved_at = ColumnTime(q, 16);
      rec.approval = std::move(approval);
    }
    rec.id = q.ColumnInt(17);
    out.push_back(std::move(rec));
  }
  return out;
}

// The first row of `q` (which selects LineageColumns), if any.
absl::StatusOr<std::optional<LineageRecord>> ReadNewest(Statement& q,
                                                        std::string_view path) {
  ASSIGN_OR_RETURN(std::vector<LineageRecord> records, ReadLineage(q, path));
  if (records.empty()) return std::optional<LineageRecord>();
  return std::optional<LineageRecord>(std::move(records.front()));
}

// Lineage records of `action`, each of job `job_id` (for a rollback, a
// record's own job id when it names one: a job rolled back with it), at
// its own time (`now` when it has none), a publish record with its
// approval (a rollback record has none).
absl::Status InsertLineage(const StateDb& db, LineageAction action,
                           const std::string& job_id,
                           const std::vector<LineageRecord>& lineage,
                           absl::Time now) {
  static const std::string& kInsert = Once(absl::StrCat(
      "INSERT INTO lineage (dataset, \"partition\", job_id, "
      "transform_version, inputs, output_fingerprint, row_count, reason, "
      "ticket, requested_by, published_at, approved_from, approved_by, "
      "approval_reason, approval_override, approved_at, action, checksum) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
      "?15, ?16, ?17, ",
      sr::InsertSql(sr::Lineage(), {{"dataset", "?1"},
                                    {"partition", "?2"},
                                    {"job_id", "?3"},
                                    {"transform_version", "?4"},
                                    {"inputs", "?5"},
                                    {"output_fingerprint", "?6"},
                                    {"row_count", "?7"},
                                    {"reason", "?8"},
                                    {"ticket", "?9"},
                                    {"requested_by", "?10"},
                                    {"published_at", "?11"},
                                    {"approved_from", "?12"},
                                    {"approved_by", "?13"},
                                    {"approval_reason", "?14"},
                                    {"approval_override", "?15"},
                                    {"approved_at", "?16"},
                                    {"action", "?17"}}),
      ")"));
  const bool publish = action == LineageAction::kPublish;
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kInsert));
  for (const LineageRecord& rec : lineage) {
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, rec.dataset));
    RETURN_IF_ERROR(q.BindText(2, rec.partition));
    RETURN_IF_ERROR(
        q.BindText(3, publish || rec.job_id.empty() ? job_id : rec.job_id));
    RETURN_IF_ERROR(q.BindText(4, rec.transform_version));
    RETURN_IF_ERROR(q.BindText(5, EncodeInputs(rec.inputs)));
    RETURN_IF_ERROR(q.BindText(6, rec.output_fingerprint));
    RETURN_IF_ERROR(q.BindInt(7, rec.row_count));
    RETURN_IF_ERROR(q.BindText(8, rec.reason));
    RETURN_IF_ERROR(q.BindText(9, rec.ticket));
    RETURN_IF_ERROR(q.BindText(10, rec.requested_by));
    RETURN_IF_ERROR(BindTime(
        q, 11,
        rec.published_at == absl::InfinitePast() ? now : rec.published_at));
    if (publish && rec.approval) {
      RETURN_IF_ERROR(q.BindText(12, JobStateText(rec.approval->from_state)));
      RETURN_IF_ERROR(q.BindText(13, rec.approval->approved_by));
      RETURN_IF_ERROR(q.BindText(14, rec.approval->reason));
      RETURN_IF_ERROR(q.BindInt(15, rec.approval->override_validation ? 1 : 0));
      RETURN_IF_ERROR(BindTime(q, 16, rec.approval->approved_at));
    } else {
      RETURN_IF_ERROR(q.BindNull(12));
      RETURN_IF_ERROR(q.BindText(13, ""));
      RETURN_IF_ERROR(q.BindText(14, ""));
      RETURN_IF_ERROR(q.BindInt(15, 0));
      RETURN_IF_ERROR(q.BindNull(16));
    }
    RETURN_IF_ERROR(q.BindText(17, LineageActionName(action)));
    RETURN_IF_ERROR(q.Run());
  }
  return absl::OkStatus();
}

// How each job of `jobs` was rolled back: `info` for the first (`job_id`),
// forced with it for the others.
absl::Status WriteRollbackInfo(
    const StateDb& db, const std::string& job_id, const RollbackInfo& info,
    const std::vector<std::pair<std::string, JobState>>& jobs, absl::Time now) {
  ASSIGN_OR_RETURN(
      Statement insert,
      db.db->PrepareCached(
          "INSERT OR REPLACE INTO rollbacks (job_id, requested_by, "
          "reason, at, forced, with_job, also_rolled_back, "
          "partitions, rows_restored) VALUES (?1, ?2, ?3, ?4, ?5, "
          "?6, ?7, ?8, ?9)"));
  for (const auto& [id, state] : jobs) {
    const bool main = id == job_id;
    RETURN_IF_ERROR(insert.Reset());
    RETURN_IF_ERROR(insert.BindText(1, id));
    RETURN_IF_ERROR(insert.BindText(2, info.requested_by));
    RETURN_IF_ERROR(insert.BindText(3, info.reason));
    RETURN_IF_ERROR(
        BindTime(insert, 4, info.at == absl::InfinitePast() ? now : info.at));
    RETURN_IF_ERROR(insert.BindInt(5, info.forced ? 1 : 0));
    RETURN_IF_ERROR(insert.BindText(6, main ? info.with_job : job_id));
    RETURN_IF_ERROR(insert.BindText(
        7, main ? EncodeFields(info.also_rolled_back) : std::string()));
    RETURN_IF_ERROR(insert.BindInt(8, main ? info.partitions : 0));
    RETURN_IF_ERROR(insert.BindInt(9, main ? info.rows : 0));
    RETURN_IF_ERROR(insert.Run());
  }
  return absl::OkStatus();
}

// The counts of a partition's diff, from columns `first` to `first` + 5 of
// `q`: rows before and after, added, removed, changed, unchanged.
void ReadDiffCounts(const Statement& q, int first, PartitionDiff* p) {
  p->rows_before = q.ColumnInt(first);
  p->rows_after = q.ColumnInt(first + 1);
  p->added = q.ColumnInt(first + 2);
  p->removed = q.ColumnInt(first + 3);
  p->changed = q.ColumnInt(first + 4);
  p->unchanged = q.ColumnInt(first + 5);
}

}  // namespace

absl::Status RecordPublication(const StateDb& db, const std::string& job_id,
                               PublicationLineage& lineage, JobState to,
                               absl::Time now) {
  ASSIGN_OR_RETURN(JobState from, StateOf(db, job_id));
  int64_t recorded = 0;
  {
    ASSIGN_OR_RETURN(
        Statement q,
        db.db->PrepareCached("SELECT COUNT(*) FROM lineage WHERE job_id "
                             "= ?1 AND action = 'publish'"));
    RETURN_IF_ERROR(q.BindText(1, job_id));
    RETURN_IF_ERROR(q.Step().status());
    recorded = q.ColumnInt(0);
  }
  ASSIGN_OR_RETURN(bool record,
                   GuardPublication(job_id, from, recorded > 0, to));
  if (!record) return absl::OkStatus();  // a repeat after a restart
  RETURN_IF_ERROR(BuildPublicationLineage(
      job_id, lineage,
      [&](const TaskQuery& page) { return ListTaskPage(db, page); },
      [&](const std::vector<LineageRecord>& records) {
        return InsertLineage(db, LineageAction::kPublish, job_id, records, now);
      }));
  RETURN_IF_ERROR(PublishStagedTasks(db, job_id, now));
  return WriteTransition(db, job_id, from, to, lineage.Message(), now);
}

absl::Status RecordRollback(const StateDb& db, const std::string& job_id,
                            const RollbackInfo& info,
                            const std::vector<LineageRecord>& lineage,
                            const std::string& message,
                            const std::string& also_message, absl::Time now) {
  ASSIGN_OR_RETURN(JobState from, StateOf(db, job_id));
  if (from == JobState::kRolledBack) return absl::OkStatus();  // recorded
  std::vector<std::pair<std::string, JobState>> jobs = {{job_id, from}};
  for (const std::string& other : info.also_rolled_back) {
    if (other == job_id) continue;
    ASSIGN_OR_RETURN(JobState state, StateOf(db, other));
    jobs.push_back({other, state});
  }
  RETURN_IF_ERROR(GuardRollback(jobs));
  RETURN_IF_ERROR(
      InsertLineage(db, LineageAction::kRollback, job_id, lineage, now));
  RETURN_IF_ERROR(WriteRollbackInfo(db, job_id, info, jobs, now));
  for (const auto& [id, state] : jobs) {
    RETURN_IF_ERROR(WriteTransition(db, id, state, JobState::kRolledBack,
                                    id == job_id ? message : also_message,
                                    now));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<RollbackInfo>> LoadRollbackInfo(
    const StateDb& db, const std::string& job_id) {
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached("SELECT requested_by, reason, at, forced, with_job, "
                           "also_rolled_back, partitions, rows_restored FROM "
                           "rollbacks WHERE job_id = ?1"));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::optional<RollbackInfo>();
  RollbackInfo info;
  info.requested_by = q.ColumnText(0);
  info.reason = q.ColumnText(1);
  info.at = ColumnTime(q, 2);
  info.forced = q.ColumnInt(3) != 0;
  info.with_job = q.ColumnText(4);
  ASSIGN_OR_RETURN(info.also_rolled_back, DecodeFields(q.ColumnText(5)));
  info.partitions = q.ColumnInt(6);
  info.rows = q.ColumnInt(7);
  return std::optional<RollbackInfo>(std::move(info));
}

absl::StatusOr<std::vector<LineageRecord>> GetLineage(
    const StateDb& db, const std::string& dataset,
    const std::string& partition) {
  static const std::string& kSql = Once(absl::StrCat(
      "SELECT ", LineageColumns(""),
      " FROM lineage WHERE dataset = ?1 AND \"partition\" = ?2 ORDER BY id "
      "DESC"));
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kSql));
  RETURN_IF_ERROR(q.BindText(1, dataset));
  RETURN_IF_ERROR(q.BindText(2, partition));
  return ReadLineage(q, db.path);
}

absl::StatusOr<std::vector<std::optional<LineageRecord>>> NewestLineages(
    const StateDb& db,
    const std::vector<std::pair<std::string, std::string>>& keys) {
  static const std::string& kSql = Once(absl::StrCat(
      "SELECT ", LineageColumns(""),
      " FROM lineage WHERE dataset = ?1 AND \"partition\" = ?2 ORDER BY id "
      "DESC LIMIT 1"));
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kSql));
  std::vector<std::optional<LineageRecord>> out;
  out.reserve(keys.size());
  for (const auto& [dataset, partition] : keys) {
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, dataset));
    RETURN_IF_ERROR(q.BindText(2, partition));
    ASSIGN_OR_RETURN(std::optional<LineageRecord> newest,
                     ReadNewest(q, db.path));
    out.push_back(std::move(newest));
  }
  return out;
}

absl::StatusOr<std::optional<LineageRecord>> NewestLineageOf(
    const StateDb& db, const std::string& dataset) {
  static const std::string& kSql = Once(absl::StrCat(
      "SELECT ", LineageColumns(""),
      " FROM lineage WHERE dataset = ?1 ORDER BY id DESC LIMIT 1"));
  ASSIGN_OR_RETURN(Statement q, db.db->PrepareCached(kSql));
  RETURN_IF_ERROR(q.BindText(1, dataset));
  return ReadNewest(q, db.path);
}

absl::StatusOr<std::vector<LineageRecord>> GetLineageOverlapping(
    const StateDb& db, const std::string& job_id) {
  RETURN_IF_ERROR(StateOf(db, job_id).status());
  static const std::string& kColumns = Once(LineageColumns("l"));
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached(absl::StrCat(
          "SELECT ", kColumns,
          " FROM lineage m JOIN lineage l ON l.dataset = m.dataset AND "
          "l.\"partition\" = m.\"partition\" WHERE m.job_id = ?1 AND "
          "m.action = 'publish' ORDER BY l.id")));
  RETURN_IF_ERROR(q.BindText(1, job_id));
  return ReadLineage(q, db.path);
}

absl::StatusOr<std::map<std::string, absl::Time>> PublicationTimes(
    const StateDb& db, const std::vector<std::string>& job_ids) {
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached("SELECT MIN(published_at) FROM lineage WHERE "
                           "job_id = ?1 AND action = 'publish'"));
  std::map<std::string, absl::Time> out;
  for (const std::string& id : job_ids) {
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, id));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row && !q.ColumnIsNull(0)) out[id] = ColumnTime(q, 0);
  }
  return out;
}

absl::Status ReplaceJobDiff(const StateDb& db, const JobDiffHeader& header,
                            DiffPages& pages) {
  RETURN_IF_ERROR(StateOf(db, header.job_id).status());
  for (const char* table : {"job_diff_partitions", "job_diff_datasets"}) {
    RETURN_IF_ERROR(DeleteRowsOfJob(db, table, header.job_id));
  }
  ASSIGN_OR_RETURN(
      Statement ds,
      db.db->PrepareCached(
          "INSERT INTO job_diff_datasets (job_id, ordinal, dataset, "
          "by_key, key_columns, value_columns, measure_columns, "
          "computed_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"));
  int64_t ordinal = 0;
  for (const JobDiffHeader::Dataset& d : header.datasets) {
    RETURN_IF_ERROR(ds.Reset());
    RETURN_IF_ERROR(ds.BindText(1, header.job_id));
    RETURN_IF_ERROR(ds.BindInt(2, ordinal++));
    RETURN_IF_ERROR(ds.BindText(3, d.dataset));
    RETURN_IF_ERROR(ds.BindInt(4, d.columns.by_key ? 1 : 0));
    RETURN_IF_ERROR(ds.BindText(5, EncodeFields(d.columns.key)));
    RETURN_IF_ERROR(ds.BindText(6, EncodeFields(d.columns.values)));
    RETURN_IF_ERROR(ds.BindText(7, EncodeFields(d.columns.measures)));
    RETURN_IF_ERROR(BindTime(ds, 8, header.computed_at));
    RETURN_IF_ERROR(ds.Run());
  }
  ASSIGN_OR_RETURN(
      Statement part,
      db.db->PrepareCached(
          "INSERT INTO job_diff_partitions (job_id, dataset, "
          "\"partition\", rows_before, rows_after, added, removed, "
          "changed, unchanged, measures, samples, error) VALUES (?1, "
          "?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"));
  return WriteDiffPages(
      header, pages,
      [&](size_t dataset,
          const std::vector<PartitionDiff>& partitions) -> absl::Status {
        const std::string& name = header.datasets[dataset].dataset;
        for (const PartitionDiff& p : partitions) {
          RETURN_IF_ERROR(part.Reset());
          RETURN_IF_ERROR(part.BindText(1, header.job_id));
          RETURN_IF_ERROR(part.BindText(2, name));
          RETURN_IF_ERROR(part.BindText(3, p.partition));
          RETURN_IF_ERROR(part.BindInt(4, p.rows_before));
          RETURN_IF_ERROR(part.BindInt(5, p.rows_after));
          RETURN_IF_ERROR(part.BindInt(6, p.added));
          RETURN_IF_ERROR(part.BindInt(7, p.removed));
          RETURN_IF_ERROR(part.BindInt(8, p.changed));
          RETURN_IF_ERROR(part.BindInt(9, p.unchanged));
          RETURN_IF_ERROR(part.BindText(10, EncodeMeasures(p.measures)));
          RETURN_IF_ERROR(part.BindText(11, EncodeSamples(p.samples)));
          RETURN_IF_ERROR(part.BindText(12, p.error));
          RETURN_IF_ERROR(part.Run());
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<std::optional<JobDiff>> LoadJobDiff(
    const StateDb& db, const std::string& job_id, const std::string& dataset,
    bool with_samples,
    const std::function<void(size_t index, const DatasetDiff& dataset,
                             PartitionDiff&& p)>& visit) {
  RETURN_IF_ERROR(StateOf(db, job_id).status());
  JobDiff diff;
  diff.job_id = job_id;
  {
    ASSIGN_OR_RETURN(Statement q,
                     db.db->PrepareCached(
                         "SELECT dataset, by_key, key_columns, value_columns, "
                         "measure_columns, computed_at FROM job_diff_datasets "
                         "WHERE job_id = ?1 ORDER BY ordinal"));
    RETURN_IF_ERROR(q.BindText(1, job_id));
    bool any = false;
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      any = true;
      diff.computed_at = ColumnTime(q, 5);
      if (!dataset.empty() && q.ColumnText(0) != dataset) continue;
      DatasetDiff d;
      d.dataset = q.ColumnText(0);
      d.columns.by_key = q.ColumnInt(1) != 0;
      ASSIGN_OR_RETURN(d.columns.key, DecodeFields(q.ColumnText(2)));
      ASSIGN_OR_RETURN(d.columns.values, DecodeFields(q.ColumnText(3)));
      ASSIGN_OR_RETURN(d.columns.measures, DecodeFields(q.ColumnText(4)));
      diff.datasets.push_back(std::move(d));
    }
    if (!any) return std::nullopt;
  }
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached(absl::StrCat(
          "SELECT \"partition\", rows_before, rows_after, added, removed, "
          "changed, unchanged, measures, ",
          with_samples ? "samples" : "''",
          ", error FROM job_diff_partitions WHERE job_id = ?1 AND dataset = "
          "?2 ORDER BY \"partition\"")));
  for (size_t i = 0; i < diff.datasets.size(); ++i) {
    DatasetDiff& d = diff.datasets[i];
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, job_id));
    RETURN_IF_ERROR(q.BindText(2, d.dataset));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      PartitionDiff p;
      p.dataset = d.dataset;
      p.partition = q.ColumnText(0);
      ReadDiffCounts(q, 1, &p);
      ASSIGN_OR_RETURN(p.measures,
                       DecodeMeasures(q.ColumnText(7), d.columns.measures));
      ASSIGN_OR_RETURN(p.samples, DecodeSamples(q.ColumnText(8)));
      p.error = q.ColumnText(9);
      if (visit) {
        visit(i, d, std::move(p));
      } else {
        d.partitions.push_back(std::move(p));
      }
    }
  }
  return diff;
}

absl::StatusOr<std::map<std::string, PartitionDiff>> PartitionDiffs(
    const StateDb& db, const std::string& dataset,
    const std::string& partition) {
  ASSIGN_OR_RETURN(
      Statement q,
      db.db->PrepareCached(
          "SELECT p.job_id, p.rows_before, p.rows_after, p.added, "
          "p.removed, p.changed, p.unchanged, p.measures, p.error, "
          "d.measure_columns FROM job_diff_partitions p JOIN "
          "job_diff_datasets d ON d.job_id = p.job_id AND d.dataset "
          "= p.dataset WHERE p.dataset = ?1 AND p.\"partition\" = "
          "?2"));
  RETURN_IF_ERROR(q.BindText(1, dataset));
  RETURN_IF_ERROR(q.BindText(2, partition));
  std::map<std::string, PartitionDiff> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    PartitionDiff p;
    p.dataset = dataset;
    p.partition = partition;
    ReadDiffCounts(q, 1, &p);
    ASSIGN_OR_RETURN(std::vector<std::string> columns,
                     DecodeFields(q.ColumnText(9)));
    ASSIGN_OR_RETURN(p.measures, DecodeMeasures(q.ColumnText(7), columns));
    p.error = q.ColumnText(8);
    out.emplace(q.ColumnText(0), std::move(p));
  }
  return out;
}

}  // namespace backfill::sqlite_state
