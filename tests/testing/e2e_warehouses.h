// The warehouses end-to-end tests run the daemon against, as the tests
// reach them with the warehouse's own client library (sqlite3, libpq),
// never through backfilld: TestWarehouse, on SQLite (the generated file
// itself) or on PostgreSQL (a database of its own on the test run's
// server, holding a copy of the generated SQLite warehouse's raw tables).
//
// Ownership: a PostgresTestWarehouse owns its connection and shares the
// server. Not thread-safe: one test thread uses each.

#ifndef BACKFILL_TESTS_TESTING_E2E_WAREHOUSES_H_
#define BACKFILL_TESTS_TESTING_E2E_WAREHOUSES_H_

#include <libpq-fe.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill::e2e {

// The rows of `sql` on `conn`, each value as text (a failure is a test
// failure, and no rows).
inline Rows PgRows(PGconn* conn, const std::string& sql) {
  PGresult* r = PQexec(conn, sql.c_str());
  Rows rows;
  EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK)
      << PQresultErrorMessage(r) << " in " << sql;
  if (PQresultStatus(r) == PGRES_TUPLES_OK) {
    for (int i = 0; i < PQntuples(r); ++i) {
      std::vector<std::string> row;
      for (int j = 0; j < PQnfields(r); ++j) {
        row.emplace_back(PQgetvalue(r, i, j));
      }
      rows.push_back(std::move(row));
    }
  }
  PQclear(r);
  return rows;
}

// The warehouse the daemon replays into, as the test reaches it with the
// warehouse's own client library (sqlite3, libpq), never through backfilld.
class TestWarehouse {
 public:
  virtual ~TestWarehouse() = default;
  // The pipeline file's `warehouse:` line.
  virtual std::string Yaml() const = 0;
  // The pipeline text for this engine (types of the contracts).
  virtual std::string Adapt(std::string yaml) const { return yaml; }
  virtual void Exec(const std::string& sql) = 0;
  virtual Rows Query(const std::string& sql) = 0;
  // daily_revenue as the fixed logic computes it from the raw tables, and
  // as published, for days in [from, to), ordered by (ds, region).
  virtual Rows Expected(const std::string& from, const std::string& to) = 0;
  virtual Rows Published(const std::string& from, const std::string& to) = 0;
};

class SqliteTestWarehouse : public TestWarehouse {
 public:
  explicit SqliteTestWarehouse(std::string path) : path_(std::move(path)) {}
  std::string Yaml() const override {
    return "warehouse: {engine: sqlite, path: warehouse.db}\n";
  }
  void Exec(const std::string& sql) override {
    Sqlite db(path_);
    EXPECT_TRUE(db.Exec(sql)) << db.error() << " in " << sql;
  }
  Rows Query(const std::string& sql) override {
    Sqlite db(path_, /*read_only=*/true);
    auto rows = db.Query(sql, {});
    EXPECT_TRUE(rows.has_value()) << db.error();
    return rows.value_or(Rows{});
  }
  Rows Expected(const std::string& from, const std::string& to) override {
    return ExpectedRevenue(path_, from, to);
  }
  Rows Published(const std::string& from, const std::string& to) override {
    return PublishedRevenue(path_, from, to);
  }

 private:
  std::string path_;
};

