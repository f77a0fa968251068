// TaskWriter (core/run/task_writer.h) over the in-memory state store: writes
// queued while a commit runs are committed together in the next one, in
// the order they were queued, a task written twice in one commit as its
// last row; a write that cannot be applied fails alone;
// a transient failure is retried through the given persist function; rows
// queued while the writer gathers share a commit, which a waiting worker or
// the gathering's time limit starts; and what is queued when the writer is
// destroyed is still written.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/run/task_writer.h"
#include "gtest/gtest.h"
#include "tests/testing/memory_state_store.h"

namespace backfill {
namespace core_task_writer_test {
namespace {

using testing::InMemoryStateStore;

class TaskWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Job job;
    job.request.dataset = "orders";
    job.plan.datasets = {
        {"orders", {"2025-01-01", "2025-01-02", "2025-01-03"}, "", "", {}}};
    absl::StatusOr<CreateJobResult> created =
        store_.CreateJob(job, absl::FromUnixSeconds(1700000000));
    ASSERT_TRUE(created.ok()) << created.status();
    id_ = created->job.id;
  }

  PartitionTask Task(const std::string& partition, TaskState state) {
    for (const PartitionTask& t : Tasks()) {
      if (t.partition == partition) {
        PartitionTask out = t;
        out.state = state;
        return out;
      }
    }
    PartitionTask missing;
    missing.job_id = id_;
    missing.dataset = "orders";
    missing.partition = partition;
    missing.state = state;
    return missing;
  }

  TaskState StateOf(const std::string& partition) {
    for (const PartitionTask& t : Tasks()) {
      if (t.partition == partition) return t.state;
    }
    return TaskState::kCancelled;
  }

  // The first commit tells `in_commit` and waits for `release`.
  void HoldFirstCommit(absl::Notification* in_commit,
                       absl::Notification* release) {
    auto first = std::make_shared<bool>(true);
    store_.SetWriteHook([=](const std::string& method) {
      if (method == "UpdateTasks" && *first) {
        *first = false;
        in_commit->Notify();
        release->WaitForNotification();
      }
      return absl::OkStatus();
    });
  }

  // Persist without retries.
  static absl::Status Once(const std::string&,
                           const std::function<absl::Status()>& write) {
    return write();
  }

  std::vector<PartitionTask> Tasks() {
    absl::StatusOr<std::vector<PartitionTask>> tasks = store_.ListTasks(id_);
    EXPECT_TRUE(tasks.ok()) << tasks.status();
    return tasks.ok() ? *std::move(tasks) : std::vector<PartitionTask>();
  }

