// backfilld_faults: backfilld (server/daemon_main.h) with the fault-injecting
// SQLite VFS of fault_vfs.h, for tests that run the daemon as a process and
// make its disk fill up or fail. With BACKFILL_TEST_FAULTS naming a control
// file, every database the daemon opens goes through the VFS, which follows
// that file; without it, the VFS is not installed and the daemon runs as
// backfilld does. Flags, output and exit codes are backfilld's.

#include "server/daemon_main.h"
#include "tests/testing/fault_vfs.h"

int main(int argc, char** argv) {
  backfill::DaemonMainHooks hooks;
  hooks.before_start = backfill::sqlite::InstallFaultVfsFromEnvironment;
  return backfill::DaemonMain(argc, argv, hooks);
}
