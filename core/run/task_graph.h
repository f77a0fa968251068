// TaskGraph: the partition tasks of one job, the dependencies between them
// and the queue of tasks ready to run. Pure bookkeeping: no I/O, no locking,
// no clock. The job runner owns one per job (ActiveJob::graph) and calls it
// under its lock; a task is its index in the plan order the graph was built
// from (ActiveJob::tasks holds the tasks themselves). Not thread-safe; a
// value type (a copy is independent).
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
// conditions).
//
// Representation, sized for jobs of a million partitions: partition values
// are needed only to find the edges, so the constructor consumes the tasks
// and keeps per task only its dataset (an index into the job's few
// datasets), state, outcome, how many inputs it waits for and whether it
// is queued: about 10 bytes, 4 more while it is in the ready queue.
// Partition edges are kept both ways in compressed rows: 4 bytes per task
// and direction (none when the job has no partition edge) and 4 bytes per
// edge and direction. Whole-table reads are kept per dataset, since every
// task of a dataset reads the same upstreams whole (such a dataset lists
// its tasks, 4 bytes each); only a task whose partition its rollup or
// lookback could not map reads one whole on its own. Task and edge counts
// must fit in 32 bits.

#ifndef BACKFILL_CORE_RUN_TASK_GRAPH_H_
#define BACKFILL_CORE_RUN_TASK_GRAPH_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "core/model/catalog.h"
#include "core/model/partition_layout.h"
#include "core/model/task_table.h"

namespace backfill {

class TaskGraph {
 public:
  enum class Node : uint8_t { kPending, kRunning, kDone, kFailed };
  enum class Outcome : uint8_t { kChanged, kUnchanged, kSkipped };

  // A task as the constructor takes it.
  struct Task {
    std::string dataset;
    std::string partition;
    Node state = Node::kPending;
    Outcome outcome = Outcome::kChanged;  // meaningful once kDone
  };

  // `upstream_of(dataset)` gives a dataset's upstream edges (none for an
  // unknown dataset); `grain_of(dataset)` its grain or layout (a Grain
  // converts), which rollup and lookback edges, and identity edges between
  // a time x key dataset and a time one, need. Each is called at most once
  // per dataset. Tasks keep their index.
  TaskGraph(std::vector<Task> tasks,
            const std::function<std::vector<UpstreamEdge>(
                const std::string& dataset)>& upstream_of,
            const std::function<PartitionLayout(const std::string& dataset)>&
                grain_of = nullptr);
  // The same over a job's task table, read in place: each task's node and
  // outcome are NodeOf and OutcomeOf its state.
  TaskGraph(const TaskTable& tasks,
            const std::function<std::vector<UpstreamEdge>(
                const std::string& dataset)>& upstream_of,
            const std::function<PartitionLayout(const std::string& dataset)>&
                grain_of = nullptr);

  // What a task's recorded state means here: STAGED, PUBLISHED, UNCHANGED
  // and SKIPPED are done (UNCHANGED and SKIPPED with those outcomes, the
  // others changed), FAILED is failed, anything else pending.
  static Node NodeOf(TaskState state);
  static Outcome OutcomeOf(TaskState state);

  size_t size() const { return dataset_of_.size(); }
  Node state(size_t i) const { return state_[i]; }
  // Meaningful once done.
  Outcome outcome(size_t i) const { return outcome_[i]; }
  const std::string& dataset(size_t i) const {
    return datasets_[dataset_of_[i]].name;
  }

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
  // The tasks of the job that task i reads partition by partition, in the
  // order of its dataset's upstream edges; valid while the graph is.
  absl::Span<const uint32_t> IdentityInputs(size_t i) const {
    return inputs_.Row(i);
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
  // Builds the graph over `tasks`: size(), dataset(i) and partition(i)
  // (strings or string views), node(i) and outcome(i).
  template <typename Tasks>
  void Build(const Tasks& tasks,
             const std::function<std::vector<UpstreamEdge>(
                 const std::string& dataset)>& upstream_of,
             const std::function<PartitionLayout(const std::string& dataset)>&
                 grain_of);

  // Rows of task indices: row r is flat[offsets[r], offsets[r + 1]). No
  // offsets at all when every row is empty.
  struct Rows {
    std::vector<uint32_t> offsets;
    std::vector<uint32_t> flat;

    absl::Span<const uint32_t> Row(size_t r) const {
      if (offsets.empty()) return {};
      return absl::Span<const uint32_t>(flat.data() + offsets[r],
                                        offsets[r + 1] - offsets[r]);
    }
  };

  struct Dataset {
    std::string name;
    // Its tasks not done, and its done tasks whose outcome is kChanged.
    size_t remaining = 0;
    size_t changed = 0;
    // The in-job datasets each of its tasks reads whole, once per edge.
    std::vector<uint32_t> reads_whole;
    // The in-job datasets that read it whole (once per edge), and the tasks
    // that read it whole on their own (once per edge, ascending).
    std::vector<uint32_t> whole_reader_datasets;
    std::vector<uint32_t> whole_reader_tasks;
    // Its tasks, ascending; kept only when it reads a dataset whole.
    std::vector<uint32_t> tasks;
  };

  void Rebuild();
  void Release(size_t i);
  void Wake(uint32_t d);
  // The tasks that read dataset u whole, ascending, once per edge.
  std::vector<uint32_t> WholeReaders(uint32_t u) const;
  // The datasets task i reads whole on its own: [first, last) of
  // task_reads_whole_.
  std::pair<size_t, size_t> OwnWholeReads(size_t i) const;

  std::vector<Dataset> datasets_;
  // Per task.
  std::vector<uint32_t> dataset_of_;
  std::vector<Node> state_;
  std::vector<Outcome> outcome_;
  std::vector<int32_t> waiting_;  // inputs not done, whole datasets included
  std::vector<bool> queued_;      // in ready_
  // Partition edges (identity, rollup, lookback), both ways: the in-job
  // upstream tasks a task reads, and the tasks that read it.
  Rows inputs_;
  Rows dependents_;
  // (task, upstream dataset) for the rare task that reads an upstream whole
  // on its own; by task.
  std::vector<std::pair<uint32_t, uint32_t>> task_reads_whole_;
  std::deque<uint32_t> ready_;
  size_t remaining_ = 0;
  size_t running_ = 0;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_TASK_GRAPH_H_
