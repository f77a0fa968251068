// PostgresSuite: the GoogleTest fixture base of test suites that need a
// real PostgreSQL server. SetUpTestSuite gets the suite a database of its
// own (PostgresTestServer::StartOrShare, postgres_test_server.h): on the
// server the whole ctest run shares when ctest's fixture started one, else
// on a server of its own; TearDownTestSuite drops the database (or stops
// the server and removes its directory). Tests reach it as `server_`, and
// server_->Dsn() connects to the suite's database. ctest runs each test
// case as a process of its own, so there each case gets a fresh database;
// a run of the whole binary shares one per suite.
//
// PostgresServerSuite: the same with a server of its own in every case
// (PostgresTestServer::Start), for suites that change the server itself:
// restart it or edit its pg_hba.conf. A suite whose other cases share a
// server keeps such a case in a fixture of its own that derives from the
// suite's and calls StartOwnServer() in its SetUpTestSuite.
//
// Ownership: the suite owns its server. Not thread-safe beyond GoogleTest's
// own rules (suites run one after another).

#ifndef BACKFILL_TESTS_TESTING_POSTGRES_SUITE_H_
#define BACKFILL_TESTS_TESTING_POSTGRES_SUITE_H_

#include "gtest/gtest.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill::testing {

class PostgresSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = PostgresTestServer::StartOrShare();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  // Starts a server of the suite's own (PostgresTestServer::Start).
  static void StartOwnServer() {
    auto server = PostgresTestServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }

  // The suite's server; null when it could not start (SetUpTestSuite then
  // failed, and so does each test that checks it).
  static inline PostgresTestServer* server_ = nullptr;
};

class PostgresServerSuite : public PostgresSuite {
 protected:
  static void SetUpTestSuite() { StartOwnServer(); }
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_POSTGRES_SUITE_H_
