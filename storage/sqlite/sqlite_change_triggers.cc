#include "storage/sqlite/sqlite_change_triggers.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"
#include "core/model/partition.h"
#include "storage/sql/dialect.h"
#include "storage/sqlite/sqlite_connection.h"

namespace backfill::sqlite {
namespace {

using sql::Dialect;

// An SQL string literal: quotes doubled.
std::string Literal(std::string_view text) {
  return absl::StrCat("'", absl::StrReplaceAll(Sv(text), {{"'", "''"}}), "'");
}

int PrefixLength(Grain grain) { return grain == Grain::kMonth ? 7 : 10; }

std::string TextOf(std::string_view qualifier, const std::string& column) {
  return absl::StrCat("CAST(", Sv(qualifier), Dialect::Quote(column),
                      " AS TEXT)");
}

// "INSERT ... bump the bucket of `qualifier`'s row" as a trigger body
// statement (unqualified names: a trigger's statements resolve in its own
// schema).
std::string Bump(const DatasetSpec& ds, std::string_view qualifier) {
  return absl::StrCat(
      "INSERT INTO ", Dialect::Quote(kChangeCountsTable),
      " (tbl, bucket, n) VALUES (", Literal(ds.table), ", ",
      ChangeBucketExpression(ds, qualifier),
      ", 1) ON CONFLICT (tbl, bucket) DO UPDATE SET n = n + 1;");
}

constexpr char kIdentitySql[] =
    "SELECT group_concat(type || ':' || name || ':' || coalesce(sql, ''), "
    "char(10)) FROM (SELECT type, name, sql FROM main.sqlite_master WHERE "
    "tbl_name = ?1 COLLATE NOCASE AND (type = 'table' OR (type = 'trigger' "
    "AND name LIKE '\\_bf\\_chg\\_%' ESCAPE '\\')) ORDER BY type, name)";

}  // namespace

std::string ChangeBucketExpression(const DatasetSpec& ds,
                                   std::string_view qualifier) {
  if (!ds.partition) return "''";
  const PartitionSpec& p = *ds.partition;
  std::string expr;
  if (p.grain == Grain::kKey) {
    expr = TextOf(qualifier, p.column);
  } else {
    expr = absl::StrCat("substr(", TextOf(qualifier, p.column), ", 1, ",
                        PrefixLength(p.grain), ")");
    if (p.two_dimensional()) {
      expr = absl::StrCat(expr, " || '|' || ", TextOf(qualifier, p.key_column));
    }
  }
  return absl::StrCat("coalesce(", expr, ", '')");
}

absl::StatusOr<std::string> ChangeBucketOf(const DatasetSpec& ds,
                                           const std::string& partition) {
  if (!ds.partition || partition.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no bucket for partition '", partition, "' of ", ds.name));
  }
  const PartitionSpec& p = *ds.partition;
  if (p.grain == Grain::kKey) return partition;
  std::string time = partition;
  std::string key;
  if (p.two_dimensional()) {
    const size_t bar = partition.find('|');
    if (bar == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "partition '", partition, "' of ", ds.name, " is not TIME|KEY"));
    }
    time = partition.substr(0, bar);
    key = partition.substr(bar);
  }
  ASSIGN_OR_RETURN(CandidateRange range, CandidateRangeOf(p.grain, time));
  return absl::StrCat(range.lo, key);
}

