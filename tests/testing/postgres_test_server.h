// PostgresTestServer: a throwaway PostgreSQL server for tests, started on a
// fresh temporary directory and a free port on 127.0.0.1 (and a Unix socket
// in that directory), with trust authentication for the superuser
// `postgres` and durability switched off (fsync, synchronous_commit): it
// exists for one test binary's fixture and is never worth keeping. The
// destructor stops it (pg_ctl stop, fast mode) and removes the directory.
//
// Or a database of its own on the server a whole ctest run shares
// (StartOrShare): ctest's fixture `postgres` (tests/CMakeLists.txt,
// tests/testing/postgres_fixture.sh) starts that server once and names its
// directory in BACKFILL_TEST_PG_DIR; creating a database there takes a
// fraction of the second or two a server of its own takes. Without the
// variable (a test binary run by hand), StartOrShare starts a server of
// its own as Start does.
//
// The server programs (initdb, pg_ctl, postgres) are Debian's postgresql-15
// (scripts/install-deps.sh installs it), found in the directory
// `pg_config --bindir` names or in BACKFILL_PG_BIN_DIR. PostgreSQL refuses
// to run as root, so when the test runs as root (CI does) the programs run
// as the system user `postgres`, which then owns the directory.
//
// Start() fails with a message saying what is missing rather than letting a
// test pass without a server. Not thread-safe: one thread starts and
// destroys it; the server itself serves any number of connections.

#ifndef BACKFILL_TESTS_TESTING_POSTGRES_TEST_SERVER_H_
#define BACKFILL_TESTS_TESTING_POSTGRES_TEST_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace backfill::testing {

class PostgresTestServer {
 public:
  // Creates the cluster and starts the server; waits until it accepts
  // connections (at most 60 s). For tests that change the server itself
  // (restart it, edit pg_hba.conf, create roles).
  static absl::StatusOr<std::unique_ptr<PostgresTestServer>> Start();

  // A fresh database on the ctest run's shared server (BACKFILL_TEST_PG_DIR
  // names its directory), which Dsn() then connects to by default and the
  // destructor drops; without the variable, Start(). For tests that only
  // need databases, tables and connections of their own: databases they
  // create themselves must have names no other test process uses.
  static absl::StatusOr<std::unique_ptr<PostgresTestServer>> StartOrShare();

  ~PostgresTestServer();
  PostgresTestServer(const PostgresTestServer&) = delete;
  PostgresTestServer& operator=(const PostgresTestServer&) = delete;

  int port() const { return port_; }
  // The directory holding the cluster (`data/`), the server's log
  // (`server.log`) and its Unix socket.
  const std::string& dir() const { return dir_; }
  // Whether this is a database on the run's shared server.
  bool shared() const { return shared_; }
  // The database Dsn() connects to by default: `postgres` on a server of
  // its own, the fresh one on the shared server.
  const std::string& database() const { return database_; }
  // A libpq connection string for `database` (default: database()) as the
  // superuser over TCP, e.g.
  // "host=127.0.0.1 port=54321 dbname=postgres user=postgres".
  std::string Dsn(const std::string& database = "") const;
  // A new database `database()` + "_" + `suffix` (dropped first if a run
  // before left it), bytewise text order (C collation) when `c_collation`;
  // its name. Databases of one test process must have distinct suffixes.
  absl::StatusOr<std::string> CreateDatabase(const std::string& suffix,
                                             bool c_collation = false) const;
  // Drops `name`, closing its connections (WITH FORCE).
  absl::Status DropDatabase(const std::string& name) const;
  // The end of the server's log (for a failing test's message).
  std::string LogTail() const;

  // Restarts the server on the same port and cluster (pg_ctl restart, fast
  // mode: every client connection is closed, as when a server restarts in
  // production) and waits until it accepts connections again (at most
  // 60 s). Its data survives. Refused on the shared server.
  absl::Status Restart();

 private:
  PostgresTestServer(std::string bin_dir, std::string dir, int port)
      : bin_dir_(std::move(bin_dir)), dir_(std::move(dir)), port_(port) {}

  std::string bin_dir_;
  std::string dir_;
  int port_;
  bool shared_ = false;
  std::string database_ = "postgres";
  std::string options_;  // the server's command line options (pg_ctl -o)
  bool running_ = false;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_POSTGRES_TEST_SERVER_H_
