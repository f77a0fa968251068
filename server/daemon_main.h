// DaemonMain: the backfilld program as a function. It parses the flags, sets
// up logging, blocks SIGTERM, SIGINT and SIGHUP in every thread, starts the
// Daemon and waits for signals: SIGHUP reloads the pipelines, the token file
// and the /metrics basic auth file (Daemon::Reload); SIGTERM or SIGINT drains
// and returns 0. A second SIGTERM or SIGINT during the drain exits at once.
// backfilld's main() (server/main.cc) is one call of it; a build of the
// daemon for tests adds a step before it starts through DaemonMainHooks
// (backfilld_faults, tests/testing/backfilld_faults_main.cc, installs the
// fault-injecting SQLite VFS of tests/testing/fault_vfs.h).
//
// Environment: BACKFILL_CHECK_LOCK_ORDER=1 turns on Abseil's lock-order
// (potential deadlock) check, off otherwise; BACKFILL_TEST_CRASH_AT arms
// crash points (core/run/crash_point.h).
//
// Returns the exit code: 0 after a clean shutdown, 2 for bad flags or a bad
// pipeline file (the server does not start), 1 when another startup step
// fails (the data dir is in use, the address is taken, ...) or on a second
// signal.
//
// Call it once per process, from main(): it owns the process's signal mask,
// its default logger and its Daemon until it returns.

#ifndef BACKFILL_SERVER_DAEMON_MAIN_H_
#define BACKFILL_SERVER_DAEMON_MAIN_H_

#include <functional>

#include "absl/status/status.h"

namespace backfill {

struct DaemonMainHooks {
  // Runs once the flags are parsed and the signals blocked, before crash
  // points are armed, the pipelines are loaded or any database is opened.
  // An error ends the program: its message on stderr, exit code 1.
  std::function<absl::Status()> before_start;
};

int DaemonMain(int argc, char** argv, const DaemonMainHooks& hooks = {});

}  // namespace backfill

#endif  // BACKFILL_SERVER_DAEMON_MAIN_H_
