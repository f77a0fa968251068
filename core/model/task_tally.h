// TaskTally: a job's figures summed over its partition tasks, as every
// StateStore reports them on a read of the job (core/model/job.h): its counts
// by state, its actual cost (the input rows of the tasks recomputed so far:
// STAGED, PUBLISHED and UNCHANGED), its rows written (STAGED and
// PUBLISHED: an UNCHANGED partition is not republished), its recompute
// times (the recomputed tasks with a recorded duration), and per dataset
// its partitions and actual cost. The one definition of which task counts
// where, so that stores keeping the sums (by task, or by groups of tasks)
// agree.
//
// A plain value type; not synchronized.

#ifndef BACKFILL_CORE_MODEL_TASK_TALLY_H_
#define BACKFILL_CORE_MODEL_TASK_TALLY_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "core/model/job.h"

namespace backfill {

// Which tasks a job's actual cost and recompute times count (their input
// rows were read), and which its rows written count.
bool CountsInputRows(TaskState state);
bool CountsRowsWritten(TaskState state);

struct TaskTally {
  PartitionCounts counts;
  double actual_cost = 0;
  int64_t rows_written = 0;
  int64_t timed_partitions = 0;
  double timed_seconds = 0;
  // By dataset name: its partitions, and the input rows they read.
  std::map<std::string, std::pair<int64_t, double>> by_dataset;

  // Adds `n` tasks of `dataset` in `state` (a negative `n`, with negative
  // sums, takes them out): their input rows and rows written summed, how
  // many had a recorded duration and those durations summed.
  void Add(const std::string& dataset, TaskState state, int64_t n,
           double input_rows, double rows_written, int64_t timed,
           double seconds);
  // Adds one task (`sign` -1: takes it out).
  void Add(const PartitionTask& task, int sign = 1);

  // Writes the figures into `job`: counts, actual cost, rows written,
  // recompute times, and each of its plan's datasets' partition_count and
  // actual_cost (by name).
  void FillIn(Job* job) const;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_TASK_TALLY_H_
