#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/model/catalog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_catalog_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

DatasetSpec Source(const std::string& name, Grain grain = Grain::kDay) {
  DatasetSpec d;
  d.name = name;
  d.kind = DatasetKind::kSource;
  d.table = name;
  if (grain != Grain::kNone) {
    d.partition = PartitionSpec{"ds", grain, {}};
    if (grain == Grain::kKey) d.partition->keys = {"eu", "us"};
  }
  d.file = "p.yaml";
  d.line = 1;
  return d;
}

DatasetSpec Derived(const std::string& name, std::vector<UpstreamEdge> upstream,
                    Grain grain = Grain::kDay) {
  DatasetSpec d = Source(name, grain);
  d.kind = DatasetKind::kDerived;
  d.upstream = std::move(upstream);
  d.transform = "SELECT ds, 1 AS n FROM t WHERE ds >= :partition_start";
  d.columns = {{"ds", "TEXT"}, {"n", "INTEGER"}};
  d.line = 10;
  return d;
}

std::vector<std::string> Names(const Catalog& c) {
  std::vector<std::string> out;
  for (const DatasetSpec& d : c.datasets()) out.push_back(d.name);
  return out;
}

std::string BuildError(std::vector<DatasetSpec> ds) {
  absl::StatusOr<Catalog> c = Catalog::Build(std::move(ds), WarehouseSpec{});
  EXPECT_FALSE(c.ok());
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

TEST(CatalogTest, NamesOfEnums) {
  EXPECT_STREQ(DatasetKindName(DatasetKind::kSource), "source");
  EXPECT_STREQ(DatasetKindName(DatasetKind::kDerived), "derived");
  EXPECT_STREQ(MappingName(Mapping::kIdentity), "identity");
  EXPECT_STREQ(MappingName(Mapping::kAll), "all");
}

TEST(CatalogTest, TopologicalOrderTiesByName) {
  // z_src and a_src are roots; mid depends on z_src; top on mid and a_src.
  std::vector<DatasetSpec> ds = {
      Derived("top", {{"mid", Mapping::kIdentity}, {"a_src", Mapping::kAll}}),
      Derived("mid", {{"z_src", Mapping::kIdentity}}),
      Source("z_src"),
      Source("a_src", Grain::kNone),
      Derived("b_side", {{"z_src", Mapping::kIdentity}}),
  };
  absl::StatusOr<Catalog> c = Catalog::Build(std::move(ds), WarehouseSpec{});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(Names(*c), ElementsAre("a_src", "z_src", "b_side", "mid", "top"));
  ASSERT_NE(c->Find("mid"), nullptr);
  EXPECT_EQ(c->Find("mid")->name, "mid");
  EXPECT_EQ(c->Find("nope"), nullptr);
  EXPECT_FALSE(c->Find("top")->transform_version.empty());

  std::vector<const DatasetSpec*> deps = c->DirectDependents("z_src");
  ASSERT_EQ(deps.size(), 2u);
  EXPECT_EQ(deps[0]->name, "b_side");
  EXPECT_EQ(deps[1]->name, "mid");
  EXPECT_TRUE(c->DirectDependents("top").empty());
  EXPECT_EQ(c->warehouse().engine, "sqlite");
}

TEST(CatalogTest, DefaultsTableToName) {
  DatasetSpec s = Source("orders");
  s.table.clear();
  absl::StatusOr<Catalog> c = Catalog::Build({s}, WarehouseSpec{});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->Find("orders")->table, "orders");
}

TEST(CatalogTest, MissingUpstream) {
  std::string msg = BuildError({Derived("d", {{"ordrs", Mapping::kAll}})});
  EXPECT_THAT(msg, HasSubstr("p.yaml:10"));
  EXPECT_THAT(msg, HasSubstr("dataset \"d\""));
  EXPECT_THAT(msg, HasSubstr("upstream \"ordrs\" is not a declared dataset"));
}

