#include "storage/sql/profiles.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "storage/sql/dialect.h"
#include "storage/sql/engine_checks.h"

namespace backfill::sql {
namespace {

// `_bf_r."column"`.
std::string Col(std::string_view alias, const std::string& column) {
  return absl::StrCat(std::string(alias), ".", Dialect::Quote(column));
}

// How many rows of the group a condition holds for.
std::string CountWhere(const std::string& condition) {
  return absl::StrCat("COUNT(CASE WHEN ", condition, " THEN 1 END)");
}

}  // namespace

absl::StatusOr<Profile> ProfileStaged(Connection* conn, const JobLayout& layout,
                                      const DatasetSpec& dataset,
                                      const ProfileRequest& request) {
  const Dialect& d = conn->dialect();
  const std::string& job_id = layout.job_id;
  const int samples = std::max(0, request.samples);
  RETURN_IF_ERROR(CheckProfileRequest(dataset, request));
  const Relation stage = d.Stage(job_id, dataset.name);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(conn, TxnMode::kSnapshot));
  ASSIGN_OR_RETURN(bool exists, conn->Exists(stage));
  if (!exists) {
    return absl::FailedPreconditionError(
        absl::StrCat("nothing staged for ", dataset.name, " in job ", job_id));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Membership> member,
                   d.MembershipOf(conn, dataset, "_bf_s."));
  const std::string from = absl::StrCat(
      "(SELECT ", member->Expression(), " AS _bf_p, _bf_s.* FROM ",
      d.Name(stage), " AS _bf_s) AS _bf_r WHERE _bf_r._bf_p IS NOT NULL");
  // The values that do not fit their column's type, where a column may hold
  // them.
  std::vector<std::pair<std::string, std::string>> typed;  // column, test
  if (request.types) {
    for (const ColumnSpec& c : dataset.columns) {
      if (std::optional<std::string> mismatch =
              d.TypeMismatch(Col("_bf_r", c.name), c.type)) {
        typed.emplace_back(c.name, *std::move(mismatch));
      }
    }
  }
  // One pass: rows, sums, NULL counts and type mismatches per partition.
  std::vector<std::string> aggregates = {"COUNT(*)"};
  for (const std::string& m : request.measures) {
    aggregates.push_back(d.Total(Col("_bf_r", m)));
  }
  for (const std::string& c : request.null_columns) {
    aggregates.push_back(CountWhere(absl::StrCat(Col("_bf_r", c), " IS NULL")));
  }
  for (const auto& [column, mismatch] : typed) {
    aggregates.push_back(CountWhere(mismatch));
  }
  Profile out;
  // Row by row: a job's partitions may be many, and only their profiles
  // are kept, not the rows they come from.
  RETURN_IF_ERROR(conn->ForEachRow(
      absl::StrCat("SELECT _bf_r._bf_p, ", absl::StrJoin(aggregates, ", "),
                   " FROM ", from, " GROUP BY 1"),
      {}, [&](const Row& row) {
        PartitionProfile& p = out[row[0].text];
        size_t i = 1;
        p.rows = row[i++].integer;
        for (const std::string& m : request.measures) {
          p.mutable_sums()[m] = row[i++].real;
        }
        for (const std::string& c : request.null_columns) {
          p.mutable_nulls()[c].count = row[i++].integer;
        }
        for (const auto& [column, mismatch] : typed) {
          if (const int64_t n = row[i++].integer; n > 0) {
            p.mutable_type_mismatches()[column].count = n;
          }
        }
        if (!request.references.empty()) {
          p.mutable_orphans().resize(request.references.size());
        }
        return absl::OkStatus();
      }));
  const std::string row_text = d.RowText(dataset, "_bf_r");
  // Samples of what was counted, only where something was.
  auto sample =
      [&](const std::string& condition,
          const std::function<CountWithSamples*(PartitionProfile&)>& field)
      -> absl::Status {
    if (samples == 0) return absl::OkStatus();
    ASSIGN_OR_RETURN(
        Result rows,
        conn->Exec(
            absl::StrCat(
                "SELECT _bf_p, _bf_text FROM (SELECT _bf_r._bf_p AS _bf_p, ",
                row_text,
                " AS _bf_text, ROW_NUMBER() OVER (PARTITION BY _bf_r._bf_p) AS "
                "_bf_n FROM ",
                from, " AND (", condition,
                ")) AS _bf_x WHERE _bf_n <= ", d.Placeholder(1)),
            {Param::Int(samples)}));
    for (const Row& row : rows.rows) {
      auto it = out.find(row[0].text);
      if (it == out.end()) continue;
      if (CountWithSamples* c = field(it->second)) {
        c->samples.push_back(row[1].text);
      }
    }
    return absl::OkStatus();
  };
  for (const std::string& c : request.null_columns) {
    bool any = false;
    for (auto& [partition, p] : out) any |= p.mutable_nulls()[c].count > 0;
    if (!any) continue;
    RETURN_IF_ERROR(
        sample(absl::StrCat(Col("_bf_r", c), " IS NULL"),
               [&](PartitionProfile& p) { return &p.mutable_nulls()[c]; }));
  }
  for (const auto& [column, mismatch] : typed) {
    bool any = false;
    for (auto& [partition, p] : out)
      any |= p.type_mismatches().count(column) > 0;
    if (!any) continue;
    const std::string col = column;
    RETURN_IF_ERROR(
        sample(mismatch, [&](PartitionProfile& p) -> CountWithSamples* {
          auto it = p.mutable_type_mismatches().find(col);
          return it == p.mutable_type_mismatches().end() ? nullptr
                                                         : &it->second;
        }));
  }
  // Orphans, one query per reference.
  for (size_t i = 0; i < request.references.size(); ++i) {
    const ProfileRequest::Reference& r = request.references[i];
    const Relation ref = IsPinned(layout, r.dataset->name)
                             ? d.Pin(job_id, *r.dataset)
                             : d.Published(*r.dataset);
    ASSIGN_OR_RETURN(bool ref_exists, conn->Exists(ref));
    const std::string column = Col("_bf_r", r.column);
    const std::string orphan =
        ref_exists ? absl::StrCat(column,
                                  " IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ",
                                  d.Name(ref), " AS _bf_k WHERE ",
                                  Col("_bf_k", r.key), " = ", column, ")")
                   : absl::StrCat(column, " IS NOT NULL");
    bool any = false;
    ASSIGN_OR_RETURN(
        Result counts,
        conn->Exec(absl::StrCat("SELECT _bf_r._bf_p, COUNT(*) FROM ", from,
                                " AND (", orphan, ") GROUP BY 1")));
    for (const Row& row : counts.rows) {
      auto it = out.find(row[0].text);
      if (it == out.end()) continue;
      it->second.mutable_orphans()[i].count = row[1].integer;
      any = true;
    }
    if (any) {
      RETURN_IF_ERROR(sample(orphan, [&](PartitionProfile& p) {
        return &p.mutable_orphans()[i];
      }));
    }
  }
  RETURN_IF_ERROR(txn.Commit());
  return out;
}