absl::StatusOr<std::vector<std::string>> ChangeTriggerStatements(
    sql::Connection* conn, const DatasetSpec& ds, const std::string& epoch) {
  ASSIGN_OR_RETURN(
      sql::Result kind,
      conn->Exec("SELECT type, sql FROM main.sqlite_master WHERE name = ?1 "
                 "COLLATE NOCASE AND type IN ('table', 'view')",
                 {ds.table}));
  if (kind.rows.empty() || kind.rows[0][0].text != "table") {
    return std::vector<std::string>();
  }
  // What a REPLACE may delete: rows with the same rowid, or the same
  // values on a unique index.
  std::vector<std::string> collide;
  const bool rowid =
      conn->Exec(absl::StrCat("SELECT rowid FROM main.",
                              Dialect::Quote(ds.table), " LIMIT 0"))
          .ok();
  if (rowid) collide.push_back("_bf_c.rowid = NEW.rowid");
  ASSIGN_OR_RETURN(sql::Result indexes,
                   conn->Exec("SELECT name FROM pragma_index_list(?1, 'main') "
                              "WHERE \"unique\" = 1 ORDER BY name",
                              {ds.table}));
  for (const sql::Row& index : indexes.rows) {
    ASSIGN_OR_RETURN(
        sql::Result cols,
        conn->Exec("SELECT cid, name, coll FROM pragma_index_xinfo(?1, "
                   "'main') WHERE key = 1 ORDER BY seqno",
                   {index[0].text}));
    std::vector<std::string> equal;
    for (const sql::Row& c : cols.rows) {
      if (c[0].integer < 0 || c[1].null())
        return std::vector<std::string>();  // an expression
      const std::string col = Dialect::Quote(c[1].text);
      equal.push_back(absl::StrCat("_bf_c.", col, " = NEW.", col, " COLLATE ",
                                   Dialect::Quote(c[2].text)));
    }
    if (!equal.empty()) {
      collide.push_back(absl::StrCat("(", absl::StrJoin(equal, " AND "), ")"));
    }
  }
  std::vector<std::string> out;
  ASSIGN_OR_RETURN(
      sql::Result old,
      conn->Exec("SELECT name FROM main.sqlite_master WHERE type = 'trigger' "
                 "AND tbl_name = ?1 COLLATE NOCASE AND name LIKE "
                 "'\\_bf\\_chg\\_%' ESCAPE '\\'",
                 {ds.table}));
  for (const sql::Row& t : old.rows) {
    out.push_back(absl::StrCat("DROP TRIGGER IF EXISTS main.",
                               Dialect::Quote(t[0].text)));
  }
  const std::string table = Dialect::Quote(ds.table);
  auto name = [&](const char* what) {
    return absl::StrCat(
        "main.", Dialect::Quote(absl::StrCat("_bf_chg_", epoch, "_", what)));
  };
  out.push_back(absl::StrCat("CREATE TRIGGER ", name("i"), " AFTER INSERT ON ",
                             table, " BEGIN ", Bump(ds, "NEW."), " END"));
  out.push_back(absl::StrCat("CREATE TRIGGER ", name("u"), " AFTER UPDATE ON ",
                             table, " BEGIN ", Bump(ds, "OLD."), " ",
                             Bump(ds, "NEW."), " END"));
  out.push_back(absl::StrCat("CREATE TRIGGER ", name("d"), " AFTER DELETE ON ",
                             table, " BEGIN ", Bump(ds, "OLD."), " END"));
  if (!collide.empty()) {
    const std::string bump_collided =
        absl::StrCat("INSERT INTO ", Dialect::Quote(kChangeCountsTable),
                     " (tbl, bucket, n) SELECT ", Literal(ds.table), ", ",
                     ChangeBucketExpression(ds, "_bf_c."), ", 1 FROM ", table,
                     " AS _bf_c WHERE ", absl::StrJoin(collide, " OR "),
                     " ON CONFLICT (tbl, bucket) DO UPDATE SET n = n + 1;");
    out.push_back(absl::StrCat("CREATE TRIGGER ", name("ri"),
                               " BEFORE INSERT ON ", table, " BEGIN ",
                               bump_collided, " END"));
    out.push_back(absl::StrCat("CREATE TRIGGER ", name("ru"),
                               " BEFORE UPDATE ON ", table, " BEGIN ",
                               bump_collided, " END"));
  }
  return out;
}

absl::StatusOr<std::string> ChangeTableIdentity(sql::Connection* conn,
                                                const DatasetSpec& ds) {
  // The schema's text changes only with its version: read once per version
  // (every staging asks, and the text is the schema's rows of the table).
  ASSIGN_OR_RETURN(sql::Result v, conn->Exec("PRAGMA main.schema_version"));
  const int64_t version =
      v.rows.empty() || v.rows[0].empty() ? -1 : v.rows[0][0].integer;
  SqliteConnection::KnownIdentity& known =
      static_cast<SqliteConnection*>(conn)->identities()[ds.table];
  if (version >= 0 && known.schema_version == version) return known.identity;
  ASSIGN_OR_RETURN(sql::Result r, conn->Exec(kIdentitySql, {ds.table}));
  std::string identity;
  // Without the table's own row there is nothing to follow.
  if (!r.rows.empty() && !r.rows[0][0].null() &&
      r.rows[0][0].text.rfind("table:", 0) == 0) {
    identity = r.rows[0][0].text;
  }
  known.schema_version = version;
  known.identity = identity;
  return identity;
}

}  // namespace backfill::sqlite
