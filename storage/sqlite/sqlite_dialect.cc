#include "storage/sqlite/sqlite_dialect.h"

#include <cctype>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"
#include "core/model/partition_layout.h"
#include "storage/sql/artifacts.h"
#include "storage/sqlite/sqlite_change_triggers.h"
#include "storage/sqlite/sqlite_connection.h"
#include "storage/sqlite/sqlite_membership.h"
#include "storage/sqlite/sqlite_pin_snapshot.h"

namespace backfill::sqlite {
namespace {

// The storage classes that fit a declared type under SQLite's affinity
// rules: INTEGER affinity stores integers, REAL reals (integers become
// reals), TEXT text, NUMERIC integers or reals; BLOB (or no type) anything.
// NULL always fits. Empty: anything fits.
std::string AllowedTypes(const std::string& type) {
  const std::string t = absl::AsciiStrToUpper(type);
  if (absl::StrContains(t, "INT")) return "'integer'";
  if (absl::StrContains(t, "CHAR") || absl::StrContains(t, "CLOB") ||
      absl::StrContains(t, "TEXT")) {
    return "'text'";
  }
  if (absl::StrContains(t, "BLOB") || t.empty()) return "";
  if (absl::StrContains(t, "REAL") || absl::StrContains(t, "FLOA") ||
      absl::StrContains(t, "DOUB")) {
    return "'real'";
  }
  return "'integer', 'real'";
}

// Membership by sqlite_membership.h: the value and its candidate range
// (?first, ?first+1, ?first+2) for a time grain, the value alone for a key.
class SqliteMembership : public sql::Membership {
 public:
  SqliteMembership(const DatasetSpec& dataset, std::string qualifier)
      : dataset_(dataset), qualifier_(std::move(qualifier)) {}

  int parameters() const override {
    if (!dataset_.partition) return 0;
    return dataset_.grain() == Grain::kKey ? 1 : 3;
  }
  std::string Condition(int first) const override {
    return MembershipCondition(dataset_, qualifier_, Q(first), Q(first + 1),
                               Q(first + 2));
  }
  absl::StatusOr<sql::Params> Values(
      const std::string& partition) const override {
    ASSIGN_OR_RETURN(CandidateRange range, StoredRangeOf(dataset_, partition));
    sql::Params out;
    if (!dataset_.partition) return out;
    out.push_back(partition);
    if (parameters() == 3) {
      out.push_back(range.lo);
      out.push_back(range.hi);
    }
    return out;
  }
  std::string Expression() const override {
    return PartitionExpression(dataset_, qualifier_);
  }
  std::string OverList(std::string_view alias) const override {
    return MembershipCondition(
        dataset_, qualifier_, absl::StrCat(Sv(alias), ".\"value\""),
        absl::StrCat(Sv(alias), ".\"lo\""), absl::StrCat(Sv(alias), ".\"hi\""));
  }
  // Every partition's candidate range (empty strings where none).
  std::vector<std::string> ListColumns() const override {
    return {"\"lo\" TEXT NOT NULL", "\"hi\" TEXT NOT NULL"};
  }
  absl::StatusOr<sql::Params> ListValues(
      const std::string& partition) const override {
    ASSIGN_OR_RETURN(CandidateRange range, StoredRangeOf(dataset_, partition));
    return sql::Params{range.lo, range.hi};
  }
  std::string Columns() const override {
    return PartitionColumns(dataset_, qualifier_);
  }
  std::string GroupBy() const override {
    return PartitionGroupBy(dataset_, qualifier_);
  }