TEST(CatalogTest, CycleReportsPath) {
  std::string msg = BuildError({
      Source("s"),
      Derived("a", {{"c", Mapping::kIdentity}, {"s", Mapping::kIdentity}}),
      Derived("b", {{"a", Mapping::kIdentity}}),
      Derived("c", {{"b", Mapping::kIdentity}}),
  });
  EXPECT_THAT(msg, HasSubstr("cycle"));
  EXPECT_THAT(msg, HasSubstr("a -> c -> b -> a"));
  EXPECT_THAT(msg, HasSubstr("p.yaml:10"));
}

TEST(CatalogTest, SelfCycle) {
  std::string msg = BuildError({Derived("a", {{"a", Mapping::kAll}})});
  EXPECT_THAT(msg, HasSubstr("a -> a"));
}

TEST(CatalogTest, IdentityNeedsSameGrain) {
  std::string msg = BuildError(
      {Source("h", Grain::kHour), Derived("d", {{"h", Mapping::kIdentity}})});
  EXPECT_THAT(msg, HasSubstr("same grain"));
  EXPECT_THAT(msg, HasSubstr("d is day and h is hour"));
  // `all` is fine across grains.
  EXPECT_TRUE(Catalog::Build({Source("h", Grain::kHour),
                              Derived("d", {{"h", Mapping::kAll}})},
                             WarehouseSpec{})
                  .ok());
}

TEST(CatalogTest, IdentityNeedsBothPartitioned) {
  std::string msg = BuildError({Source("dim", Grain::kNone),
                                Derived("d", {{"dim", Mapping::kIdentity}})});
  EXPECT_THAT(msg, HasSubstr("needs both datasets partitioned"));
  EXPECT_THAT(msg, HasSubstr("mapping: all"));
}

TEST(CatalogTest, DuplicateNamesAndTables) {
  std::string msg = BuildError({Source("a"), Source("a")});
  EXPECT_THAT(msg, HasSubstr("already declared"));
  DatasetSpec b = Source("b");
  b.table = "a";
  msg = BuildError({Source("a"), b});
  EXPECT_THAT(msg, HasSubstr("table \"a\" is already used by dataset \"a\""));
}

TEST(CatalogTest, IdentifiersAreRestricted) {
  EXPECT_THAT(BuildError({Source("bad-name")}), HasSubstr("identifier"));
  EXPECT_THAT(BuildError({Source("1abc")}), HasSubstr("identifier"));
  DatasetSpec t = Source("ok");
  t.table = "x\"; DROP TABLE y; --";
  EXPECT_THAT(BuildError({t}), HasSubstr("table"));
  DatasetSpec c = Derived("d", {});
  c.columns.push_back({"bad col", "TEXT"});
  EXPECT_THAT(BuildError({c}), HasSubstr("contract column \"bad col\""));
  DatasetSpec ty = Derived("d", {});
  ty.columns[1].type = "INTEGER); DROP TABLE x; --";
  EXPECT_THAT(BuildError({ty}), HasSubstr("has type"));
  DatasetSpec pc = Source("p");
  pc.partition->column = "a.b";
  EXPECT_THAT(BuildError({pc}), HasSubstr("partition column"));
}

TEST(CatalogTest, ColumnTypesAccepted) {
  DatasetSpec d = Derived("d", {});
  d.columns = {{"ds", "TEXT"},
               {"a", "DOUBLE PRECISION"},
               {"b", "NUMERIC(10, 2)"},
               {"c", "VARCHAR(32)"}};
  absl::StatusOr<Catalog> c = Catalog::Build({d}, WarehouseSpec{});
  EXPECT_TRUE(c.ok()) << c.status();
}