absl::StatusOr<Profile> ProfilePublished(Connection* conn,
                                         const std::string& job_id,
                                         const DatasetSpec& dataset,
                                         const ProfileRequest& request) {
  const Dialect& d = conn->dialect();
  const Relation table = d.Published(dataset);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(conn, TxnMode::kSnapshot));
  Profile out;
  ASSIGN_OR_RETURN(std::optional<std::vector<Connection::Column>> columns,
                   conn->Columns(table));
  if (!columns) return out;
  std::set<std::string> present;
  for (const Connection::Column& c : *columns) {
    present.insert(absl::AsciiStrToLower(c.name));
  }
  std::vector<std::string> measures;
  std::vector<std::string> aggregates = {"COUNT(*)"};
  for (const std::string& m : request.measures) {
    if (!present.count(absl::AsciiStrToLower(m))) continue;
    measures.push_back(m);
    aggregates.push_back(d.Total(Col("_bf_t", m)));
  }
  std::string sql;
  if (!dataset.partition) {
    sql = absl::StrCat("SELECT '', ", absl::StrJoin(aggregates, ", "), " FROM ",
                       d.Name(table), " AS _bf_t");
  } else {
    ASSIGN_OR_RETURN(std::unique_ptr<Membership> member,
                     d.MembershipOf(conn, dataset, "_bf_t."));
    // The job's partitions now (those it let go of are no longer listed).
    sql =
        absl::StrCat("SELECT ", member->Expression(), " AS _bf_p, ",
                     absl::StrJoin(aggregates, ", "), " FROM ", d.Name(table),
                     " AS _bf_t WHERE EXISTS (SELECT 1 FROM ",
                     d.Name(d.Parts(job_id, dataset.name)), " AS _bf_q WHERE ",
                     member->OverList("_bf_q"), ") GROUP BY 1");
  }
  ASSIGN_OR_RETURN(Result rows, conn->Exec(sql));
  for (const Row& row : rows.rows) {
    if (row[0].null()) continue;
    const int64_t n = row[1].integer;
    if (n == 0) continue;
    PartitionProfile& p = out[row[0].text];
    p.rows = n;
    for (size_t i = 0; i < measures.size(); ++i) {
      p.mutable_sums()[measures[i]] = row[2 + i].real;
    }
  }
  RETURN_IF_ERROR(txn.Commit());
  return out;
}

}  // namespace backfill::sql
