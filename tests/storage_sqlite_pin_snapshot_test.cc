// The snapshot of a pinned input on SQLite (storage/sqlite/
// sqlite_pin_snapshot.h): declared like its table (columns, declared
// types, primary key, WITHOUT ROWID) with the table's plain indexes, so
// that a join on it looks rows up as on the table; the same rows, checked
// with plain SQL both ways; tables whose definition cannot be repeated are
// copied as before.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_connection.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_dialect.h"
#include "storage/sqlite/sqlite_pin_snapshot.h"

namespace backfill {
namespace storage_sqlite_pin_snapshot_test {
namespace {

using sqlite::Database;
using ::testing::HasSubstr;
using ::testing::Not;

class PinSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = Database::Open(":memory:");
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    conn_ = std::make_unique<sqlite::SqliteConnection>(db_.get(), &dialect_);
  }

  // Copies main.`table` into main.snap_`table`; the statements run.
  std::vector<std::string> Pin(const std::string& table) {
    auto statements = sqlite::PinSnapshotStatements(
        conn_.get(), {"main", table}, {"main", "snap_" + table});
    EXPECT_TRUE(statements.ok()) << statements.status();
    if (!statements.ok()) return {};
    for (const std::string& s : *statements) {
      EXPECT_TRUE(db_->Exec(s).ok()) << s;
    }
    return *statements;
  }
  std::string Text(const std::string& sql) {
    auto text = db_->QueryText(sql);
    EXPECT_TRUE(text.ok()) << text.status() << " in " << sql;
    return text.value_or("");
  }
  // Rows of `a` not in `b` and of `b` not in `a`, by plain SQL.
  std::string Difference(const std::string& a, const std::string& b) {
    return Text(absl::StrCat("SELECT (SELECT COUNT(*) FROM (SELECT * FROM ", a,
                             " EXCEPT SELECT * FROM ", b,
                             ")) + (SELECT COUNT(*) FROM (SELECT * FROM ", b,
                             " EXCEPT SELECT * FROM ", a, "))"));
  }
  std::string Plan(const std::string& sql) {
    std::string plan;
    auto q = db_->Prepare(absl::StrCat("EXPLAIN QUERY PLAN ", sql));
    EXPECT_TRUE(q.ok()) << q.status();
    if (!q.ok()) return plan;
    while (true) {
      auto row = q->Step();
      if (!row.ok() || !*row) break;
      absl::StrAppend(&plan, q->ColumnText(3), "\n");
    }
    return plan;
  }

