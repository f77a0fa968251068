// PostgresSuite: the GoogleTest fixture base of test suites that need a
// real PostgreSQL server. SetUpTestSuite starts one PostgresTestServer
// (postgres_test_server.h) for the suite and TearDownTestSuite stops it and
// removes its directory; tests reach it as `server_`. ctest runs each test
// case as a process of its own, so there each case gets a fresh server; a
// run of the whole binary shares one per suite.
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
    auto server = PostgresTestServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  // The suite's server; null when it could not start (SetUpTestSuite then
  // failed, and so does each test that checks it).
  static inline PostgresTestServer* server_ = nullptr;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_POSTGRES_SUITE_H_