 private:
  static std::string Q(int i) { return absl::StrCat("?", i); }
  const DatasetSpec& dataset_;
  const std::string qualifier_;
};

}  // namespace

std::string SqliteDialect::Name(const sql::Relation& relation) const {
  // "main" and "temp" are SQLite's own schema names.
  return absl::StrCat(relation.schema, ".", Quote(relation.name));
}

std::string SqliteDialect::Placeholder(int index) const {
  return absl::StrCat("?", index);
}

sql::Relation SqliteDialect::Published(const DatasetSpec& dataset) const {
  return {"main", dataset.table};
}
sql::Relation SqliteDialect::Stage(const std::string& job_id,
                                   const std::string& dataset) const {
  return {"main", absl::StrCat("_bf_stage_", SafeJob(job_id), "_", dataset)};
}
sql::Relation SqliteDialect::Parts(const std::string& job_id,
                                   const std::string& dataset) const {
  return {"main", absl::StrCat("_bf_parts_", SafeJob(job_id), "_", dataset)};
}
sql::Relation SqliteDialect::Keys(const std::string& job_id,
                                  const std::string& dataset) const {
  return {"main", absl::StrCat("_bf_keys_", SafeJob(job_id), "_", dataset)};
}
sql::Relation SqliteDialect::Pin(const std::string& job_id,
                                 const DatasetSpec& dataset) const {
  return {"main", absl::StrCat("_bf_pin_", SafeJob(job_id), "_", dataset.name)};
}
sql::Relation SqliteDialect::Copies() const { return {"main", "_bf_prev_"}; }
sql::Relation SqliteDialect::Scratch(const std::string& name) const {
  return {"temp", name};
}

sql::Relation SqliteDialect::Meta() const { return {"main", "_bf_meta"}; }
sql::Relation SqliteDialect::Publications() const {
  return {"main", "_bf_publications"};
}
sql::Relation SqliteDialect::Rollbacks() const {
  return {"main", "_bf_rollbacks"};
}
sql::Relation SqliteDialect::ChangeTables() const {
  return {"main", kChangeTablesTable};
}
sql::Relation SqliteDialect::ChangeCounts() const {
  return {"main", kChangeCountsTable};
}
sql::Relation SqliteDialect::FingerprintCache() const {
  return {"main", kFingerprintCacheTable};
}
absl::StatusOr<std::vector<std::string>> SqliteDialect::ChangeTriggerSql(
    sql::Connection* conn, const DatasetSpec& dataset,
    const std::string& epoch) const {
  return ChangeTriggerStatements(conn, dataset, epoch);
}
absl::StatusOr<std::string> SqliteDialect::ChangeIdentity(
    sql::Connection* conn, const DatasetSpec& dataset) const {
  return ChangeTableIdentity(conn, dataset);
}
absl::StatusOr<std::string> SqliteDialect::ChangeBucket(
    const DatasetSpec& dataset, const std::string& partition) const {
  return ChangeBucketOf(dataset, partition);
}

namespace {

// What the names of a job's staging tables start with, before the job.
constexpr const char* kStagingPrefixes[] = {"_bf_stage_", "_bf_parts_",
                                            "_bf_pin_", "_bf_keys_"};

}  // namespace

absl::Status SqliteDialect::DropJobSpace(sql::Connection* conn,
                                         const std::string& job_id) const {
  for (const char* prefix : kStagingPrefixes) {
    ASSIGN_OR_RETURN(
        std::vector<std::string> names,
        conn->Tables("main", absl::StrCat(prefix, SafeJob(job_id), "_")));
    for (const std::string& name : names) {
      RETURN_IF_ERROR(
          conn->Exec(absl::StrCat("DROP TABLE ", Name({"main", name})))
              .status());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> SqliteDialect::ListJobSpaces(
    sql::Connection* conn) const {
  std::set<std::string> ids;
  for (const char* prefix : kStagingPrefixes) {
    ASSIGN_OR_RETURN(std::vector<std::string> names,
                     conn->Tables("main", prefix));
    for (const std::string& name : names) {
      const std::string_view rest =
          std::string_view(name).substr(std::string_view(prefix).size());
      if (auto job = sql::StoreJobOf(rest, /*whole=*/false)) {
        ids.insert(job->first);
      }
    }
  }
  return std::vector<std::string>(ids.begin(), ids.end());
}

absl::StatusOr<std::vector<std::string>> SqliteDialect::PinStatements(
    sql::Connection* conn, const sql::Relation& table,
    const sql::Relation& snapshot) const {
  return PinSnapshotStatements(conn, table, snapshot);
}

absl::StatusOr<std::string> SqliteDialect::ColumnDefinitions(
    const DatasetSpec& dataset) const {
  std::vector<std::string> cols;
  for (const ColumnSpec& c : dataset.columns) {
    // Spliced into DDL (SQLite takes no parameters there): defense in
    // depth for specs that did not come through a Catalog, with the
    // Catalog's own rule.
    if (absl::Status s = CheckColumnType(c.type); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("dataset ", dataset.name, ": column ", c.name,
                       " has an invalid type '", c.type, "': ", s.message()));
    }
    cols.push_back(absl::StrCat(Quote(c.name), " ", c.type));
  }
  return absl::StrJoin(cols, ", ");
}

std::string SqliteDialect::Total(std::string_view expr) const {
  return absl::StrCat("TOTAL(", Sv(expr), ")");
}

std::string SqliteDialect::QuoteValue(std::string_view expr) const {
  return absl::StrCat("quote(", Sv(expr), ")");
}

std::string SqliteDialect::RowText(const DatasetSpec& dataset,
                                   std::string_view alias) const {
  std::vector<std::string> parts;
  for (const ColumnSpec& c : dataset.columns) {
    parts.push_back(
        absl::StrCat("'", absl::StrReplaceAll(c.name, {{"'", "''"}}),
                     "=' || quote(", Sv(alias), ".", Quote(c.name), ")"));
  }
  return absl::StrCat("'(' || ", absl::StrJoin(parts, " || ', ' || "),
                      " || ')'");
}

std::optional<std::string> SqliteDialect::TypeMismatch(
    std::string_view column, const std::string& type) const {
  const std::string allowed = AllowedTypes(type);
  if (allowed.empty()) return std::nullopt;
  return absl::StrCat("typeof(", Sv(column), ") NOT IN ('null', ", allowed,
                      ")");
}

std::string SqliteDialect::SampleLiteral(const sql::Cell& cell) const {
  switch (cell.type) {
    case sql::Cell::Type::kNull:
      return "NULL";
    case sql::Cell::Type::kInteger:
      return absl::StrCat(cell.integer);
    case sql::Cell::Type::kReal: {
      // The shortest text that reads back as the same double.
      for (int digits = 15; digits < 17; ++digits) {
        std::string text = absl::StrFormat("%.*g", digits, cell.real);
        double back = 0;
        if (absl::SimpleAtod(text, &back) && back == cell.real) return text;
      }
      return absl::StrFormat("%.17g", cell.real);
    }
    case sql::Cell::Type::kText:
      return absl::StrCat("'", absl::StrReplaceAll(cell.text, {{"'", "''"}}),
                          "'");
    case sql::Cell::Type::kBlob:
      return absl::StrCat("X'", absl::BytesToHexString(cell.text), "'");
  }
  return cell.text;
}

std::string SqliteDialect::InKeys(const DatasetSpec& dataset,
                                  const sql::Relation& keys,
                                  std::string_view qualifier) const {
  return absl::StrCat("COALESCE(", kPartitionFunction, "('key', ",
                      Sv(qualifier), Quote(dataset.entity_key),
                      ") IN (SELECT \"key\" FROM ", Name(keys), "), 0)");
}

absl::StatusOr<sql::Dialect::Proven> SqliteDialect::WriteProven(
    sql::Connection* conn, const DatasetSpec& dataset,
    const sql::Relation& source, const std::optional<sql::Relation>& target,
    const std::string& columns, const std::string& partition) const {
  Database* db = static_cast<SqliteConnection*>(conn)->db();
  Proven out;
  // The rows of the partition, counted apart from the statement: the
  // candidates' values mapped in C++.
  if (!dataset.partition) {
    ASSIGN_OR_RETURN(
        out.belonging,
        db->QueryInt(absl::StrCat("SELECT COUNT(*) FROM ", Name(source))));
  } else {
    ASSIGN_OR_RETURN(
        Statement candidates,
        db->PrepareCached(absl::StrCat("SELECT ", PartitionColumns(dataset),
                                       " FROM ", Name(source), " WHERE ",
                                       CandidateConditionParams(dataset))));
    RETURN_IF_ERROR(BindMembership(candidates, dataset, partition));
    while (true) {
      ASSIGN_OR_RETURN(bool row, candidates.Step());
      if (!row) break;
      std::optional<std::string> p = PartitionOfRow(dataset, candidates, 0);
      if (p && *p == partition) ++out.belonging;
    }
  }
  const std::string in_partition =
      dataset.partition ? MembershipConditionParams(dataset) : std::string("1");
  std::string sql;
  if (!target) {
    sql = absl::StrCat("DELETE FROM ", Name(source), " WHERE ", in_partition);
  } else {
    sql = absl::StrCat("INSERT INTO ", Name(*target),
                       columns == "*" ? "" : absl::StrCat(" (", columns, ")"),
                       " SELECT ", columns, " FROM ", Name(source), " WHERE ",
                       in_partition);
  }
  ASSIGN_OR_RETURN(Statement write, db->PrepareCached(sql));
  if (dataset.partition) {
    RETURN_IF_ERROR(BindMembership(write, dataset, partition));
  }
  RETURN_IF_ERROR(write.Run());
  out.affected = db->Changes();
  return out;
}

absl::StatusOr<std::unique_ptr<sql::Membership>> SqliteDialect::MembershipOf(
    sql::Connection*, const DatasetSpec& dataset,
    std::string_view qualifier) const {
  return std::make_unique<SqliteMembership>(dataset, std::string(qualifier));
}

}  // namespace backfill::sqlite