TEST(CatalogTest, NamesAreUniqueIgnoringCase) {
  // A derived table next to a source table that differs only in case is
  // the same SQLite table: Publish would write into the source.
  DatasetSpec src = Source("orders");
  src.table = "raw_orders";
  DatasetSpec derived = Derived("copy", {{"orders", Mapping::kIdentity}});
  derived.table = "RAW_ORDERS";
  derived.line = 12;
  std::string msg = BuildError({src, derived});
  EXPECT_THAT(msg, HasSubstr("p.yaml:12: dataset \"copy\": table "
                             "\"RAW_ORDERS\" is already used by dataset "
                             "\"orders\" at p.yaml:1 as \"raw_orders\" "
                             "(table names are case-insensitive)"));

  DatasetSpec upper = Source("Orders");
  upper.table = "orders2";
  upper.line = 7;
  msg = BuildError({Source("orders"), upper});
  EXPECT_THAT(msg, HasSubstr("p.yaml:7: dataset \"Orders\": is already "
                             "declared at p.yaml:1 as \"orders\" (dataset "
                             "names are case-insensitive)"));

  DatasetSpec cols = Derived("d", {});
  cols.columns.push_back({"N", "REAL"});
  msg = BuildError({cols});
  EXPECT_THAT(msg, HasSubstr("p.yaml:10: dataset \"d\": contract column "
                             "\"N\" is declared twice (as \"n\"; column "
                             "names are case-insensitive)"));

  // Distinct names in any case are fine.
  DatasetSpec other = Source("Other");
  EXPECT_TRUE(Catalog::Build({Source("orders"), other}, WarehouseSpec{}).ok());
}

TEST(CatalogTest, ReservedPrefixesAreRejected) {
  for (const char* name :
       {"_bf_x", "_BF_stage_bf_1_x", "sqlite_x", "SQLite_master"}) {
    SCOPED_TRACE(name);
    std::string msg = BuildError({Source(name)});
    EXPECT_THAT(msg, HasSubstr(absl::StrCat("p.yaml:1: dataset \"", name,
                                            "\": name \"", name,
                                            "\" starts with the reserved "
                                            "prefix")));
    DatasetSpec t = Source("ok");
    t.table = name;
    EXPECT_THAT(BuildError({t}),
                HasSubstr(absl::StrCat("table \"", name,
                                       "\" starts with the reserved "
                                       "prefix")));
    DatasetSpec c = Derived("d", {});
    c.columns.push_back({name, "TEXT"});
    EXPECT_THAT(BuildError({c}),
                HasSubstr(absl::StrCat("p.yaml:10: dataset \"d\": contract "
                                       "column \"",
                                       name,
                                       "\" starts with the reserved "
                                       "prefix")));
    DatasetSpec p = Source("p");
    p.partition->column = name;
    EXPECT_THAT(BuildError({p}), HasSubstr("partition column"));
  }
  // Only a prefix is reserved.
  DatasetSpec fine = Source("my_bf_sqlite_x");
  fine.table = "bf_x";
  EXPECT_TRUE(Catalog::Build({fine}, WarehouseSpec{}).ok());
}

TEST(CatalogTest, ColumnTypesWithConstraintsAreRejected) {
  for (const char* type :
       {"INTEGER PRIMARY KEY", "TEXT COLLATE NOCASE", "TEXT NOT NULL",
        "INTEGER GENERATED ALWAYS AS (5)", "INTEGER DEFAULT 5", "TEXT UNIQUE",
        "INTEGER REFERENCES", "integer primary", "NULL", "key"}) {
    SCOPED_TRACE(type);
    DatasetSpec d = Derived("d", {});
    d.columns[1].type = type;
    std::string msg = BuildError({d});
    EXPECT_THAT(msg, HasSubstr(absl::StrCat("p.yaml:10: dataset \"d\": "
                                            "contract column \"n\" has type "
                                            "\"",
                                            type, "\"")));
    EXPECT_THAT(msg, HasSubstr("is a constraint keyword"));
  }
  for (const char* type :
       {"UNSIGNED BIG INT", "INT 5", "TEXT  X", "TEXT,", "(10)", "VARCHAR()",
        "NUMERIC(10, 2, 3)", "NUMERIC(10) X", "TEXT ", " TEXT", "1INT"}) {
    SCOPED_TRACE(type);
    DatasetSpec d = Derived("d", {});
    d.columns[1].type = type;
    EXPECT_THAT(BuildError({d}), HasSubstr("expected a SQL type name of one "
                                           "or two words"));
  }
  EXPECT_TRUE(CheckColumnType("character varying(10)").ok());
  EXPECT_TRUE(CheckColumnType("NUMERIC (10,2)").ok());
  EXPECT_TRUE(CheckColumnType("INT8").ok());
  // Words that merely contain a keyword are type names.
  EXPECT_TRUE(CheckColumnType("NULLABLE_TEXT").ok());
  EXPECT_TRUE(CheckColumnType("KEYWORD").ok());
}