  sqlite::SqliteDialect dialect_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<sqlite::SqliteConnection> conn_;
};

TEST_F(PinSnapshotTest, AnIntegerPrimaryKeyStaysTheRowid) {
  ASSERT_TRUE(db_->Exec("CREATE TABLE dim (id INTEGER PRIMARY KEY, region "
                        "TEXT NOT NULL, score REAL, code VARCHAR(8) UNIQUE);"
                        "CREATE INDEX dim_region ON dim (region COLLATE "
                        "NOCASE DESC, score);"
                        "CREATE INDEX dim_expr ON dim (lower(region));"
                        "CREATE INDEX dim_part ON dim (score) WHERE score > 0;"
                        "CREATE TABLE facts (dim_id INTEGER, v REAL);")
                  .ok());
  ASSERT_TRUE(db_->Exec("INSERT INTO dim VALUES (1, 'north', 1.5, 'a'), (7, "
                        "'South', NULL, NULL), (9, 'east', -2, 'c'), (12, "
                        "'x''y', 3, '12');"
                        "INSERT INTO facts VALUES (1, 1), (7, 2), (9, 3);")
                  .ok());
  Pin("dim");
  EXPECT_EQ(Difference("dim", "snap_dim"), "0");
  // The same declared types (the same affinities) and key.
  EXPECT_EQ(Text("SELECT group_concat(name || ':' || type || ':' || pk, ' ') "
                 "FROM pragma_table_info('snap_dim')"),
            "id:INTEGER:1 region:TEXT:0 score:REAL:0 code:VARCHAR(8):0");
  // The rowid is the key, as in the table.
  EXPECT_EQ(Text("SELECT COUNT(*) FROM snap_dim WHERE rowid = id"), "4");
  EXPECT_THAT(Plan("SELECT f.v, d.region FROM facts f JOIN snap_dim d ON "
                   "d.id = f.dim_id"),
              HasSubstr("USING INTEGER PRIMARY KEY"));
  // The plain indexes, with their collations and orders; not the
  // expression or the partial one.
  EXPECT_EQ(Text("SELECT COUNT(*) FROM pragma_index_list('snap_dim')"), "2");
  EXPECT_THAT(Plan("SELECT code FROM snap_dim WHERE code = 'a'"),
              HasSubstr("USING COVERING INDEX"));
  EXPECT_THAT(Plan("SELECT id FROM snap_dim WHERE region = 'NORTH' COLLATE "
                   "NOCASE"),
              HasSubstr("USING COVERING INDEX"));
  EXPECT_EQ(Text("SELECT group_concat(coll || desc) FROM "
                 "pragma_index_xinfo((SELECT name FROM "
                 "pragma_index_list('snap_dim') ORDER BY name LIMIT 1 OFFSET "
                 "1)) WHERE key = 1"),
            "NOCASE1,BINARY0");
}

TEST_F(PinSnapshotTest, AWithoutRowidTableAndACompositeKeyAreKept) {
  ASSERT_TRUE(db_->Exec("CREATE TABLE rates (cur TEXT, day TEXT, rate REAL, "
                        "PRIMARY KEY (day, cur)) WITHOUT ROWID;"
                        "INSERT INTO rates VALUES ('EUR', '2025-01-01', 1.1), "
                        "('USD', '2025-01-01', 1), ('EUR', '2025-01-02', "
                        "1.2);")
                  .ok());
  Pin("rates");
  EXPECT_EQ(Difference("rates", "snap_rates"), "0");
  EXPECT_EQ(Text("SELECT wr FROM pragma_table_list('snap_rates')"), "1");
  EXPECT_EQ(Text("SELECT group_concat(name || pk, ' ') FROM "
                 "pragma_table_info('snap_rates')"),
            "cur2 day1 rate0");
}

TEST_F(PinSnapshotTest, WhatCannotBeDeclaredAgainIsCopiedAsBefore) {
  ASSERT_TRUE(db_->Exec("CREATE TABLE gen (a INTEGER PRIMARY KEY, b INTEGER, "
                        "c INTEGER GENERATED ALWAYS AS (b * 2));"
                        "INSERT INTO gen (a, b) VALUES (1, 2), (2, 5);"
                        "CREATE TABLE plain (x, y);"
                        "INSERT INTO plain VALUES (1, 'a'), (1, 'a'), "
                        "(NULL, 3);")
                  .ok());
  std::vector<std::string> gen = Pin("gen");
  ASSERT_EQ(gen.size(), 1u);
  EXPECT_THAT(gen[0], HasSubstr("AS SELECT * FROM"));
  EXPECT_EQ(Difference("gen", "snap_gen"), "0");
  // No declared types, no key: duplicates and NULLs copied as they are.
  std::vector<std::string> plain = Pin("plain");
  EXPECT_THAT(plain[0], Not(HasSubstr("AS SELECT")));
  EXPECT_EQ(Text("SELECT COUNT(*) FROM snap_plain"), "3");
  EXPECT_EQ(Difference("plain", "snap_plain"), "0");
  EXPECT_EQ(Text("SELECT typeof(x) || typeof(y) FROM snap_plain WHERE rowid "
                 "= 1"),
            "integertext");
}

}  // namespace
}  // namespace storage_sqlite_pin_snapshot_test
}  // namespace backfill
