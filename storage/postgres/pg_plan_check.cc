#include "storage/postgres/pg_plan_check.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "storage/postgres/pg_allow_list.h"

namespace backfill::postgres {

absl::StatusOr<std::string> RefusedByPlan(
    PgConnection* conn, const PgValue& plan_json,
    const std::function<bool(const std::string&, const std::string&)>& may_read,
    const std::set<std::string>& engine_functions) {
  // A node's schema sits beside its relation name; read them together.
  ASSIGN_OR_RETURN(
      PgResult scanned,
      conn->Exec("SELECT DISTINCT n ->> 'Schema', n ->> 'Relation Name' "
                 "FROM jsonb_path_query($1::jsonb, "
                 "'strict $.** ? (exists (@.\"Relation Name\"))') AS n",
                 {plan_json}));
  for (const std::vector<PgValue>& row : scanned.rows) {
    if (!may_read(row[0].value_or(""), row[1].value_or(""))) {
      return absl::StrCat("reads table ", row[0].value_or("?"), ".",
                          row[1].value_or("?"));
    }
  }
  // Functions it calls: names before '(' in the expressions PostgreSQL
  // printed, with literals and type modifiers taken out first. PostgreSQL
  // quotes a name that is not all lower case: a quoted name is looked up
  // as it is written. Operators: the runs of operator characters that name
  // only operators of the database's own (a symbol PostgreSQL also has
  // built in, such as =, cannot be told apart in the printed plan).
  ASSIGN_OR_RETURN(PgResult calls, conn->Exec(
                                       R"sql(
WITH e AS (
  SELECT regexp_replace(
           regexp_replace(v #>> '{}', '''([^'']|'''')*''', '''''', 'g'),
           '::[a-z ]+\([0-9, ]*\)', '', 'g') AS text
  FROM jsonb_path_query($1::jsonb, 'strict $.** ? (@.type() == "string")') AS v
), n AS (
  SELECT DISTINCT coalesce(lower(m[1]), replace(m[2], '""', '"')) AS name
  FROM e, regexp_matches(e.text, '(?:([A-Za-z_][A-Za-z0-9_$]*)|"((?:[^"]|"")+)")\s*\(', 'g') AS m
), o AS (
  SELECT DISTINCT m[1] AS name
  FROM e, regexp_matches(e.text, '([-+*/<>=~!@#%^&|`?]+)', 'g') AS m
)
SELECT name,
       EXISTS (SELECT 1 FROM pg_catalog.pg_proc p WHERE p.proname = n.name),
       EXISTS (SELECT 1 FROM pg_catalog.pg_proc p WHERE p.proname = n.name AND p.oid >= 16384),
       false
FROM n
UNION ALL
SELECT name, true, true, true FROM o
WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_operator p
              WHERE p.oprname = o.name AND p.oid >= 16384)
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_operator p
                  WHERE p.oprname = o.name AND p.oid < 16384)
ORDER BY 1)sql",
                                       {plan_json}));
  for (const std::vector<PgValue>& row : calls.rows) {
    const std::string name = row[0].value_or("");
    if (row[3].value_or("f") == "t") {
      return absl::StrCat("uses operator ", name,
                          ", which is not built into PostgreSQL");
    }
    if (IsPgKeyword(name) || name == "normalize" || name == "collation" ||
        engine_functions.count(name) > 0) {
      continue;
    }
    if (row[2].value_or("f") == "t") {
      return absl::StrCat("calls function ", name,
                          ", which is not built into PostgreSQL");
    }
    if (row[1].value_or("f") == "t" && !IsAllowedPgFunction(name)) {
      return absl::StrCat("calls function ", name,
                          ", which is not on the allow-list of functions");
    }
  }
  return std::string();
}

}  // namespace backfill::postgres
