// OpenWarehouse, the engine factory of the composition root: what it
// refuses before it connects anywhere (a PostgreSQL connection string that
// holds a password or does not parse, an unknown engine), that a refusal
// never repeats the password, and that a missing SQLite file is NOT_FOUND
// and stays missing when it may not be created.

#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/warehouse_factory.h"

namespace backfill {
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
  opened->engine.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace backfill
