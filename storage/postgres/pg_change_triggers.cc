#include "storage/postgres/pg_change_triggers.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"

namespace backfill::postgres {
namespace {

using sql::Dialect;

std::string Literal(std::string_view text) {
  return absl::StrCat("'", absl::StrReplaceAll(Sv(text), {{"'", "''"}}), "'");
}

constexpr char kIdentitySql[] =
    "SELECT c.oid::text || '|' || coalesce((SELECT string_agg(a.attname || "
    "':' || a.atttypid::text, ',' ORDER BY a.attnum) FROM "
    "pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND "
    "NOT a.attisdropped), '') || '|' || coalesce((SELECT string_agg(t.tgname "
    "|| ':' || t.oid::text || ':' || t.tgenabled::text || ':' || "
    "t.tgfoid::text || ':' || md5(p.prosrc), ',' ORDER BY t.tgname) FROM "
    "pg_catalog.pg_trigger t JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid "
    "WHERE t.tgrelid = c.oid AND t.tgname LIKE '\\_bf\\_chg\\_%'), '') FROM "
    "pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass($1) AND "
    "c.relkind = 'r'";

}  // namespace

absl::StatusOr<std::vector<std::string>> ChangeTriggerStatements(
    const Dialect& d, sql::Connection* conn, const DatasetSpec& ds,
    const std::string& epoch) {
  if (absl::StrContains(ds.table, "$")) return std::vector<std::string>();
  const std::string table = d.Name(d.Published(ds));
  ASSIGN_OR_RETURN(
      sql::Result kind,
      conn->Exec("SELECT c.relkind::text FROM pg_catalog.pg_class c WHERE "
                 "c.oid = pg_catalog.to_regclass($1)",
                 {table}));
  if (kind.rows.empty() || kind.rows[0][0].text != "r") {
    return std::vector<std::string>();
  }
  const sql::Relation counts = d.ChangeCounts();
  const sql::Relation tables = d.ChangeTables();
  std::vector<std::string> out;
  ASSIGN_OR_RETURN(
      sql::Result old,
      conn->Exec(
          "SELECT DISTINCT p.proname::text FROM pg_catalog.pg_trigger t JOIN "
          "pg_catalog.pg_proc p ON p.oid = t.tgfoid JOIN "
          "pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE "
          "t.tgrelid = pg_catalog.to_regclass($1) AND t.tgname LIKE "
          "'\\_bf\\_chg\\_%' AND n.nspname = $2 ORDER BY 1",
          {table, counts.schema}));
  for (const sql::Row& f : old.rows) {
    out.push_back(absl::StrCat("DROP FUNCTION IF EXISTS ",
                               Dialect::Quote(counts.schema), ".",
                               Dialect::Quote(f[0].text), "() CASCADE"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<sql::Membership> member,
                   d.MembershipOf(conn, ds, "_bf_r."));
  const std::string bucket =
      ds.partition ? absl::StrCat("coalesce(", member->Expression(), ", '')")
                   : std::string("''");
  // The rows a statement wrote, grouped by their partition columns' exact
  // values first (the membership expression then runs once per distinct
  // value, not per row), each group with a representative of its values.
  std::vector<std::string> columns;
  if (ds.partition) {
    columns.push_back(ds.partition->column);
    if (ds.partition->two_dimensional()) {
      columns.push_back(ds.partition->key_column);
    }
  }
  auto grouped = [&](const char* transition) {
    std::vector<std::string> select, by;
    for (const std::string& c : columns) {
      const std::string q = Dialect::Quote(c);
      select.push_back(absl::StrCat("min(_bf_t.", q, ") AS ", q));
      by.push_back(absl::StrCat("(_bf_t.", q, ")::text COLLATE \"C\""));
    }
    select.push_back("count(*) AS _bf_n");
    return absl::StrCat("SELECT ", absl::StrJoin(select, ", "), " FROM ",
                        transition, " AS _bf_t", by.empty() ? "" : " GROUP BY ",
                        absl::StrJoin(by, ", "));
  };
  // One upsert per statement (an UPDATE's old and new rows together), in
  // bucket order: two statements lock the counter rows they share in the
  // same order.
  auto bump = [&](std::vector<const char*> transitions) {
    std::string rows;
    for (const char* t : transitions) {
      absl::StrAppend(&rows, rows.empty() ? "" : " UNION ALL ", "SELECT ",
                      bucket, " AS _bf_b, _bf_r._bf_n FROM (", grouped(t),
                      ") AS _bf_r");
    }
    return absl::StrCat(
        "  INSERT INTO ", d.Name(counts), " AS _bf_c (tbl, bucket, n) SELECT ",
        Literal(ds.table), ", _bf_b, sum(_bf_n)::bigint FROM (", rows,
        ") AS _bf_s GROUP BY _bf_b ORDER BY _bf_b ON CONFLICT (tbl, bucket) "
        "DO UPDATE SET n = _bf_c.n + excluded.n;\n");
  };
  const std::string function =
      absl::StrCat(Dialect::Quote(counts.schema), ".",
                   Dialect::Quote(absl::StrCat("chg_", epoch)));
  out.push_back(absl::StrCat(
      "CREATE FUNCTION ", function,
      "() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = "
      "pg_catalog, pg_temp AS $bf$\nBEGIN\n"
      "IF TG_OP = 'TRUNCATE' THEN\n  UPDATE ",
      d.Name(tables),
      " SET epoch = md5(random()::text || clock_timestamp()::text) WHERE tbl "
      "= ",
      Literal(ds.table),
      ";\n  RETURN NULL;\nEND IF;\n"
      "IF TG_OP = 'INSERT' THEN\n",
      bump({"_bf_new"}), "ELSIF TG_OP = 'DELETE' THEN\n", bump({"_bf_old"}),
      "ELSE\n", bump({"_bf_new", "_bf_old"}),
      "END IF;\nRETURN NULL;\nEND\n$bf$"));
  auto name = [&](const char* what) {
    return Dialect::Quote(absl::StrCat("_bf_chg_", epoch, "_", what));
  };
  const std::pair<const char*, std::string> triggers[] = {
      {"i", "AFTER INSERT ON " + table + " REFERENCING NEW TABLE AS _bf_new"},
      {"u", "AFTER UPDATE ON " + table +
                " REFERENCING OLD TABLE AS _bf_old NEW TABLE AS _bf_new"},
      {"d", "AFTER DELETE ON " + table + " REFERENCING OLD TABLE AS _bf_old"},
      {"t", "AFTER TRUNCATE ON " + table},
  };
  for (const auto& [what, when] : triggers) {
    out.push_back(absl::StrCat("CREATE TRIGGER ", name(what), " ", when,
                               " FOR EACH STATEMENT EXECUTE FUNCTION ",
                               function, "()"));
    out.push_back(absl::StrCat("ALTER TABLE ", table, " ENABLE ALWAYS TRIGGER ",
                               name(what)));
  }
  return out;
}

absl::StatusOr<std::string> ChangeTableIdentity(const Dialect& d,
                                                sql::Connection* conn,
                                                const DatasetSpec& ds) {
  ASSIGN_OR_RETURN(sql::Result r,
                   conn->Exec(kIdentitySql, {d.Name(d.Published(ds))}));
  if (r.rows.empty() || r.rows[0][0].null()) return std::string();
  return r.rows[0][0].text;
}

}  // namespace backfill::postgres
