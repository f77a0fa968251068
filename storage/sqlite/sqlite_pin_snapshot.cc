#include "storage/sqlite/sqlite_pin_snapshot.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"

namespace backfill::sqlite {
namespace {

using sql::Cell;
using sql::Param;
using sql::Relation;
using sql::Result;

std::string Quote(std::string_view name) { return sql::Dialect::Quote(name); }

std::string Name(const Relation& r) {
  return absl::StrCat(Quote(r.schema), ".", Quote(r.name));
}

// A declared type SQLite accepted and that reads back the same when
// written again: words, numbers, parentheses, commas, signs and spaces.
bool PlainType(const std::string& type) {
  for (char c : type) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("_ (),+-.").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

std::vector<std::string> CopyAsSelect(const Relation& table,
                                      const Relation& snapshot) {
  return {absl::StrCat("CREATE TABLE ", Name(snapshot), " AS SELECT * FROM ",
                       Name(table))};
}

}  // namespace

absl::StatusOr<std::vector<std::string>> PinSnapshotStatements(
    sql::Connection* conn, const Relation& table, const Relation& snapshot) {
  // Columns: name, declared type, position in the primary key, and
  // whether hidden (generated columns are: they are left to AS SELECT).
  ASSIGN_OR_RETURN(
      Result columns,
      conn->Exec("SELECT name, type, pk, hidden FROM pragma_table_xinfo(?1, "
                 "?2) ORDER BY cid",
                 {Param(table.name), Param(table.schema)}));
  if (columns.rows.empty()) return CopyAsSelect(table, snapshot);
  std::vector<std::string> definitions;
  std::map<int64_t, std::string> primary_key;  // position -> column
  for (const sql::Row& c : columns.rows) {
    if (c[3].integer != 0 || !PlainType(c[1].text)) {
      return CopyAsSelect(table, snapshot);
    }
    definitions.push_back(absl::StrCat(
        Quote(c[0].text), c[1].text.empty() ? "" : " ", c[1].text));
    if (c[2].integer > 0) primary_key[c[2].integer] = Quote(c[0].text);
  }
  if (!primary_key.empty()) {
    std::vector<std::string> key;
    for (const auto& [position, column] : primary_key) key.push_back(column);
    definitions.push_back(
        absl::StrCat("PRIMARY KEY (", absl::StrJoin(key, ", "), ")"));
  }
  ASSIGN_OR_RETURN(
      Result list,
      conn->Exec("SELECT wr FROM pragma_table_list(?1) WHERE schema = ?2",
                 {Param(table.name), Param(table.schema)}));
  const bool without_rowid = !list.rows.empty() && list.rows[0][0].integer;
  std::vector<std::string> out = {absl::StrCat(
      "CREATE TABLE ", Name(snapshot), " (", absl::StrJoin(definitions, ", "),
      ")", without_rowid ? " WITHOUT ROWID" : "")};
  out.push_back(absl::StrCat("INSERT INTO ", Name(snapshot), " SELECT * FROM ",
                             Name(table)));

  // The table's indexes on plain columns (CREATE INDEX and UNIQUE
  // constraints; the primary key is declared above), not unique here: the
  // copy holds the table's rows, which already satisfy them.
  ASSIGN_OR_RETURN(
      Result indexes,
      conn->Exec("SELECT name FROM pragma_index_list(?1, ?2) WHERE origin IN "
                 "('c', 'u') AND partial = 0 ORDER BY seq DESC",
                 {Param(table.name), Param(table.schema)}));
  int n = 0;
  for (const sql::Row& index : indexes.rows) {
    ASSIGN_OR_RETURN(
        Result keys,
        conn->Exec("SELECT cid, name, desc, coll FROM pragma_index_xinfo(?1, "
                   "?2) WHERE key = 1 ORDER BY seqno",
                   {Param(index[0].text), Param(table.schema)}));
    std::vector<std::string> terms;
    bool plain = !keys.rows.empty();
    for (const sql::Row& k : keys.rows) {
      if (k[0].integer < 0 || k[1].null()) {  // an expression, or the rowid
        plain = false;
        break;
      }
      terms.push_back(absl::StrCat(Quote(k[1].text), " COLLATE ",
                                   Quote(k[3].text),
                                   k[2].integer ? " DESC" : ""));
    }
    if (!plain) continue;
    out.push_back(absl::StrCat("CREATE INDEX ", Quote(snapshot.schema), ".",
                               Quote(absl::StrCat(snapshot.name, "_i", ++n)),
                               " ON ", Quote(snapshot.name), " (",
                               absl::StrJoin(terms, ", "), ")"));
  }
  return out;
}

}  // namespace backfill::sqlite
