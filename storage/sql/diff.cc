#include "storage/sql/diff.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "storage/sql/dialect.h"
#include "storage/sql/engine_checks.h"

namespace backfill::sql {
namespace {

// `<alias>."c1", ...`.
std::string Qualified(const std::vector<std::string>& columns,
                      std::string_view alias) {
  std::vector<std::string> out;
  for (const std::string& c : columns) {
    out.push_back(absl::StrCat(std::string(alias), ".", Dialect::Quote(c)));
  }
  return absl::StrJoin(out, ", ");
}

// `_bf_a."k1" <op> _bf_b."k1" <joiner> ...` over `columns`.
std::string Pairs(const std::vector<std::string>& columns, const char* op,
                  const char* joiner, const char* none) {
  if (columns.empty()) return none;
  std::vector<std::string> parts;
  for (const std::string& c : columns) {
    const std::string q = Dialect::Quote(c);
    parts.push_back(absl::StrCat("_bf_a.", q, " ", op, " _bf_b.", q));
  }
  return absl::StrJoin(parts, joiner);
}

}  // namespace

absl::StatusOr<PartitionDiff> DiffOnePartition(
    Connection* conn, const DatasetSpec& dataset, const DiffColumns& columns,
    const DiffSides& sides, const std::string& partition, int sample_limit) {
  const Dialect& d = conn->dialect();
  const std::string& a = sides.after;
  const std::string& b = sides.before;
  auto run = [&](const std::string& select) {
    return conn->Exec(sides.with + select, sides.params);
  };
  PartitionDiff diff;
  // Keys are matched NULL-safely (IS NOT DISTINCT FROM). That can only
  // differ from `=` for two rows with NULLs in the same key columns, one on
  // each side: unless both sides have a NULL in their keys, keys are matched
  // with `=`, which a warehouse can hash or merge (PostgreSQL joins on IS
  // NOT DISTINCT FROM by nested loops, in time growing with the rows
  // squared).
  bool null_keys_both = false;
  diff.dataset = dataset.name;
  diff.partition = partition;
  {
    std::string select = absl::StrCat("SELECT (SELECT COUNT(*) FROM ", b,
                                      "), (SELECT COUNT(*) FROM ", a, ")");
    for (const std::string& m : columns.measures) {
      const std::string total = d.Total(Dialect::Quote(m));
      absl::StrAppend(&select, ", (SELECT ", total, " FROM ", b, "), (SELECT ",
                      total, " FROM ", a, ")");
    }
    // Whether each side has a row with a NULL in its key (1 or 0).
    if (columns.by_key && !columns.key.empty()) {
      std::vector<std::string> nulls;
      for (const std::string& c : columns.key) {
        nulls.push_back(absl::StrCat(Dialect::Quote(c), " IS NULL"));
      }
      const std::string any_null = absl::StrJoin(nulls, " OR ");
      for (const std::string& side : {b, a}) {
        absl::StrAppend(&select, ", (SELECT COUNT(*) FROM (SELECT 1 FROM ",
                        side, " WHERE ", any_null, " LIMIT 1) AS _bf_n)");
      }
    }
    ASSIGN_OR_RETURN(Result r, run(select));
    const Row& row = r.rows.at(0);
    diff.rows_before = row[0].integer;
    diff.rows_after = row[1].integer;
    for (size_t i = 0; i < columns.measures.size(); ++i) {
      MeasureTotals totals;
      totals.column = columns.measures[i];
      totals.before = row[2 + 2 * i].real;
      totals.after = row[3 + 2 * i].real;
      diff.measures.push_back(std::move(totals));
    }
    if (columns.by_key && !columns.key.empty()) {
      const size_t n = 2 + 2 * columns.measures.size();
      null_keys_both = row[n].integer > 0 && row[n + 1].integer > 0;
    }
  }
  // One side empty (a first load, a partition emptied): every row of the
  // other side is added or removed, nothing is changed or unchanged, and
  // the statements that would compare the sides are not run. Nor is a
  // sample query for a kind of difference there is none of.
  const bool one_sided = diff.rows_before == 0 || diff.rows_after == 0;
  const int limit = std::max(0, sample_limit);
  const std::string limit_param =
      d.Placeholder(static_cast<int>(sides.params.size()) + 1);
  auto sample = [&](const std::string& select, int64_t found, DiffChange change,
                    size_t keys, size_t before, size_t after) -> absl::Status {
    const int left = limit - static_cast<int>(diff.samples.size());
    if (found == 0 || left <= 0) return absl::OkStatus();
    Params params = sides.params;
    params.push_back(Param::Int(left));
    ASSIGN_OR_RETURN(
        Result rows,
        conn->Exec(absl::StrCat(sides.with, select, " LIMIT ", limit_param),
                   params));
    for (const Row& row : rows.rows) {
      DiffSample s;
      s.change = change;
      size_t i = 0;
      for (size_t n = 0; n < keys; ++n)
        s.key.push_back(d.SampleLiteral(row[i++]));
      for (size_t n = 0; n < before; ++n) {
        s.before.push_back(d.SampleLiteral(row[i++]));
      }
      for (size_t n = 0; n < after; ++n) {
        s.after.push_back(d.SampleLiteral(row[i++]));
      }
      diff.samples.push_back(std::move(s));
    }
    return absl::OkStatus();
  };
  const size_t k = columns.key.size(), v = columns.values.size();
  if (columns.by_key) {
    const std::string key_match =
        Pairs(columns.key, null_keys_both ? "IS NOT DISTINCT FROM" : "=",
              " AND ", "1 = 1");
    const std::string differs =
        Pairs(columns.values, "IS DISTINCT FROM", " OR ", "1 = 0");
    const std::string only_after =
        absl::StrCat(" FROM ", a, " AS _bf_a WHERE NOT EXISTS (SELECT 1 FROM ",
                     b, " AS _bf_b WHERE ", key_match, ")");
    const std::string only_before =
        absl::StrCat(" FROM ", b, " AS _bf_b WHERE NOT EXISTS (SELECT 1 FROM ",
                     a, " AS _bf_a WHERE ", key_match, ")");
    const std::string both = absl::StrCat(" FROM ", a, " AS _bf_a JOIN ", b,
                                          " AS _bf_b ON ", key_match);
    if (one_sided) {
      diff.added = diff.rows_after;
      diff.removed = diff.rows_before;
    } else {
      ASSIGN_OR_RETURN(
          Result counts,
          run(absl::StrCat("SELECT (SELECT COUNT(*)", only_after,
                           "), (SELECT COUNT(*)", only_before,
                           "), (SELECT COUNT(*)", both, " WHERE ", differs,
                           "), (SELECT COUNT(*)", both, ")")));
      const Row& row = counts.rows.at(0);
      diff.added = row[0].integer;
      diff.removed = row[1].integer;
      diff.changed = row[2].integer;
      diff.unchanged = row[3].integer - diff.changed;
    }
    const std::string key_a = Qualified(columns.key, "_bf_a");
    const std::string key_b = Qualified(columns.key, "_bf_b");
    const std::string values_a =
        v > 0 ? absl::StrCat(", ", Qualified(columns.values, "_bf_a")) : "";
    const std::string values_b =
        v > 0 ? absl::StrCat(", ", Qualified(columns.values, "_bf_b")) : "";
    RETURN_IF_ERROR(
        sample(absl::StrCat("SELECT ", key_a, values_b, values_a, both,
                            " WHERE ", differs, " ORDER BY ", key_a),
               diff.changed, DiffChange::kChanged, k, v, v));
    RETURN_IF_ERROR(sample(absl::StrCat("SELECT ", key_a, values_a, only_after,
                                        " ORDER BY ", key_a),
                           diff.added, DiffChange::kAdded, k, 0, v));
    RETURN_IF_ERROR(sample(absl::StrCat("SELECT ", key_b, values_b, only_before,
                                        " ORDER BY ", key_b),
                           diff.removed, DiffChange::kRemoved, k, v, 0));
  } else {
    // Whole rows as multisets: per distinct row, how often each side has it.
    const std::string all = Qualified(columns.values, "_bf_u");
    const std::string grouped = absl::StrCat(
        "(SELECT ", all,
        ", SUM(_bf_u._bf_side) AS _bf_na, SUM(1 - _bf_u._bf_side) AS _bf_nb "
        "FROM (SELECT ",
        Qualified(columns.values, "_bf_x"), ", 1 AS _bf_side FROM ", a,
        " AS _bf_x UNION ALL SELECT ", Qualified(columns.values, "_bf_y"),
        ", 0 FROM ", b, " AS _bf_y) AS _bf_u GROUP BY ", all, ") AS _bf_g");
    if (one_sided) {
      diff.added = diff.rows_after;
      diff.removed = diff.rows_before;
    } else {
      ASSIGN_OR_RETURN(
          Result counts,
          run(absl::StrCat(
              "SELECT COALESCE(SUM(CASE WHEN _bf_na > _bf_nb THEN _bf_na - "
              "_bf_nb ELSE 0 END), 0), COALESCE(SUM(CASE WHEN _bf_nb > "
              "_bf_na THEN _bf_nb - _bf_na ELSE 0 END), 0), "
              "COALESCE(SUM(CASE WHEN _bf_na < _bf_nb THEN _bf_na ELSE _bf_nb "
              "END), 0) FROM ",
              grouped)));
      const Row& row = counts.rows.at(0);
      diff.added = row[0].integer;
      diff.removed = row[1].integer;
      diff.unchanged = row[2].integer;
    }
    const std::string g = Qualified(columns.values, "_bf_g");
    RETURN_IF_ERROR(sample(absl::StrCat("SELECT ", g, " FROM ", grouped,
                                        " WHERE _bf_na > _bf_nb ORDER BY ", g),
                           diff.added, DiffChange::kAdded, 0, 0, v));
    RETURN_IF_ERROR(sample(absl::StrCat("SELECT ", g, " FROM ", grouped,
                                        " WHERE _bf_nb > _bf_na ORDER BY ", g),
                           diff.removed, DiffChange::kRemoved, 0, v, 0));
  }
  return diff;
}

absl::StatusOr<PartitionDiff> DiffStagedPartition(Connection* conn,
                                                  const std::string& job_id,
                                                  const DatasetSpec& dataset,
                                                  const std::string& partition,
                                                  int sample_limit) {
  const Dialect& d = conn->dialect();
  RETURN_IF_ERROR(CheckWritable(d, dataset));
  RETURN_IF_ERROR(CheckPartition(dataset, partition));
  const DiffColumns columns = DiffColumnsOf(dataset);
  const Relation stage = d.Stage(job_id, dataset.name);
  const Relation table = d.Published(dataset);
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(conn, TxnMode::kSnapshot));
  ASSIGN_OR_RETURN(bool staged, conn->Exists(stage));
  if (!staged) {
    return absl::FailedPreconditionError(
        absl::StrCat("nothing staged for ", dataset.name, " in job ", job_id));
  }
  ASSIGN_OR_RETURN(bool published, conn->Exists(table));
  ASSIGN_OR_RETURN(std::unique_ptr<Membership> member,
                   d.MembershipOf(conn, dataset, ""));
  // The two sides as common table expressions: the staged rows of the
  // partition (after) and its published rows (before; none before the
  // first publish).
  const std::string cols = ColumnList(dataset);
  const std::string in_partition = member->Condition(1);
  DiffSides sides;
  sides.with =
      absl::StrCat("WITH _bf_after AS (SELECT ", cols, " FROM ", d.Name(stage),
                   " WHERE ", in_partition, "), _bf_before AS (SELECT ", cols,
                   " FROM ", d.Name(published ? table : stage), " WHERE ",
                   published ? in_partition : "1=0", ") ");
  sides.after = "_bf_after";
  sides.before = "_bf_before";
  ASSIGN_OR_RETURN(sides.params, member->Values(partition));
  ASSIGN_OR_RETURN(
      PartitionDiff diff,
      DiffOnePartition(conn, dataset, columns, sides, partition, sample_limit));
  RETURN_IF_ERROR(txn.Commit());
  return diff;
}

}  // namespace backfill::sql
