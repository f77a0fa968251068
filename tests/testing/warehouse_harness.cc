#include "tests/testing/warehouse_harness.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_engine.h"

namespace backfill::testing {

std::string WarehouseHarness::Quote(const std::string& name) {
  return absl::StrCat("\"", absl::StrReplaceAll(name, {{"\"", "\"\""}}), "\"");
}

absl::StatusOr<std::unique_ptr<SqliteWarehouseHarness>>
SqliteWarehouseHarness::Create() {
  std::string base;
  if (const char* tmp = std::getenv("TEST_TMPDIR"); tmp != nullptr && *tmp) {
    base = tmp;
  } else {
    std::error_code ec;
    base = std::filesystem::temp_directory_path(ec).string();
    if (ec) base = "/tmp";
  }
  std::string tmpl = absl::StrCat(base, "/warehouse_XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("mkdtemp ", tmpl, ": ", std::strerror(errno)));
  }
  std::unique_ptr<SqliteWarehouseHarness> h(new SqliteWarehouseHarness());
  h->dir_ = tmpl;
  h->path_ = h->dir_ + "/warehouse.db";
  auto db = sqlite::Database::Open(h->path_);
  if (!db.ok()) return db.status();
  h->db_ = *std::move(db);
  absl::Status opened = h->Reopen(kDefaultConnections);
  if (!opened.ok()) return opened;
  return h;
}

SqliteWarehouseHarness::~SqliteWarehouseHarness() {
  engine_.reset();
  db_.reset();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

Engine* SqliteWarehouseHarness::engine() { return engine_.get(); }

absl::Status SqliteWarehouseHarness::Reopen(int connections) {
  engine_.reset();
  connections_ = connections;
  auto engine = SqliteEngine::Open(path_, connections);
  if (!engine.ok()) return engine.status();
  engine_ = *std::move(engine);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Engine>> SqliteWarehouseHarness::OpenAnother() {
  auto engine = SqliteEngine::Open(path_, 1);
  if (!engine.ok()) return engine.status();
  return std::unique_ptr<Engine>(*std::move(engine));
}

absl::Status SqliteWarehouseHarness::Exec(const std::string& sql) {
  return db_->Exec(sql);
}

absl::StatusOr<std::vector<WarehouseHarness::Row>>
SqliteWarehouseHarness::Query(const std::string& sql) {
  auto q = db_->Prepare(sql);
  if (!q.ok()) return q.status();
  std::vector<Row> rows;
  while (true) {
    auto more = q->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    Row row;
    for (int i = 0; i < q->ColumnCount(); ++i) {
      if (q->ColumnIsNull(i)) {
        row.push_back(std::nullopt);
      } else {
        row.push_back(q->ColumnText(i));
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

absl::StatusOr<bool> SqliteWarehouseHarness::Exists(
    const std::string& relation) {
  // A statement that runs reads the schema another connection changed
  // since; a prepare alone trusts the one the connection last read.
  if (auto read = db_->QueryInt("SELECT COUNT(*) FROM sqlite_master");
      !read.ok()) {
    return read.status();
  }
  auto q = db_->Prepare(absl::StrCat("SELECT 1 FROM ", relation, " LIMIT 0"));
  if (q.ok()) return true;
  if (absl::StrContains(q.status().message(), "no such table")) return false;
  return q.status();
}

absl::StatusOr<std::vector<TableColumn>> SqliteWarehouseHarness::Columns(
    const std::string& table) {
  auto q = db_->Prepare(
      "SELECT name, type, pk FROM pragma_table_info(?1) ORDER BY cid");
  if (!q.ok()) return q.status();
  if (absl::Status s = q->BindText(1, table); !s.ok()) return s;
  std::vector<TableColumn> columns;
  while (true) {
    auto more = q->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    columns.push_back({q->ColumnText(0),
                       absl::AsciiStrToUpper(q->ColumnText(1)),
                       static_cast<int>(q->ColumnInt(2))});
  }
  return columns;
}

std::string SqliteWarehouseHarness::StagingTable(
    const std::string& job_id, const std::string& dataset) const {
  return Quote(SqliteEngine::StageTable(job_id, dataset));
}

std::string SqliteWarehouseHarness::RollbackCopyTable(
    const std::string& job_id, const std::string& dataset) const {
  return Quote(SqliteEngine::PrevTable(job_id, dataset));
}

absl::StatusOr<std::vector<std::string>> SqliteWarehouseHarness::StagingObjects(
    const std::string& job_id) {
  // Each artifact's name for the dataset "" is the prefix of the job's.
  auto q = db_->Prepare(
      "SELECT name FROM sqlite_schema WHERE type = 'table' AND ("
      "substr(name, 1, length(?1)) = ?1 OR substr(name, 1, length(?2)) = ?2 "
      "OR substr(name, 1, length(?3)) = ?3 OR "
      "substr(name, 1, length(?4)) = ?4) ORDER BY name");
  if (!q.ok()) return q.status();
  const std::string prefixes[] = {SqliteEngine::StageTable(job_id, ""),
                                  SqliteEngine::PartsTable(job_id, ""),
                                  SqliteEngine::KeysTable(job_id, ""),
                                  SqliteEngine::PinTable(job_id, "")};
  for (int i = 0; i < 4; ++i) {
    if (absl::Status s = q->BindText(i + 1, prefixes[i]); !s.ok()) return s;
  }
  std::vector<std::string> names;
  while (true) {
    auto more = q->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    names.push_back(q->ColumnText(0));
  }
  return names;
}

absl::Status SqliteWarehouseHarness::AddLegacyPublications(
    const std::vector<std::string>& jobs) {
  engine_.reset();
  std::string sql =
      "DROP TABLE IF EXISTS _bf_publications; CREATE TABLE _bf_publications "
      "(job_id TEXT PRIMARY KEY, published_at INTEGER NOT NULL);";
  for (const std::string& job : jobs) {
    absl::StrAppend(&sql, "INSERT INTO _bf_publications VALUES ('",
                    absl::StrReplaceAll(job, {{"'", "''"}}), "', 1);");
  }
  if (absl::Status s = db_->Exec(sql); !s.ok()) return s;
  return Reopen(connections_);
}

std::string SqliteWarehouseHarness::RecordsTable(
    const std::string& which) const {
  return Quote(absl::StrCat("_bf_", which));
}

void SqliteWarehouseHarness::SetPredicateTimeout(absl::Duration timeout) {
  engine_->SetPredicateTimeout(timeout);
}

std::string SqliteWarehouseHarness::ExactText(const std::string& expr) const {
  return absl::StrCat("(typeof(", expr, ") || ' ' || quote(", expr, "))");
}

std::string SqliteWarehouseHarness::JsonArrayLength(
    const std::string& json) const {
  return absl::StrCat("json_array_length(", json, ")");
}

std::string SqliteWarehouseHarness::JsonArrayElements(
    const std::string& json) const {
  return absl::StrCat("SELECT value FROM json_each(", json, ")");
}

WarehouseHarnessFactory SqliteWarehouse() {
  return {SqliteWarehouseHarness::kName,
          []() -> absl::StatusOr<std::unique_ptr<WarehouseHarness>> {
            auto h = SqliteWarehouseHarness::Create();
            if (!h.ok()) return h.status();
            return std::unique_ptr<WarehouseHarness>(*std::move(h));
          }};
}

}  // namespace backfill::testing
