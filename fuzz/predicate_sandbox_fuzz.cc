// Fuzz target: `affected_by` predicates against the SQLite sandbox. The
// input is a predicate; when it passes CheckPredicate (the form check every
// engine runs first) it is spliced into the statement the SQLite engine
// makes of it (`SELECT rowid FROM main."t" WHERE (\n<predicate>\n)`) and
// compiled and run inside a ReadSandbox for table t, as
// SqliteEngine::PartitionsMatching does, on an in-memory database that
// also holds a table `secret`, an FTS4 table and an index, with the
// engine's bounded functions installed as on its predicate connection.
//
// Every SQL function SQLite has that is off the sandbox's allow-list is
// replaced on that connection, name and argument count, by a spy that
// fails the run if it is ever called. Invariants beyond "no crash":
//   - no function off the allow-list ever runs (no spy is called);
//   - a statement that compiles is read-only and opens no b-tree of the
//     database but t's and its index's (EXPLAIN lists every OpenRead);
//   - the database is unchanged afterwards (total_changes, and the
//     schema's and secret's contents);
//   - no input runs long (libFuzzer's -timeout): one call of a function
//     can not outlast the sandbox's time limit by much
//     (sqlite_bounded_functions.h);
//   - the PostgreSQL engine's scan of the calls (CalledNames) is
//     deterministic, gives each name once, and lower-cases unquoted names.

#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/plan/affected_by.h"
#include "fuzz/fuzz_check.h"
#include "storage/postgres/pg_allow_list.h"
#include "storage/sqlite/sqlite_bounded_functions.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_sandbox.h"

