// PostgresTestServer: a throwaway PostgreSQL server for tests, started on a
// fresh temporary directory and a free port on 127.0.0.1 (and a Unix socket
// in that directory), with trust authentication for the superuser
// `postgres` and durability switched off (fsync, synchronous_commit): it
// exists for one test binary's fixture and is never worth keeping. The
// destructor stops it (pg_ctl stop, fast mode) and removes the directory.
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
  // connections (at most 60 s).
  static absl::StatusOr<std::unique_ptr<PostgresTestServer>> Start();

  ~PostgresTestServer();
  PostgresTestServer(const PostgresTestServer&) = delete;
  PostgresTestServer& operator=(const PostgresTestServer&) = delete;

  int port() const { return port_; }
  // The directory holding the cluster (`data/`), the server's log
  // (`server.log`) and its Unix socket.
  const std::string& dir() const { return dir_; }
  // A libpq connection string for `database` as the superuser over TCP,
  // e.g. "host=127.0.0.1 port=54321 dbname=postgres user=postgres".
  std::string Dsn(const std::string& database = "postgres") const;
  // The end of the server's log (for a failing test's message).
  std::string LogTail() const;

  // Restarts the server on the same port and cluster (pg_ctl restart, fast
  // mode: every client connection is closed, as when a server restarts in
  // production) and waits until it accepts connections again (at most
  // 60 s). Its data survives.
  absl::Status Restart();

 private:
  PostgresTestServer(std::string bin_dir, std::string dir, int port)
      : bin_dir_(std::move(bin_dir)), dir_(std::move(dir)), port_(port) {}

  std::string bin_dir_;
  std::string dir_;
  int port_;
  std::string options_;  // the server's command line options (pg_ctl -o)
  bool running_ = false;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_POSTGRES_TEST_SERVER_H_
