#include "server/warehouse_factory.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "openlineage/emitter.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_engine.h"
#include "storage/sqlite/sqlite_engine.h"

namespace backfill {
namespace {

namespace fs = std::filesystem;

std::string SqlitePath(const WarehouseSpec& spec, const std::string& data_dir) {
  const fs::path path(spec.path);
  return (path.is_absolute() ? path : fs::path(data_dir) / path).string();
}

std::string PostgresName(const postgres::PgDsnInfo& info) {
  return absl::StrCat(
      "postgres database ", info.dbname.empty() ? "(the user's)" : info.dbname,
      " on ", info.host.empty() ? "the local socket" : info.host, ":",
      info.port.empty() ? "5432" : info.port);
}

}  // namespace

std::string WarehouseName(const WarehouseSpec& spec,
                          const std::string& data_dir) {
  if (spec.engine == "postgres") {
    absl::StatusOr<postgres::PgDsnInfo> info = postgres::ParseDsn(spec.dsn);
    return info.ok() ? PostgresName(*info)
                     : std::string("postgres (connection string invalid)");
  }
  return SqlitePath(spec, data_dir);
}

std::string StateStoreName(const std::string& state_dsn) {
  absl::StatusOr<postgres::PgDsnInfo> info = postgres::ParseDsn(state_dsn);
  return absl::StrCat(info.ok()
                          ? PostgresName(*info)
                          : std::string("postgres (connection string invalid)"),
                      " (schema backfill_state)");
}

absl::StatusOr<OpenedWarehouse> OpenWarehouse(
    const WarehouseSpec& spec, const WarehouseOpenOptions& options) {
  OpenedWarehouse out;
  if (spec.engine == "sqlite") {
    out.name = SqlitePath(spec, options.data_dir);
    std::error_code ec;
    const fs::path absolute = fs::absolute(out.name, ec);
    out.lineage_location = ec ? out.name : absolute.string();
    absl::StatusOr<std::unique_ptr<SqliteEngine>> engine = SqliteEngine::Open(
        out.name, options.connections, options.create_if_missing);
    if (!engine.ok()) return engine.status();
    (*engine)->SetStatsPolicy(options.stats_max_age);
    out.engine = *std::move(engine);
    return out;
  }
  if (spec.engine == "postgres") {
    absl::StatusOr<postgres::PgDsnInfo> info = postgres::ParseDsn(spec.dsn);
    if (!info.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("warehouse dsn: ", info.status().message()));
    }
    if (info->has_password) {
      return absl::InvalidArgumentError(
          "warehouse dsn holds a password; remove it and give it to libpq "
          "instead (PGPASSWORD, ~/.pgpass or PGPASSFILE), so that it is "
          "never in a pipeline file");
    }
    out.is_file = false;
    out.name = PostgresName(*info);
    out.lineage_location = absl::StrCat(
        "postgres://", info->host.empty() ? "localhost" : info->host, ":",
        info->port.empty() ? "5432" : info->port);
    absl::StatusOr<std::unique_ptr<postgres::PostgresEngine>> engine =
        postgres::PostgresEngine::Open(spec.dsn, options.connections);
    if (!engine.ok()) return engine.status();
    (*engine)->SetStatsPolicy(options.stats_max_age);
    out.lineage_name_prefix = openlineage::PostgresNamePrefix(
        (*engine)->database(), (*engine)->base_schema());
    out.engine = *std::move(engine);
    return out;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("warehouse engine \"", spec.engine,
                   "\" is not supported; supported: sqlite, postgres"));
}

}  // namespace backfill
