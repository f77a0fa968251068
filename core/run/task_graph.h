// TaskGraph: the partition tasks of one job, the dependencies between them
// and the queue of tasks ready to run. Pure bookkeeping: no I/O, no locking,
// no clock. The job runner owns one per job and calls it under its lock.
//
// Dependencies come from the upstream edges of the job's datasets:
//   - identity: task (D, P) waits for task (U, P) of an upstream U in the
//     same job, if the job has it (between a time x key dataset and a time
//     one, for the partitions the mapping reads: T|K waits for T, T for
//     every T|k);
//   - rollup, lookback N: task (D, P) waits for the tasks of an upstream U
//     in the same job for every partition it reads (the finer partitions
//     inside P; P-N .. P), those the job has (see upstream_mapping.h);
//   - all: every task of D waits until every task of an upstream U in the
//     same job is done (a whole-table input).
// Without `grain_of` (or for a partition the mapping cannot map) a rollup
// or lookback task waits for every task of the upstream, as for `all`.
// A task is ready when it is pending and waits for nothing; ready tasks are
// handed out in the order they became ready (plan order at first), a task
// put back goes to the front.
//
// Node states: kPending (waiting or ready), kRunning (handed out), kDone
// (staged, or settled by the early cutoff), kFailed. A done task has an
// outcome: kChanged (staged to be published), kUnchanged (recomputed
// identical to the published version) or kSkipped (never run: it read only
// unchanged or skipped tasks). ReadsOnlyUnchanged() tells the runner when a
// ready task is a candidate for skipping (early_cutoff.h has the other
// conditions). Not thread-safe.

#ifndef BACKFILL_CORE_RUN_TASK_GRAPH_H_
#define BACKFILL_CORE_RUN_TASK_GRAPH_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model/catalog.h"

namespace backfill {

class TaskGraph {
 public:
  enum class Node { kPending, kRunning, kDone, kFailed };
  enum class Outcome { kChanged, kUnchanged, kSkipped };

  struct Task {
    std::string dataset;
    std::string partition;
    Node state = Node::kPending;
    Outcome outcome = Outcome::kChanged;  // meaningful once kDone
  };

  // `upstream_of(dataset)` gives a dataset's upstream edges (none for an
  // unknown dataset); `grain_of(dataset)` its grain or layout (a Grain
  // converts), which rollup and lookback edges, and identity edges between
  // a time x key dataset and a time one, need. Tasks keep their index.
  TaskGraph(std::vector<Task> tasks,
            const std::function<std::vector<UpstreamEdge>(
                const std::string& dataset)>& upstream_of,
            const std::function<PartitionLayout(const std::string& dataset)>&
                grain_of = nullptr);

  size_t size() const { return tasks_.size(); }
  const Task& task(size_t i) const { return tasks_[i]; }

  // Tasks not done.
  size_t remaining() const { return remaining_; }
  bool AllDone() const { return remaining_ == 0; }
  size_t running() const { return running_; }
  size_t ready() const { return ready_.size(); }
  size_t CountIn(Node state) const;

  // Hands out the first ready task for which `accept` (if given) is true,
  // and marks it running; nullopt when none.
  std::optional<size_t> Pop(
      const std::function<bool(size_t)>& accept = nullptr);

  // A running task was staged: done; tasks waiting only for it become
  // ready.
  void Done(size_t i) { Done(i, Outcome::kChanged); }
  // The same, with the early cutoff's outcome.
  void Done(size_t i, Outcome outcome);

  // True when task i reads at least one task of the job, and every task of
  // the job it reads (its identity inputs, and every task of each in-job
  // dataset it reads whole) is done, unchanged or skipped. False for a task
  // that reads nothing in the job, and while an input is not done.
  bool ReadsOnlyUnchanged(size_t i) const;
  // The tasks of the job that task i reads partition by partition.
  const std::vector<size_t>& IdentityInputs(size_t i) const {
    return identity_inputs_[i];
  }
  // A running task goes back to pending, at the front of the queue (to be
  // retried, or because it was handed out but never ran).
  void Return(size_t i);
  // A running task failed for good.
  void Fail(size_t i);
  // Failed tasks become pending again (a retry of the job).
  void ResetFailed();
  // Done tasks whose staged rows were lost become pending again, with every
  // done task that read them (transitively).
  void Reopen(const std::vector<size_t>& lost);
  // Forgets the ready queue (a job that stops dispatching); Requeue()
  // rebuilds it from the pending tasks that wait for nothing.
  void ClearReady();
  void Requeue();

 private:
  void Rebuild();
  void Release(size_t i);

  std::vector<Task> tasks_;
  // Partition edges (identity, rollup, lookback): task -> tasks that read
  // it.
  std::vector<std::vector<size_t>> dependents_;
  // Dataset -> tasks that read the whole of it, within the job.
  std::map<std::string, std::vector<size_t>> all_readers_;
  // Per task: the in-job upstream tasks it reads by partition (any mapping
  // but all) and the in-job whole-table upstream datasets it reads.
  std::vector<std::vector<size_t>> identity_inputs_;
  std::vector<std::vector<std::string>> all_inputs_;
  std::map<std::string, size_t> dataset_remaining_;
  // Per dataset: its done tasks whose outcome is kChanged.
  std::map<std::string, size_t> dataset_changed_;
  std::vector<int> waiting_;
  std::deque<size_t> ready_;
  std::vector<bool> queued_;
  size_t remaining_ = 0;
  size_t running_ = 0;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_TASK_GRAPH_H_