// A database of its own on the test run's PostgreSQL server, holding a copy
// of the generated SQLite warehouse's raw tables (same rows, same values).
class PostgresTestWarehouse : public TestWarehouse {
 public:
  ~PostgresTestWarehouse() override {
    if (conn_ != nullptr) PQfinish(conn_);
  }
  // Starts (or shares) the server and copies the raw tables of `sqlite`
  // into its test database, or into a new database of its own named with
  // `suffix` (PostgresTestServer::CreateDatabase) when one is given. With
  // `own_server`, on a server of its own (which a test may restart).
  void Open(const std::string& sqlite, const std::string& suffix = "",
            bool own_server = false) {
    auto server = own_server
                      ? ::backfill::testing::PostgresTestServer::Start()
                      : ::backfill::testing::PostgresTestServer::StartOrShare();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    if (!suffix.empty()) {
      absl::StatusOr<std::string> database = server_->CreateDatabase(suffix);
      ASSERT_TRUE(database.ok()) << database.status();
      database_ = *database;
    }
    conn_ = PQconnectdb(Dsn().c_str());
    ASSERT_EQ(PQstatus(conn_), CONNECTION_OK) << PQerrorMessage(conn_);
    // order_date compares bytewise (COLLATE "C"), as SQLite's text does.
    Exec(
        "CREATE TABLE dim_customers (customer_id BIGINT PRIMARY KEY, name "
        "TEXT NOT NULL, region TEXT COLLATE \"C\" NOT NULL);"
        "CREATE TABLE raw_orders (order_id BIGINT PRIMARY KEY, order_date "
        "TEXT COLLATE \"C\" NOT NULL, customer_id BIGINT NOT NULL, amount "
        "DOUBLE PRECISION NOT NULL, refund DOUBLE PRECISION NOT NULL DEFAULT "
        "0);"
        "CREATE INDEX raw_orders_by_date ON raw_orders (order_date);");
    Sqlite from(sqlite, /*read_only=*/true);
    auto customers = from.Query(
        "SELECT customer_id, quote(name), quote(region) FROM "
        "dim_customers",
        {});
    ASSERT_TRUE(customers.has_value()) << from.error();
    std::vector<std::string> values;
    for (const auto& row : *customers) {
      values.push_back(
          absl::StrCat("(", row[0], ", ", row[1], ", ", row[2], ")"));
    }
    Exec(absl::StrCat("INSERT INTO dim_customers VALUES ",
                      absl::StrJoin(values, ", ")));
    auto orders = from.Query(
        "SELECT order_id, quote(order_date), customer_id, printf('%!.17g', "
        "amount), printf('%!.17g', refund) FROM raw_orders",
        {});
    ASSERT_TRUE(orders.has_value()) << from.error();
    values.clear();
    for (const auto& row : *orders) {
      values.push_back(absl::StrCat("(", absl::StrJoin(row, ", "), ")"));
    }
    Exec(absl::StrCat("INSERT INTO raw_orders VALUES ",
                      absl::StrJoin(values, ", "), "; ANALYZE"));
    ASSERT_EQ(Query("SELECT COUNT(*) FROM raw_orders"),
              (Rows{{std::to_string(orders->size())}}));
  }
  // Its database's connection string.
  std::string Dsn() const { return server_->Dsn(database_); }
  // The server it is a database of.
  ::backfill::testing::PostgresTestServer* server() const {
    return server_.get();
  }
  std::string Yaml() const override {
    return absl::StrCat("warehouse: {engine: postgres, dsn: \"", Dsn(),
                        "\"}\n");
  }
  std::string Adapt(std::string yaml) const override {
    // PostgreSQL's REAL is a 4-byte float, and SUM of a BIGINT a NUMERIC.
    return absl::StrReplaceAll(yaml,
                               {{"revenue: REAL, orders: INTEGER",
                                 "revenue: DOUBLE PRECISION, orders: BIGINT"},
                                {"SUM(orders) AS orders",
                                 "CAST(SUM(orders) AS BIGINT) AS "
                                 "orders"}});
  }
  void Exec(const std::string& sql) override {
    Reconnect();
    PGresult* r = PQexec(conn_, sql.c_str());
    const ExecStatusType status = PQresultStatus(r);
    EXPECT_TRUE(status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK)
        << PQresultErrorMessage(r) << " in " << sql.substr(0, 300);
    PQclear(r);
  }
  Rows Query(const std::string& sql) override {
    Reconnect();
    return PgRows(conn_, sql);
  }
  Rows Expected(const std::string& from, const std::string& to) override {
    return Query(absl::StrCat(
        "SELECT o.order_date, c.region, SUM(o.amount - o.refund), COUNT(*) "
        "FROM raw_orders o JOIN dim_customers c ON c.customer_id = "
        "o.customer_id WHERE o.order_date >= '",
        from, "' AND o.order_date < '", to, "' GROUP BY 1, 2 ORDER BY 1, 2"));
  }
  Rows Published(const std::string& from, const std::string& to) override {
    return Query(absl::StrCat(
        "SELECT ds, region, revenue, orders FROM daily_revenue WHERE ds >= '",
        from, "' AND ds < '", to, "' ORDER BY 1, 2"));
  }

 private:
  std::unique_ptr<::backfill::testing::PostgresTestServer> server_;
  // A connection the server closed (it restarted) is opened again.
  void Reconnect() {
    if (PQstatus(conn_) != CONNECTION_OK) PQreset(conn_);
    PGresult* ping = PQexec(conn_, "SELECT 1");
    const bool ok = PQresultStatus(ping) == PGRES_TUPLES_OK;
    PQclear(ping);
    if (!ok) PQreset(conn_);
  }

  std::string database_;  // "": the server's test database
  PGconn* conn_ = nullptr;
};

}  // namespace backfill::e2e

#endif  // BACKFILL_TESTS_TESTING_E2E_WAREHOUSES_H_
