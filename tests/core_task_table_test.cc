#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/model/task_table.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_task_table_test {
namespace {

// What the table keeps of a task, for comparing it with a model.
struct Kept {
  std::string job_id, dataset, partition, last_error, output_fingerprint;
  TaskState state;
  int attempts;
  int64_t rows_written;
  int64_t ordinal;
  bool operator==(const Kept& o) const {
    return job_id == o.job_id && dataset == o.dataset &&
           partition == o.partition && last_error == o.last_error &&
           output_fingerprint == o.output_fingerprint && state == o.state &&
           attempts == o.attempts && rows_written == o.rows_written &&
           ordinal == o.ordinal;
  }
};

Kept KeptOf(const PartitionTask& t, int64_t ordinal) {
  return {
      t.job_id, t.dataset,  t.partition,    t.last_error, t.output_fingerprint,
      t.state,  t.attempts, t.rows_written, ordinal};
}

void ExpectMatches(const TaskTable& table,
                   const std::vector<PartitionTask>& model) {
  ASSERT_EQ(table.size(), model.size());
  for (size_t i = 0; i < model.size(); ++i) {
    const PartitionTask& m = model[i];
    const PartitionTask back = table.Task(i);
    EXPECT_TRUE(KeptOf(back, back.ordinal) ==
                KeptOf(m, static_cast<int64_t>(i)))
        << "task " << i;
    EXPECT_EQ(table.dataset(i), m.dataset);
    EXPECT_EQ(table.partition(i), m.partition);
    EXPECT_EQ(table.state(i), m.state);
    EXPECT_EQ(table.attempts(i), m.attempts);
    EXPECT_EQ(table.rows_written(i), m.rows_written);
    EXPECT_EQ(table.output_fingerprint(i), m.output_fingerprint);
    EXPECT_EQ(table.last_error(i), m.last_error);
  }
}

std::string RandomText(std::mt19937* rng, size_t max_size) {
  std::uniform_int_distribution<size_t> size(0, max_size);
  std::uniform_int_distribution<int> byte(0, 255);
  std::string s(size(*rng), '\0');
  for (char& c : s) c = static_cast<char>(byte(*rng));
  return s;
}

PartitionTask RandomTask(std::mt19937* rng, const std::string& job_id) {
  static const char* const kDatasets[] = {"orders", "daily_revenue", "",
                                          "a_dataset_name_longer_than_sso"};
  PartitionTask t;
  t.job_id = job_id;
  t.dataset = kDatasets[(*rng)() % 4];
  // Hours, the empty partition of an unpartitioned dataset, and time x key
  // partitions longer than any small-string buffer (and than 255 bytes).
  switch ((*rng)() % 3) {
    case 0:
      t.partition = absl::StrFormat("2025-01-%02dT%02d", 1 + (*rng)() % 28,
                                    (*rng)() % 24);
      break;
    case 1:
      t.partition = "";
      break;
    default:
      t.partition = absl::StrCat("2025-01-01|", RandomText(rng, 400));
  }
  t.state = static_cast<TaskState>((*rng)() % kTaskStateCount);
  t.attempts = static_cast<int>((*rng)() % 5);
  t.rows_written = static_cast<int64_t>((*rng)()) - (1LL << 31);
  t.output_fingerprint = RandomText(rng, 70);
  if ((*rng)() % 4 == 0) t.last_error = RandomText(rng, 40);
  // Left out by the table.
  t.inputs = {{"orders", t.partition, "fp", 3}};
  t.duration_seconds = 1.5;
  t.reason = "requested";
  return t;
}

TEST(TaskTableTest, AnEmptyTableHasNoTasks) {
  const TaskTable table;
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.size(), 0u);
  EXPECT_TRUE(TaskTable(std::vector<PartitionTask>{}).empty());
}

TEST(TaskTableTest, KeepsWhatTheRunnerReadsAndLeavesOutWhatOnlyTheStoreNeeds) {
  PartitionTask t;
  t.job_id = "bf-7";
  t.dataset = "orders";
  t.partition = "2025-03-31T23";
  t.state = TaskState::kStaged;
  t.attempts = 2;
  t.rows_written = 42;
  t.output_fingerprint = "0123456789abcdef";
  t.last_error = "";
  t.inputs = {{"raw", "2025-03-31T23", "ff", 9}};
  t.duration_seconds = 0.25;
  t.update_time = absl::FromUnixSeconds(1000);
  t.reason = "requested";
  t.ordinal = 99;
  const TaskTable table({t});
  const PartitionTask back = table.Task(0);
  EXPECT_EQ(table.job_id(), "bf-7");
  EXPECT_EQ(back.job_id, "bf-7");
  EXPECT_EQ(back.dataset, "orders");
  EXPECT_EQ(back.partition, "2025-03-31T23");
  EXPECT_EQ(back.state, TaskState::kStaged);
  EXPECT_EQ(back.attempts, 2);
  EXPECT_EQ(back.rows_written, 42);
  EXPECT_EQ(back.output_fingerprint, "0123456789abcdef");
  EXPECT_EQ(back.last_error, "");
  EXPECT_EQ(back.ordinal, 0);  // its position in the table
  EXPECT_TRUE(back.inputs.empty());
  EXPECT_EQ(back.duration_seconds, 0);
  EXPECT_EQ(back.update_time, absl::InfinitePast());
  EXPECT_EQ(back.reason, "");
}