  InMemoryStateStore store_;
  std::string id_;
};

TEST_F(TaskWriterTest, WritesQueuedDuringACommitGoInTheNextOneInOrder) {
  absl::Notification in_commit, release;
  HoldFirstCommit(&in_commit, &release);
  absl::Mutex mu;
  std::vector<std::string> done;
  auto note = [&](const std::string& name) {
    return [&, name](const absl::Status& s) {
      absl::MutexLock lock(&mu);
      done.push_back(name + (s.ok() ? "" : " failed"));
    };
  };
  std::vector<std::string> commits;  // what each commit wrote
  {
    TaskWriter writer(&store_, [&](const std::string& what,
                                   const std::function<absl::Status()>& write) {
      {
        absl::MutexLock lock(&mu);
        commits.push_back(what);
      }
      return write();
    });
    writer.Write({Task("2025-01-01", TaskState::kRunning)}, note("a"));
    in_commit.WaitForNotification();
    // While `a` commits: a start and its checkpoint, and another row.
    writer.Write({Task("2025-01-02", TaskState::kRunning)}, note("b"));
    writer.Write({Task("2025-01-02", TaskState::kStaged)}, note("c"));
    writer.Write({Task("2025-01-03", TaskState::kStaged)}, note("d"));
    release.Notify();
  }  // the destructor writes what is queued
  EXPECT_EQ(done, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(store_.write_calls("UpdateTasks"), 2);
  // b and c are one task's rows: the second commit writes c's alone.
  EXPECT_EQ(commits,
            (std::vector<std::string>{
                "writing the starts and checkpoints of 1 partition",
                "writing the starts and checkpoints of 2 partitions"}));
  EXPECT_EQ(StateOf("2025-01-01"), TaskState::kRunning);
  EXPECT_EQ(StateOf("2025-01-02"), TaskState::kStaged);  // c after b
  EXPECT_EQ(StateOf("2025-01-03"), TaskState::kStaged);
}

TEST_F(TaskWriterTest, AWriteThatCannotBeAppliedFailsAlone) {
  absl::Notification in_commit, release;
  HoldFirstCommit(&in_commit, &release);
  absl::Mutex mu;
  std::vector<absl::StatusCode> codes(4, absl::StatusCode::kUnknown);
  auto note = [&](int i) {
    return [&, i](const absl::Status& s) {
      absl::MutexLock lock(&mu);
      codes[i] = s.code();
    };
  };
  {
    TaskWriter writer(&store_, &TaskWriterTest::Once);
    writer.Write({Task("2025-01-01", TaskState::kRunning)}, note(0));
    in_commit.WaitForNotification();
    writer.Write({Task("2025-01-02", TaskState::kStaged)}, note(1));
    writer.Write({Task("2099-12-31", TaskState::kStaged)}, note(2));  // none
    writer.Write({Task("2025-01-03", TaskState::kStaged)}, note(3));
    release.Notify();
  }
  EXPECT_EQ(codes, (std::vector<absl::StatusCode>{
                       absl::StatusCode::kOk, absl::StatusCode::kOk,
                       absl::StatusCode::kNotFound, absl::StatusCode::kOk}));
  EXPECT_EQ(StateOf("2025-01-02"), TaskState::kStaged);
  EXPECT_EQ(StateOf("2025-01-03"), TaskState::kStaged);
}

TEST_F(TaskWriterTest, ATransientFailureIsRetriedByPersist) {
  int failures = 2;
  store_.SetWriteHook([&](const std::string& method) {
    if (method == "UpdateTasks" && failures > 0) {
      --failures;
      return absl::UnavailableError("disk busy");
    }
    return absl::OkStatus();
  });
  int attempts = 0;
  absl::Notification written;
  absl::Status result = absl::UnknownError("not called");
  {
    TaskWriter writer(&store_, [&](const std::string& what,
                                   const std::function<absl::Status()>& write) {
      EXPECT_NE(what.find("1 partition"), std::string::npos) << what;
      while (true) {
        ++attempts;
        absl::Status s = write();
        if (s.code() != absl::StatusCode::kUnavailable) return s;
      }
    });
    writer.Write({Task("2025-01-01", TaskState::kStaged)},
                 [&](const absl::Status& s) {
                   result = s;
                   written.Notify();
                 });
    written.WaitForNotification();
  }
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(attempts, 3);
  EXPECT_EQ(StateOf("2025-01-01"), TaskState::kStaged);
}

TEST_F(TaskWriterTest, RowsQueuedWhileItGathersShareOneCommit) {
  TaskWriter::Options options;
  options.group_rows = 3;
  options.gather = absl::InfiniteDuration();  // until three rows
  std::vector<std::string> commits;
  absl::Notification written;
  {
    TaskWriter writer(
        &store_,
        [&](const std::string& what,
            const std::function<absl::Status()>& write) {
          commits.push_back(what);
          return write();
        },
        options);
    writer.Write({Task("2025-01-01", TaskState::kRunning)}, nullptr);
    writer.Write({Task("2025-01-02", TaskState::kRunning)}, nullptr);
    writer.Write({Task("2025-01-03", TaskState::kStaged)},
                 [&](const absl::Status&) { written.Notify(); });
    // The third row ends the gathering, not the destructor.
    ASSERT_TRUE(written.WaitForNotificationWithTimeout(absl::Seconds(30)));
  }
  EXPECT_EQ(store_.write_calls("UpdateTasks"), 1);
  EXPECT_EQ(commits,
            (std::vector<std::string>{
                "writing the starts and checkpoints of 3 partitions"}));
  EXPECT_EQ(StateOf("2025-01-03"), TaskState::kStaged);
}

TEST_F(TaskWriterTest, AWaitingWorkerEndsTheGathering) {
  TaskWriter::Options options;
  options.group_rows = 1000;
  options.gather = absl::InfiniteDuration();
  TaskWriter writer(&store_, &TaskWriterTest::Once, options);
  absl::Notification written;
  writer.Write({Task("2025-01-02", TaskState::kStaged)},
               [&](const absl::Status& s) {
                 EXPECT_TRUE(s.ok()) << s;
                 written.Notify();
               });
  writer.Hurry();
  ASSERT_TRUE(written.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(StateOf("2025-01-02"), TaskState::kStaged);
  // A hurry is spent by the commit it started: the next rows gather again
  // (here: until the destructor writes them).
  writer.Write({Task("2025-01-03", TaskState::kStaged)}, nullptr);
}

TEST_F(TaskWriterTest, TheGatheringEndsAfterItsTime) {
  TaskWriter::Options options;
  options.group_rows = 1000;
  options.gather = absl::Milliseconds(1);
  TaskWriter writer(&store_, &TaskWriterTest::Once, options);
  absl::Notification written;
  writer.Write({Task("2025-01-01", TaskState::kStaged)},
               [&](const absl::Status&) { written.Notify(); });
  ASSERT_TRUE(written.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(StateOf("2025-01-01"), TaskState::kStaged);
}

}  // namespace
}  // namespace core_task_writer_test
}  // namespace backfill
