// FaultVfs: a test-only SQLite VFS that wraps the default VFS and injects
// disk-full and I/O-error faults into chosen database files, so that tests can
// show how the state store, the warehouse engine and the daemon behave when
// the disk fills up or fails.
//
// Everything is forwarded to the VFS that was the default when the shim was
// installed (the "unix" VFS on Linux), including the version 2 and 3 io
// methods: shared memory (xShmMap, xShmLock, xShmBarrier, xShmUnmap) and
// memory-mapped reads (xFetch, xUnfetch). WAL mode, locking and several
// connections to one file behave exactly as without the shim. Only these
// operations can fail on purpose:
//
//   fault        operation                               result
//   disk full    xWrite; xTruncate growing the file      SQLITE_FULL
//   write error  xWrite; xTruncate                       SQLITE_IOERR_WRITE /
//                                                        SQLITE_IOERR_TRUNCATE
//   read error   xRead                                   SQLITE_IOERR_READ
//   fsync error  xSync                                   SQLITE_IOERR_FSYNC
//
// A failed operation does nothing (a failed write writes no byte); with both
// a write error and disk full set, the I/O error is reported. While a
// disk-full or write fault is set, SQLITE_FCNTL_SIZE_HINT (preallocation) is
// not passed on, so the file cannot grow behind the shim's back; while a
// read fault is set, xFetch hands out no mapping, so every read goes through
// xRead and fails. Opening a database reads its header, so with a read
// fault opening it fails too.
//
// Which files: faults are keyed by the basename of a database file
// ("state.db") and apply to that database file, its rollback journal
// ("state.db-journal"), its WAL ("state.db-wal") and the super-journal of a
// multi-database commit whose main database it is ("state.db-mjXXXXXXXXX"), in
// any directory. The -shm file is never faulted: the wrapped VFS opens it
// itself (not through xOpen), SQLite maps it into memory through xShmMap of the
// database file and updates it with plain stores, not with xWrite; its
// 32 KiB regions are allocated once, and a full disk shows up as SQLITE_FULL
// on the WAL and database writes, not as a failing wal-index. Failing
// xShmMap would test SQLITE_IOERR_SHMSIZE paths that a full disk does not
// produce, so all xShm* calls are passed on unchanged. Temporary files
// (sorters, statement journals, temp databases) are not faulted either.
//
// Disk full with a budget (Fault::DiskFullAfter(n)): the next n bytes written
// to the database's files (all of them together) succeed; the first write
// that does not fit fails, and from then on every write fails, as on a disk
// that has filled up. Setting the fault again starts a new budget.
//
// Faults change at runtime: Set() and Clear() take effect for the next
// operation, also on connections that are already open. After Clear()
// (space "returns") the next operation runs normally.
//
// Control:
//   - in process: FaultVfs::Install(), then FaultVfs::Set() / Clear();
//   - from the environment, for tests that run the daemon as a process:
//     they run backfilld_faults (backfilld plus this VFS, which calls
//     InstallFaultVfsFromEnvironment(), see below) and write the control
//     file named by BACKFILL_TEST_FAULTS.
//
// Control file format, one database per line:
//
//   # comment (also after a fault)          blank lines are ignored
//   state.db full                           disk full now
//   state.db full-after 65536               disk full after 65536 bytes
//   warehouse.db ioerr-write                writes fail
//   warehouse.db ioerr-read                 reads fail
//   warehouse.db ioerr                      reads and writes fail
//   warehouse.db ioerr-fsync                fsync fails
//
// Several faults for one database, on one line or on several, add up (with
// both `full` and `full-after`, the smaller budget counts). An empty or
// missing file means no faults. Every time the file's content changes, the
// faults it lists replace all faults (also those set with Set()). The file is
// checked with one stat(2) before every xOpen, xRead, xWrite, xTruncate and
// xSync, so the first operation after a change sees it; a change is seen
// from the file's inode, size or timestamps, and while those are younger
// than 100 ms (file timestamps are coarse) the content is compared as well.
// Writing the file with a rename is atomic; a file that does not parse
// (e.g. caught half-written) is ignored: the faults stay as they were and
// ControlFileStatus() says why.
//
// Observability: the VFS does not log; Counters() counts the operations the
// shim failed, by fault and by file.
//
// Ownership: all state is process-wide and lives until the process exits
// (the VFS object must outlive every connection that uses it). Connections
// opened before Install() keep using the VFS they were opened with.
//
// Thread-safety: every function here is thread-safe, and so is the VFS:
// many connections on many threads may use it, and faults may be changed
// while they do. Fault state is read with atomics on every operation; the
// registry of databases and the control file are behind mutexes.

#ifndef BACKFILL_TESTS_TESTING_FAULT_VFS_H_
#define BACKFILL_TESTS_TESTING_FAULT_VFS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace backfill::sqlite {

