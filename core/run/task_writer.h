// TaskWriter: writes partition tasks (starts and checkpoints) to the state
// store from a thread of its own, committing everything queued by every
// worker since its last commit in one transaction (group commit).
//
// A worker that stages a batch of short partitions queues each start and
// each checkpoint as it comes and goes on staging, and many partitions'
// rows cost the store one commit. Once something is queued, the writer
// gathers more for at most `Options::gather` (2 ms) or until
// `Options::group_rows` rows are queued, whichever comes first, and not at
// all once a worker waits for its writes (Hurry): a commit's cost is
// mostly per commit (its pages written to the log, then checkpointed), so
// a few rows per commit would spend most of the writer's time, and of the
// checkpointer's, on the same pages. A checkpoint is thus held back by at
// most the gather time, never by the staging of a later partition. The
// worker waits once, at the end of its batch, until each of its writes is
// committed (or failed); only then does it count a partition done, so a
// partition is reported checkpointed only once its checkpoint is durable,
// as when each was written alone.
//
// Writes are applied in the order they were queued; rows are written
// whole, so when one commit holds several writes of the same task (a
// partition's start and its checkpoint, queued while the previous commit
// ran) only the last is written, with the same result. A commit is retried
// by `persist` (the runner's retry of transient storage failures); if it
// still fails and held several writes, each write is tried again alone,
// so that one bad row fails only its own write.
//
// Ownership: the writer owns its thread; the store must outlive it.
// Thread-safety: thread-safe. `done` callbacks run on the writer's thread,
// without the writer's lock held.

#ifndef BACKFILL_CORE_RUN_TASK_WRITER_H_
#define BACKFILL_CORE_RUN_TASK_WRITER_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/model/job.h"
#include "core/ports/state_store.h"

namespace backfill {

class TaskWriter {
 public:
  // Runs `write` (retrying it while storage fails, as the caller decides)
  // and returns its final status; `what` names it for messages.
  using Persist = std::function<absl::Status(
      const std::string& what, const std::function<absl::Status()>& write)>;
  // Called once a write is committed (OK) or has failed for good.
  using Done = std::function<void(const absl::Status&)>;

  struct Options {
    // Rows queued at which a commit starts without gathering more.
    size_t group_rows = 64;
    // How long the writer gathers rows for a commit, from when it takes up
    // a non-empty queue (at once if idle, else after its commit).
    absl::Duration gather = absl::Milliseconds(2);
  };

  TaskWriter(StateStore* store, Persist persist, Options options);
  TaskWriter(StateStore* store, Persist persist)
      : TaskWriter(store, std::move(persist), Options()) {}
  // Writes what is queued, then stops the thread.
  ~TaskWriter();

  TaskWriter(const TaskWriter&) = delete;
  TaskWriter& operator=(const TaskWriter&) = delete;

  // Queues `rows` (StateStore::UpdateTasks) after every write queued
  // before; `done` (may be null) runs once they are written or failed.
  void Write(std::vector<PartitionTask> rows, Done done)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Someone waits for what is queued: the next commit starts without
  // gathering more rows. Call it after queueing what you will wait for.
  void Hurry() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Queued {
    std::vector<PartitionTask> rows;
    Done done;
  };
  void Loop();

  StateStore* const store_;
  const Persist persist_;
  const Options options_;

  absl::Mutex mu_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_rows_ ABSL_GUARDED_BY(mu_) = 0;
  bool hurry_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_TASK_WRITER_H_
