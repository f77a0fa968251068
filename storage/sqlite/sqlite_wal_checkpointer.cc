#include "storage/sqlite/sqlite_wal_checkpointer.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/base/thread_name.h"
#include "spdlog/spdlog.h"

namespace backfill::sqlite {

absl::StatusOr<std::unique_ptr<WalCheckpointer>> WalCheckpointer::Start(
    const std::string& path, Options options) {
  OpenOptions open;
  open.create = false;
  ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(path, open));
  ASSIGN_OR_RETURN(std::string mode, db->QueryText("PRAGMA journal_mode"));
  if (mode != "wal") {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not in WAL mode (", mode, ")"));
  }
  RETURN_IF_ERROR(db->Exec("PRAGMA synchronous=NORMAL"));
  // A connection opens the log at its first read; until then a checkpoint
  // on it does nothing.
  RETURN_IF_ERROR(db->QueryInt("SELECT COUNT(*) FROM sqlite_schema").status());
  std::unique_ptr<WalCheckpointer> out(
      new WalCheckpointer(std::move(db), options));
  out->thread_ = std::thread([c = out.get(), name = options.thread_name] {
    NameThisThread(name);
    c->Loop();
  });
  return out;
}

WalCheckpointer::WalCheckpointer(std::unique_ptr<Database> db, Options options)
    : options_(options), db_(std::move(db)) {}

WalCheckpointer::~WalCheckpointer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void WalCheckpointer::Attach(Database* db) {
  sqlite3_wal_hook(db->raw(), &WalCheckpointer::Hook, this);
}

WalCheckpointer::Counts WalCheckpointer::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

int WalCheckpointer::Hook(void* arg, sqlite3* db, const char* schema,
                          int pages) {
  auto* self = static_cast<WalCheckpointer*>(arg);
  if (pages >= self->options_.inline_pages) {
    // The thread has fallen behind: checkpoint here, as SQLite would (its
    // result, like SQLite's own auto-checkpoint's, is not the commit's).
    const int rc = sqlite3_wal_checkpoint_v2(
        db, schema, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    absl::MutexLock lock(&self->mu_);
    if (rc == SQLITE_OK) {
      ++self->counts_.inline_;
    } else if ((rc & 0xff) != SQLITE_BUSY) {
      ++self->counts_.failed;
    }
    return SQLITE_OK;
  }
  if (pages >= self->options_.pages) {
    absl::MutexLock lock(&self->mu_);
    self->wanted_ = true;
  }
  return SQLITE_OK;
}

void WalCheckpointer::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WalCheckpointer* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
            return c->wanted_ || c->stopping_;
          },
          this));
      if (stopping_) return;
      wanted_ = false;
    }
    int log = 0, copied = 0;
    const int rc = sqlite3_wal_checkpoint_v2(
        db_->raw(), "main", SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
    absl::MutexLock lock(&mu_);
    if (rc == SQLITE_OK) {
      ++counts_.background;
      counts_.log_frames = log;
      counts_.copied_frames = copied;
      if (!last_error_.empty()) {
        spdlog::info("{}: WAL checkpoints succeed again", db_->path());
        last_error_.clear();
      }
    } else if ((rc & 0xff) != SQLITE_BUSY) {
      // BUSY: another checkpoint is running; the next commit signals again.
      ++counts_.failed;
      std::string error = sqlite3_errmsg(db_->raw());
      if (error != last_error_) {
        spdlog::warn(
            "{}: WAL checkpoint failed ({}); the log keeps every commit and "
            "the checkpoint is tried again at the next commit",
            db_->path(), error);
        last_error_ = std::move(error);
      }
    }
  }
}

}  // namespace backfill::sqlite
