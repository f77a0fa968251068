// OpenWarehouse, the engine factory of the composition root: what it
// refuses before it connects anywhere (a PostgreSQL connection string that
// holds a password or does not parse, an unknown engine), that a refusal
// never repeats the password, that a missing SQLite file is NOT_FOUND
// and stays missing when it may not be created, and how OpenLineage names
// each warehouse's tables (on a real PostgreSQL server for PostgreSQL).

#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/warehouse_factory.h"
#include "storage/postgres/pg_connection.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill {
namespace server_warehouse_factory_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

WarehouseSpec Postgres(const std::string& dsn) {
  WarehouseSpec spec;
  spec.engine = "postgres";
  spec.path.clear();
  spec.dsn = dsn;
  return spec;
}

TEST(WarehouseFactoryTest, ADsnWithAPasswordIsRefusedWithoutRepeatingIt) {
  for (const std::string& dsn :
       {std::string("host=127.0.0.1 port=1 dbname=w user=u password=s3cr3t"),
        std::string("postgresql://u:s3cr3t@127.0.0.1:1/w")}) {
    SCOPED_TRACE(dsn);
    absl::StatusOr<OpenedWarehouse> opened =
        OpenWarehouse(Postgres(dsn), WarehouseOpenOptions{});
    ASSERT_FALSE(opened.ok());
    EXPECT_EQ(opened.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(opened.status().message(), HasSubstr("holds a password"));
    EXPECT_THAT(opened.status().message(), HasSubstr("PGPASSWORD"));
    EXPECT_THAT(opened.status().message(), Not(HasSubstr("s3cr3t")));
    EXPECT_THAT(WarehouseName(Postgres(dsn), "/data"),
                Not(HasSubstr("s3cr3t")));
  }
}

TEST(WarehouseFactoryTest, ADsnThatDoesNotParseOrAnUnknownEngineIsRefused) {
  absl::StatusOr<OpenedWarehouse> opened =
      OpenWarehouse(Postgres("host='unterminated"), WarehouseOpenOptions{});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(opened.status().message(), HasSubstr("does not parse"));

  WarehouseSpec oracle;
  oracle.engine = "oracle";
  opened = OpenWarehouse(oracle, WarehouseOpenOptions{});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(opened.status().message(),
              HasSubstr("supported: sqlite, postgres"));
}

TEST(WarehouseFactoryTest, PostgresIsNamedByDatabaseAndServer) {
  EXPECT_EQ(WarehouseName(Postgres("host=db.internal port=6543 dbname=a "
                                   "user=u"),
                          "/data"),
            "postgres database a on db.internal:6543");
}

TEST(WarehouseFactoryTest, AMissingSqliteFileIsNotFoundAndNotCreated) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      absl::StrCat("warehouse_factory_test_", ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  WarehouseSpec spec;  // sqlite, warehouse.db
  WarehouseOpenOptions options;
  options.data_dir = dir.string();
  options.create_if_missing = false;
  absl::StatusOr<OpenedWarehouse> opened = OpenWarehouse(spec, options);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kNotFound)
      << opened.status();
  EXPECT_FALSE(std::filesystem::exists(dir / "warehouse.db"));

  options.create_if_missing = true;
  opened = OpenWarehouse(spec, options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->name, (dir / "warehouse.db").string());
  EXPECT_NE(opened->engine, nullptr);
  // OpenLineage: the file's path (the daemon adds the host); tables by
  // their bare names.
  EXPECT_EQ(opened->lineage_location, (dir / "warehouse.db").string());
  EXPECT_EQ(opened->lineage_name_prefix, "");
  opened->engine.reset();
  std::filesystem::remove_all(dir);
}

// OpenLineage's naming spec for PostgreSQL: namespace
// postgres://HOST:PORT, datasets DATABASE.SCHEMA.TABLE, with the database
// and the schema the connections resolve tables in (here a schema the dsn
// puts first on the search_path, not `public`).
TEST(WarehouseFactoryTest, PostgresTablesAreNamedByDatabaseAndSchema) {
  auto server = testing::PostgresTestServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  {
    auto admin = postgres::PgConnection::Connect((*server)->Dsn());
    ASSERT_TRUE(admin.ok()) << admin.status();
    ASSERT_TRUE((*admin)->Exec("CREATE DATABASE sales").ok());
    auto sales = postgres::PgConnection::Connect((*server)->Dsn("sales"));
    ASSERT_TRUE(sales.ok()) << sales.status();
    ASSERT_TRUE((*sales)->Exec("CREATE SCHEMA mart").ok());
  }
  absl::StatusOr<OpenedWarehouse> opened = OpenWarehouse(
      Postgres((*server)->Dsn("sales") + " options='-c search_path=mart'"),
      WarehouseOpenOptions{});
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->lineage_location,
            absl::StrCat("postgres://127.0.0.1:", (*server)->port()));
  EXPECT_EQ(opened->lineage_name_prefix, "sales.mart.");
  opened->engine.reset();
}

}  // namespace
}  // namespace server_warehouse_factory_test
}  // namespace backfill
