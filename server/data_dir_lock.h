// DataDirLock: an exclusive lock on a data directory, so that two backfilld
// processes never run the same jobs against the same state store and
// warehouse. It is an flock(2) on `<data-dir>/LOCK`, which also records the
// holder's pid for the error message; the kernel releases it when the
// process exits, however it exits (kill -9 included), so a stale lock file
// never blocks a restart.
//
// Owns the file descriptor; the lock is held for the object's lifetime.
// Not thread-safe (create and destroy it on one thread).

#ifndef BACKFILL_SERVER_DATA_DIR_LOCK_H_
#define BACKFILL_SERVER_DATA_DIR_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace backfill {

class DataDirLock {
 public:
  // FAILED_PRECONDITION naming the holder's pid when another process holds
  // the lock; other errors for an unusable directory.
  static absl::StatusOr<std::unique_ptr<DataDirLock>> Acquire(
      const std::string& data_dir);

  ~DataDirLock();

  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}

  const int fd_;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_DATA_DIR_LOCK_H_