TEST(CatalogTest, DerivedRequirements) {
  DatasetSpec no_transform = Derived("d", {});
  no_transform.transform.clear();
  EXPECT_THAT(BuildError({no_transform}), HasSubstr("needs a `transform:`"));

  DatasetSpec no_columns = Derived("d", {});
  no_columns.columns.clear();
  EXPECT_THAT(BuildError({no_columns}), HasSubstr("contract"));

  DatasetSpec bad_part = Derived("d", {});
  bad_part.partition->column = "day";
  EXPECT_THAT(BuildError({bad_part}),
              HasSubstr("partition column \"day\" is not a contract column"));

  DatasetSpec bad_pk = Derived("d", {});
  bad_pk.primary_key = {"ds", "region"};
  EXPECT_THAT(BuildError({bad_pk}),
              HasSubstr("primary_key column \"region\" is not a contract"));

  DatasetSpec two_statements = Derived("d", {});
  two_statements.transform = "SELECT 1 AS ds; DELETE FROM x";
  EXPECT_THAT(BuildError({two_statements}), HasSubstr("single statement"));
}

TEST(CatalogTest, SourceRestrictions) {
  DatasetSpec up = Source("s");
  up.upstream = {{"x", Mapping::kAll}};
  EXPECT_THAT(BuildError({Source("x"), up}),
              HasSubstr("source dataset cannot have `upstream:`"));
  DatasetSpec tr = Source("s");
  tr.transform = "SELECT 1";
  EXPECT_THAT(BuildError({tr}), HasSubstr("cannot have a `transform:`"));
}

TEST(CatalogTest, KeyGrainNeedsKeys) {
  DatasetSpec k = Source("k", Grain::kKey);
  k.partition->keys.clear();
  EXPECT_THAT(BuildError({k}), HasSubstr("non-empty `keys:`"));
  DatasetSpec d = Source("d", Grain::kDay);
  d.partition->keys = {"a"};
  EXPECT_THAT(BuildError({d}), HasSubstr("only allowed with grain key"));
  DatasetSpec dup = Source("k", Grain::kKey);
  dup.partition->keys = {"a", "a"};
  EXPECT_THAT(BuildError({dup}), HasSubstr("listed twice"));
  EXPECT_TRUE(Catalog::Build({Source("k", Grain::kKey)}, WarehouseSpec{}).ok());
}

TEST(CatalogTest, IdentityBetweenKeyGrains) {
  absl::StatusOr<Catalog> c =
      Catalog::Build({Source("k", Grain::kKey),
                      Derived("d", {{"k", Mapping::kIdentity}}, Grain::kKey)},
                     WarehouseSpec{});
  EXPECT_TRUE(c.ok()) << c.status();
}

TEST(CatalogTest, EmptyCatalog) {
  absl::StatusOr<Catalog> c = Catalog::Build({}, WarehouseSpec{});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->datasets().empty());
}

}  // namespace
}  // namespace core_catalog_test
}  // namespace backfill