// Generated tasks, then generated updates: the table always answers what a
// plain vector of the same tasks holds.
TEST(TaskTableTest, AnswersAsAVectorOfTasksOverGeneratedUpdates) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937 rng(seed);
    const std::string job_id = seed % 2 ? "bf-1" : "a-job-id-longer-than-sso";
    std::vector<PartitionTask> model(rng() % 200);
    for (PartitionTask& t : model) t = RandomTask(&rng, job_id);
    TaskTable table(model);
    ASSERT_NO_FATAL_FAILURE(ExpectMatches(table, model));
    for (int step = 0; step < 300 && !model.empty(); ++step) {
      const size_t i = rng() % model.size();
      PartitionTask next = RandomTask(&rng, job_id);
      next.dataset = model[i].dataset;
      next.partition = model[i].partition;
      switch (rng() % 4) {
        case 0:  // the state alone
          table.set_state(i, next.state);
          model[i].state = next.state;
          break;
        case 1:  // the same fingerprint again
          next.output_fingerprint = model[i].output_fingerprint;
          [[fallthrough]];
        default:
          table.Set(i, next);
          model[i].state = next.state;
          model[i].attempts = next.attempts;
          model[i].rows_written = next.rows_written;
          model[i].output_fingerprint = next.output_fingerprint;
          model[i].last_error = next.last_error;
      }
    }
    ASSERT_NO_FATAL_FAILURE(ExpectMatches(table, model));
    // A copy answers the same, and changes apart from the original.
    TaskTable copy = table;
    ASSERT_NO_FATAL_FAILURE(ExpectMatches(copy, model));
    if (!model.empty()) {
      PartitionTask changed = model[0];
      changed.output_fingerprint += "x";
      changed.last_error = "boom";
      copy.Set(0, changed);
      ASSERT_NO_FATAL_FAILURE(ExpectMatches(table, model));
      EXPECT_EQ(copy.output_fingerprint(0), changed.output_fingerprint);
      EXPECT_EQ(copy.last_error(0), "boom");
    }
  }
}

TEST(TaskTableTest, ATableBuiltTaskByTaskAnswersAsOneBuiltAtOnce) {
  std::mt19937 rng(7);
  std::vector<PartitionTask> tasks(500);
  for (PartitionTask& t : tasks) t = RandomTask(&rng, "bf-3");
  TaskTable appended;
  appended.Reserve(10);  // fewer than it gets
  for (const PartitionTask& t : tasks) appended.Append(t);
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(appended, tasks));
  EXPECT_EQ(appended.job_id(), "bf-3");
}

TEST(TaskTableTest, AnErrorClearedIsGone) {
  PartitionTask t;
  t.job_id = "bf-1";
  t.dataset = "d";
  t.partition = "2025-01-01";
  t.last_error = "disk full";
  TaskTable table({t});
  EXPECT_EQ(table.last_error(0), "disk full");
  t.last_error.clear();
  table.Set(0, t);
  EXPECT_EQ(table.last_error(0), "");
  EXPECT_EQ(table.Task(0).last_error, "");
}

// The point of the table: a job of many hour partitions costs tens of
// bytes a task, not hundreds.
TEST(TaskTableTest, HourTasksCostUnderEightyBytesEach) {
  constexpr int kTasks = 100000;
  std::vector<PartitionTask> tasks(kTasks);
  for (int i = 0; i < kTasks; ++i) {
    PartitionTask& t = tasks[i];
    t.job_id = "bf-12";
    t.dataset = "hourly_ticks";
    t.partition =
        absl::StrFormat("%04d-%02d-%02dT%02d", 2010 + i / 8760,
                        1 + (i / 720) % 12, 1 + (i / 24) % 28, i % 24);
    t.state = TaskState::kStaged;
    t.rows_written = 1;
    t.output_fingerprint = absl::StrFormat("%016x", i * 2654435761u);
    t.inputs = {{"ticks", t.partition, "0123456789abcdef", 10}};
  }
  const TaskTable table(tasks);
  EXPECT_LT(table.HeapBytes(), size_t{80} * kTasks);
  EXPECT_GT(table.HeapBytes(), size_t{29} * kTasks);  // 13 + 16 characters
}

}  // namespace
}  // namespace core_task_table_test
}  // namespace backfill
