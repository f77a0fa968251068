// The PostgreSQL test server: it starts a real server that libpq reaches
// over TCP, binds parameters and keeps data while it runs, and leaves
// nothing behind (no directory, no listening port) when it is destroyed.
// On the server a ctest run shares, each handle is a database of its own,
// dropped with the handle.

#include <libpq-fe.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill::testing {
namespace storage_postgres_test_server_test {
namespace {

using ::testing::HasSubstr;

struct PgConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct PgResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Conn = std::unique_ptr<PGconn, PgConnDeleter>;
using Result = std::unique_ptr<PGresult, PgResultDeleter>;

bool Listening(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool connected =
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return connected;
}

TEST(PostgresTestServerTest, ServesSqlWithBoundParametersAndCleansUp) {
  auto server = PostgresTestServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  const std::string dir = (*server)->dir();
  EXPECT_TRUE(Listening(port));

  Conn conn(PQconnectdb((*server)->Dsn().c_str()));
  ASSERT_EQ(PQstatus(conn.get()), CONNECTION_OK)
      << PQerrorMessage(conn.get()) << (*server)->LogTail();
  EXPECT_GE(PQserverVersion(conn.get()), 150000);

  Result created(
      PQexec(conn.get(), "CREATE TABLE t (day DATE PRIMARY KEY, n INTEGER)"));
  ASSERT_EQ(PQresultStatus(created.get()), PGRES_COMMAND_OK)
      << PQresultErrorMessage(created.get());
  // A value that would break a spliced statement is data when bound.
  const char* values[2] = {"2025-01-31", "7"};
  Result inserted(PQexecParams(conn.get(),
                               "INSERT INTO t VALUES ($1::date, $2::integer)",
                               2, nullptr, values, nullptr, nullptr, 0));
  ASSERT_EQ(PQresultStatus(inserted.get()), PGRES_COMMAND_OK)
      << PQresultErrorMessage(inserted.get());
  const char* hostile[1] = {"2025-01-31'; DROP TABLE t; --"};
  Result refused(PQexecParams(conn.get(),
                              "SELECT n FROM t WHERE day = $1::date", 1,
                              nullptr, hostile, nullptr, nullptr, 0));
  EXPECT_EQ(PQresultStatus(refused.get()), PGRES_FATAL_ERROR);
  EXPECT_THAT(PQresultErrorMessage(refused.get()),
              HasSubstr("invalid input syntax for type date"));

  const char* day[1] = {"2025-01-31"};
  Result read(PQexecParams(conn.get(),
                           "SELECT n, (day + 1)::text FROM t WHERE day = $1", 1,
                           nullptr, day, nullptr, nullptr, 0));
  ASSERT_EQ(PQresultStatus(read.get()), PGRES_TUPLES_OK)
      << PQresultErrorMessage(read.get());
  ASSERT_EQ(PQntuples(read.get()), 1);
  EXPECT_STREQ(PQgetvalue(read.get(), 0, 0), "7");
  EXPECT_STREQ(PQgetvalue(read.get(), 0, 1), "2025-02-01");

  conn.reset();
  server->reset();
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_FALSE(Listening(port));
}

TEST(PostgresTestServerTest, TwoServersRunSideBySide) {
  auto a = PostgresTestServer::Start();
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = PostgresTestServer::Start();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE((*a)->port(), (*b)->port());
  EXPECT_NE((*a)->dir(), (*b)->dir());
  for (const auto* s : {&*a, &*b}) {
    Conn conn(PQconnectdb((*s)->Dsn().c_str()));
    EXPECT_EQ(PQstatus(conn.get()), CONNECTION_OK)
        << PQerrorMessage(conn.get());
  }
}

// The number of databases named `name` (0 or 1), read on `dsn`.
int Databases(const std::string& dsn, const std::string& name) {
  Conn conn(PQconnectdb(dsn.c_str()));
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    ADD_FAILURE() << PQerrorMessage(conn.get());
    return -1;
  }
  const char* values[1] = {name.c_str()};
  Result r(PQexecParams(conn.get(),
                        "SELECT count(*) FROM pg_database WHERE datname = $1",
                        1, nullptr, values, nullptr, nullptr, 0));
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
    ADD_FAILURE() << PQresultErrorMessage(r.get());
    return -1;
  }
  return std::stoi(PQgetvalue(r.get(), 0, 0));
}

// Under ctest the handles share the run's server; run by hand, each starts
// a server of its own. Either way each connects to a database of its own.
TEST(PostgresTestServerTest, EachSharedHandleHasADatabaseOfItsOwn) {
  auto a = PostgresTestServer::StartOrShare();
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = PostgresTestServer::StartOrShare();
  ASSERT_TRUE(b.ok()) << b.status();
  Conn ca(PQconnectdb((*a)->Dsn().c_str()));
  Conn cb(PQconnectdb((*b)->Dsn().c_str()));
  ASSERT_EQ(PQstatus(ca.get()), CONNECTION_OK) << PQerrorMessage(ca.get());
  ASSERT_EQ(PQstatus(cb.get()), CONNECTION_OK) << PQerrorMessage(cb.get());
  Result created(PQexec(ca.get(), "CREATE TABLE t (n INTEGER)"));
  ASSERT_EQ(PQresultStatus(created.get()), PGRES_COMMAND_OK)
      << PQresultErrorMessage(created.get());
  Result again(PQexec(cb.get(), "CREATE TABLE t (n INTEGER)"));
  EXPECT_EQ(PQresultStatus(again.get()), PGRES_COMMAND_OK)
      << PQresultErrorMessage(again.get());
  if (!(*a)->shared()) return;  // servers of their own: nothing more shared

  EXPECT_EQ((*a)->port(), (*b)->port());
  EXPECT_NE((*a)->database(), (*b)->database());
  EXPECT_FALSE((*a)->Restart().ok());
  const std::string dsn = (*b)->Dsn("postgres");
  const std::string database = (*a)->database();
  EXPECT_EQ(Databases(dsn, database), 1);
  ca.reset();
  a->reset();  // drops its database, and only that
  EXPECT_EQ(Databases(dsn, database), 0);
  EXPECT_EQ(Databases(dsn, (*b)->database()), 1);
}

}  // namespace
}  // namespace storage_postgres_test_server_test
}  // namespace backfill::testing
