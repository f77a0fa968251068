// OpenWarehouse: the engine factory of the composition root. It opens the
// warehouse a pipeline's `warehouse:` names, with the engine it names
// (`sqlite`: a file under --data-dir; `postgres`: a server reached by a
// libpq connection string), and describes it for messages and lineage
// without ever repeating a password.
//
// Ownership: the caller owns the returned engine. Stateless functions;
// thread-safe.

#ifndef BACKFILL_SERVER_WAREHOUSE_FACTORY_H_
#define BACKFILL_SERVER_WAREHOUSE_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/catalog.h"
#include "core/ports/engine.h"

namespace backfill {

struct WarehouseOpenOptions {
  std::string data_dir;  // a relative SQLite path is under it
  int connections = 4;   // the engine's connection pool
  // SQLite only: create the file when it does not exist (false when the
  // state store records publications into it).
  bool create_if_missing = true;
  absl::Duration stats_max_age = absl::Hours(1);
};

struct OpenedWarehouse {
  std::unique_ptr<Engine> engine;
  // How messages name the warehouse: the SQLite file's path, or
  // "postgres database D on HOST:PORT" (never a password).
  std::string name;
  // OpenLineage's dataset namespace location for it: the file's absolute
  // path for SQLite (with the host prefixed by the caller), or
  // "postgres://HOST:PORT" for PostgreSQL.
  std::string lineage_location;
  // What precedes a table's name in its OpenLineage dataset name: "" for
  // SQLite, "{database}.{schema}." for PostgreSQL (the database and schema
  // the engine's connections resolve tables in).
  std::string lineage_name_prefix;
  bool is_file = true;  // SQLite: `name` is a path
};

// NOT_FOUND (SQLite) when the file does not exist and `create_if_missing`
// is false. INVALID_ARGUMENT for a connection string that does not parse
// or that holds a password (passwords come from PGPASSWORD, ~/.pgpass or
// PGPASSFILE). Otherwise the engine's own errors, prefixed with the
// warehouse's name.
absl::StatusOr<OpenedWarehouse> OpenWarehouse(
    const WarehouseSpec& spec, const WarehouseOpenOptions& options);

// The warehouse's name for messages without opening it (as OpenWarehouse
// names it).
std::string WarehouseName(const WarehouseSpec& spec,
                          const std::string& data_dir);

// How messages name a state store in PostgreSQL (--state-dsn), after
// "state store ": "postgres database D on HOST:PORT (schema
// backfill_state)", never a password.
std::string StateStoreName(const std::string& state_dsn);

}  // namespace backfill

#endif  // BACKFILL_SERVER_WAREHOUSE_FACTORY_H_