// The faults of one database. A default-constructed Fault is "no fault".
struct Fault {
  static constexpr int64_t kNotFull = -1;

  // >= 0: disk full once this many more bytes have been written (0: at
  // once). kNotFull: no disk-full fault.
  int64_t full_after_bytes = kNotFull;
  bool read_error = false;   // xRead fails with SQLITE_IOERR_READ
  bool write_error = false;  // xWrite/xTruncate fail with SQLITE_IOERR_WRITE
                             // / SQLITE_IOERR_TRUNCATE
  bool fsync_error = false;  // xSync fails with SQLITE_IOERR_FSYNC

  static Fault DiskFull() { return DiskFullAfter(0); }
  static Fault DiskFullAfter(int64_t bytes);
  static Fault ReadError();
  static Fault WriteError();
  static Fault IoError();  // reads and writes
  static Fault FsyncError();

  bool none() const {
    return full_after_bytes < 0 && !read_error && !write_error && !fsync_error;
  }
  // Adds the faults of `other` (the smaller disk-full budget wins).
  void Merge(const Fault& other);

  friend bool operator==(const Fault& a, const Fault& b) {
    return a.full_after_bytes == b.full_after_bytes &&
           a.read_error == b.read_error && a.write_error == b.write_error &&
           a.fsync_error == b.fsync_error;
  }
  friend bool operator!=(const Fault& a, const Fault& b) { return !(a == b); }
};

// Operations the shim failed on purpose. The first four count each failure
// once by fault; on_database/on_wal/on_journal count the same failures by
// the file they hit (on_journal includes super-journals).
struct FaultCounters {
  int64_t full = 0;          // SQLITE_FULL
  int64_t read_errors = 0;   // SQLITE_IOERR_READ
  int64_t write_errors = 0;  // SQLITE_IOERR_WRITE, SQLITE_IOERR_TRUNCATE
  int64_t fsync_errors = 0;  // SQLITE_IOERR_FSYNC
  int64_t on_database = 0;
  int64_t on_wal = 0;
  int64_t on_journal = 0;

  int64_t total() const {
    return full + read_errors + write_errors + fsync_errors;
  }
};

class FaultVfs {
 public:
  // The name the VFS is registered under (sqlite3_vfs_find(kName)).
  static constexpr char kName[] = "backfill-fault";

  FaultVfs() = delete;

  // Registers the shim as SQLite's default VFS, wrapping the VFS that is the
  // default now. Idempotent. Connections opened afterwards with the default
  // VFS (as sqlite::Database::Open does) go through the shim.
  static absl::Status Install();
  // True once Install() succeeded in this process.
  static bool Installed();

  // Sets the faults of the database whose file is named `file_basename`
  // (e.g. "state.db"; see the header comment for the files this covers),
  // replacing its previous faults. Takes effect for the next operation.
  // INVALID_ARGUMENT when the name is empty, contains '/' or names a
  // -wal/-journal/-shm file instead of the database. Faults may be set
  // before Install(); they bite once the shim is installed.
  static absl::Status Set(const std::string& file_basename, const Fault& fault);
  // Removes the faults of one database / of all databases.
  static void Clear(const std::string& file_basename);
  static void ClearAll();
  // The faults set for `file_basename` (as set, not the remaining budget).
  static Fault Get(const std::string& file_basename);

  // Operations failed so far, for one database or for all of them.
  static FaultCounters Counters(const std::string& file_basename);
  static FaultCounters Counters();
  static void ResetCounters();

  // Installs the shim (if needed) and follows the control file at `path`
  // (format in the header comment): reads it now and whenever it changes.
  // A missing file means no faults; a file that does not parse is
  // INVALID_ARGUMENT ("PATH:LINE: reason") and nothing is followed. An
  // empty `path` stops following and clears all faults.
  static absl::Status WatchControlFile(const std::string& path);
  // OK while no control file is followed or its last read parsed; else why
  // the file's current content was ignored.
  static absl::Status ControlFileStatus();
};

// The environment variable that names the control file.
inline constexpr char kFaultControlEnv[] = "BACKFILL_TEST_FAULTS";

// If and only if $BACKFILL_TEST_FAULTS is set and not empty, installs the
// shim and follows the control file it names (FaultVfs::WatchControlFile);
// otherwise does nothing at all (no VFS is registered, SQLite runs on its
// default VFS with zero overhead) and returns OK. backfilld_faults
// (backfilld for tests, backfilld_faults_main.cc) calls it once, after
// parsing flags and before opening any database.
absl::Status InstallFaultVfsFromEnvironment();

// Parses the content of a control file into faults by database basename.
// INVALID_ARGUMENT "line N: reason" for a line it does not understand.
absl::StatusOr<absl::flat_hash_map<std::string, Fault>> ParseFaultControl(
    std::string_view text);

}  // namespace backfill::sqlite

#endif  // BACKFILL_TESTS_TESTING_FAULT_VFS_H_