namespace {

using backfill::sqlite::Database;

constexpr int kFuzzMaxValueBytes = 64 << 10;

void Spy(sqlite3_context* context, int /*argc*/, sqlite3_value** /*argv*/) {
  const char* name = static_cast<const char*>(sqlite3_user_data(context));
  std::fprintf(stderr, "function off the allow-list ran: %s\n", name);
  FUZZ_CHECK(false && "a function off the allow-list ran");
}

struct World {
  std::unique_ptr<Database> db;
  std::set<int64_t> t_pages;  // root pages of t and its index
  std::string secret_before;
};

std::string Query(Database* db, const std::string& sql) {
  absl::StatusOr<std::string> text = db->QueryText(sql);
  FUZZ_CHECK(text.ok());
  return *text;
}

World* MakeWorld() {
  auto* world = new World;
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(":memory:");
  FUZZ_CHECK(db.ok());
  world->db = *std::move(db);
  Database* d = world->db.get();
  FUZZ_CHECK(backfill::sqlite::InstallBoundedFunctions(d).ok());
  FUZZ_CHECK(d->Exec("CREATE TABLE t (order_date TEXT, region TEXT, amount "
                     "REAL, refund REAL, tags TEXT)")
                 .ok());
  FUZZ_CHECK(d->Exec("CREATE INDEX t_region ON t (region)").ok());
  FUZZ_CHECK(d->Exec("INSERT INTO t VALUES ('2025-01-01', 'EU', 10, 0, "
                     "'[\"a\"]'), ('2025-01-02 10:00:00', 'US', 20, 5, "
                     "'{}'), (NULL, NULL, NULL, NULL, NULL)")
                 .ok());
  FUZZ_CHECK(d->Exec("CREATE TABLE secret (k TEXT, v TEXT)").ok());
  FUZZ_CHECK(d->Exec("INSERT INTO secret VALUES ('token', 's3cr3t')").ok());
  FUZZ_CHECK(d->Exec("CREATE VIRTUAL TABLE docs USING fts4(body)").ok());
  FUZZ_CHECK(d->Exec("INSERT INTO docs VALUES ('late refund')").ok());
  for (const char* name : {"t", "t_region"}) {
    absl::StatusOr<int64_t> page = d->QueryInt(absl::StrCat(
        "SELECT rootpage FROM sqlite_schema WHERE name = '", name, "'"));
    FUZZ_CHECK(page.ok());
    world->t_pages.insert(*page);
  }
  world->secret_before =
      Query(d, "SELECT group_concat(k || v) FROM secret") +
      Query(d, "SELECT group_concat(sql) FROM sqlite_schema");
  // The spies, one per (name, argument count) off the allow-list.
  sqlite3_stmt* list = nullptr;
  FUZZ_CHECK(
      sqlite3_prepare_v2(d->raw(),
                         "SELECT DISTINCT name, narg FROM pragma_function_list",
                         -1, &list, nullptr) == SQLITE_OK);
  std::vector<std::pair<std::string, int>> off;
  while (sqlite3_step(list) == SQLITE_ROW) {
    std::string name =
        reinterpret_cast<const char*>(sqlite3_column_text(list, 0));
    if (!backfill::sqlite::IsAllowedFunction(name)) {
      off.emplace_back(std::move(name), sqlite3_column_int(list, 1));
    }
  }
  sqlite3_finalize(list);
  FUZZ_CHECK(!off.empty());
  for (const auto& [name, narg] : off) {
    // The spy's copy of its name belongs to the connection.
    FUZZ_CHECK(sqlite3_create_function_v2(d->raw(), name.c_str(), narg,
                                          SQLITE_UTF8, strdup(name.c_str()),
                                          &Spy, nullptr, nullptr,
                                          &free) == SQLITE_OK);
  }
  return world;
}

void CheckOpens(World* world, const std::string& sql) {
  // EXPLAIN compiles the same statement under the same sandbox.
  Database* d = world->db.get();
  sqlite3_stmt* q = nullptr;
  if (sqlite3_prepare_v2(d->raw(), absl::StrCat("EXPLAIN ", sql).c_str(), -1,
                         &q, nullptr) != SQLITE_OK) {
    sqlite3_finalize(q);
    return;
  }
  while (sqlite3_step(q) == SQLITE_ROW) {
    const std::string op =
        reinterpret_cast<const char*>(sqlite3_column_text(q, 1));
    if (op == "OpenRead" || op == "OpenWrite" || op == "ReopenIdx") {
      const int64_t page = sqlite3_column_int64(q, 3);
      const int64_t database = sqlite3_column_int64(q, 4);
      FUZZ_CHECK(op != "OpenWrite");
      FUZZ_CHECK(database != 0 || world->t_pages.count(page) > 0);
    }
  }
  sqlite3_finalize(q);
}

void RunSqlite(World* world, const std::string& predicate) {
  Database* d = world->db.get();
  const int changes_before = sqlite3_total_changes(d->raw());
  const std::string sql =
      absl::StrCat("SELECT rowid FROM main.\"t\" WHERE (\n", predicate, "\n)");
  {
    backfill::sqlite::ReadSandbox sandbox(d, "t", absl::Milliseconds(50));
    // Within the sandbox, a length limit of 64 KiB instead of its 4 MiB
    // (the sandbox puts the connection's own back): under AddressSanitizer
    // every realloc copies, and SQLite grows a string past half of its
    // limit a few bytes at a time, so one value near 4 MiB takes minutes
    // here (hundredths of a second in the daemon). The paths are the same.
    sqlite3_limit(d->raw(), SQLITE_LIMIT_LENGTH, kFuzzMaxValueBytes);
    absl::StatusOr<backfill::sqlite::Statement> q = d->Prepare(sql);
    if (q.ok()) {
      FUZZ_CHECK(q->IsReadOnly());
      for (int rows = 0; rows < 100; ++rows) {
        absl::StatusOr<bool> row = q->Step();
        if (!row.ok() || !*row) break;
      }
    }
    if (q.ok()) CheckOpens(world, sql);
  }
  FUZZ_CHECK(sqlite3_total_changes(d->raw()) == changes_before);
  FUZZ_CHECK(Query(d, "SELECT group_concat(k || v) FROM secret") +
                 Query(d, "SELECT group_concat(sql) FROM sqlite_schema") ==
             world->secret_before);
}

void RunPgScan(std::string_view predicate) {
  using backfill::postgres::CalledName;
  absl::StatusOr<std::vector<CalledName>> first =
      backfill::postgres::CalledNames(predicate);
  absl::StatusOr<std::vector<CalledName>> again =
      backfill::postgres::CalledNames(predicate);
  FUZZ_CHECK(first.ok() == again.ok());
  if (!first.ok()) return;
  FUZZ_CHECK(*first == *again);
  for (size_t i = 0; i < first->size(); ++i) {
    const CalledName& call = (*first)[i];
    if (!call.quoted) {
      FUZZ_CHECK(call.name == absl::AsciiStrToLower(call.name));
      FUZZ_CHECK(!call.name.empty());
    }
    for (size_t j = i + 1; j < first->size(); ++j) {
      FUZZ_CHECK(!(call == (*first)[j]));
    }
  }
  absl::StatusOr<std::string> refused =
      backfill::postgres::FirstRefusedCall(predicate);
  FUZZ_CHECK(refused.ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* const world = MakeWorld();
  const std::string predicate(reinterpret_cast<const char*>(data), size);
  if (!backfill::CheckPredicate(predicate).ok()) return 0;
  RunSqlite(world, predicate);
  RunPgScan(predicate);
  return 0;
}
