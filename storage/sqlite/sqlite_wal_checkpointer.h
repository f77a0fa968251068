// Background checkpoints of one SQLite database file in WAL mode.
//
// In WAL mode a commit appends pages to the -wal file, and SQLite by default
// copies them back into the database (a checkpoint, two fsyncs) inside the
// commit that takes the log past 1000 pages. That commit's caller then
// waits on the disk while it holds whatever it holds: the state store's
// mutex, a worker's partition. A WalCheckpointer takes that work off the
// committing threads: the connections attached to it report the log's size
// after each commit (sqlite3_wal_hook, which replaces SQLite's own
// auto-checkpoint), and past `pages` frames its own thread runs a PASSIVE
// checkpoint on its own connection (one that waits for no reader or
// writer). If the log still reaches `inline_pages` — the thread cannot keep
// up, or its checkpoints fail — the committing connection checkpoints
// itself, as SQLite would, so the log stays bounded.
//
// A checkpoint that fails (a full disk, an I/O error) is logged and tried
// again at the next signal; nothing that was committed depends on it (the
// log holds every commit until a checkpoint succeeds).
//
// Ownership: the checkpointer owns its connection and its thread. It must
// outlive every connection attached to it (declare it before them in the
// owner, so that it is destroyed after them). Closing the last connection
// to the file checkpoints what is left, as SQLite always does.
//
// Thread-safety: thread-safe. Attach must be called before the attached
// connection is used by another thread; the hook runs on whichever thread
// commits.

#ifndef BACKFILL_STORAGE_SQLITE_SQLITE_WAL_CHECKPOINTER_H_
#define BACKFILL_STORAGE_SQLITE_SQLITE_WAL_CHECKPOINTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "storage/sqlite/sqlite_db.h"

struct sqlite3;

namespace backfill::sqlite {

class WalCheckpointer {
 public:
  struct Options {
    // Frames in the log that wake the thread (SQLite's own threshold).
    int64_t pages = 1000;
    // Frames at which the committing connection checkpoints itself.
    int64_t inline_pages = 16000;
    // The thread's name (thread_name.h).
    std::string thread_name = "bf-checkpoint";
  };

  // Opens a connection of its own to `path` (a file already in WAL mode)
  // and starts the thread.
  static absl::StatusOr<std::unique_ptr<WalCheckpointer>> Start(
      const std::string& path, Options options);
  static absl::StatusOr<std::unique_ptr<WalCheckpointer>> Start(
      const std::string& path) {
    return Start(path, Options());
  }

  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;
  // Stops the thread (a checkpoint running finishes first).
  ~WalCheckpointer();

  // Hands the checkpoints of `db`, a read-write connection to the same
  // file, to this checkpointer.
  void Attach(Database* db);

  // Checkpoints run by the thread and by committing connections (inline),
  // checkpoints that failed (one that found another running is neither),
  // and the frames in the log and copied into the database at the thread's
  // last checkpoint; for tests and logs.
  struct Counts {
    int64_t background = 0;
    int64_t inline_ = 0;
    int64_t failed = 0;
    int64_t log_frames = 0;
    int64_t copied_frames = 0;
  };
  Counts counts() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  WalCheckpointer(std::unique_ptr<Database> db, Options options);

  // sqlite3_wal_hook's callback: `arg` is the checkpointer.
  static int Hook(void* arg, sqlite3* db, const char* schema, int pages);
  void Loop();

  const Options options_;
  std::unique_ptr<Database> db_;  // used by the thread only

  mutable absl::Mutex mu_;
  bool wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Counts counts_ ABSL_GUARDED_BY(mu_);
  std::string last_error_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;
};

}  // namespace backfill::sqlite

#endif  // BACKFILL_STORAGE_SQLITE_SQLITE_WAL_CHECKPOINTER_H_
