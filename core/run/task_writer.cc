#include "core/run/task_writer.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/base/thread_name.h"

namespace backfill {
namespace {

// The task a row is (its job, dataset and partition), unambiguously.
std::string RowKey(const PartitionTask& t) {
  return absl::StrCat(t.job_id.size(), ":", t.job_id, t.dataset.size(), ":",
                      t.dataset, t.partition);
}

}  // namespace

TaskWriter::TaskWriter(StateStore* store, Persist persist, Options options)
    : store_(store), persist_(std::move(persist)), options_(options) {
  thread_ = std::thread([this] {
    NameThisThread("bf-task-writer");
    Loop();
  });
}

TaskWriter::~TaskWriter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void TaskWriter::Write(std::vector<PartitionTask> rows, Done done) {
  absl::MutexLock lock(&mu_);
  queued_rows_ += rows.size();
  queue_.push_back({std::move(rows), std::move(done)});
}

void TaskWriter::Hurry() {
  absl::MutexLock lock(&mu_);
  hurry_ = true;
}

void TaskWriter::Loop() {
  while (true) {
    std::deque<Queued> taken;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](TaskWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return !w->queue_.empty() || w->stopping_;
          },
          this));
      if (queue_.empty()) return;  // stopping, nothing left
      // Gathers more rows for this commit, unless enough are queued or
      // someone waits for them.
      mu_.AwaitWithTimeout(
          absl::Condition(
              +[](TaskWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
                return w->queued_rows_ >= w->options_.group_rows || w->hurry_ ||
                       w->stopping_;
              },
              this),
          options_.gather);
      hurry_ = false;
      queued_rows_ = 0;
      taken.swap(queue_);
    }
    // A row is written whole, so of the writes of one task in this commit
    // only the last counts: a partition's start and checkpoint queued
    // while the previous commit ran cost one row, not two.
    std::vector<PartitionTask> rows;
    absl::flat_hash_map<std::string, size_t> row_of;
    for (Queued& q : taken) {
      for (PartitionTask& t : q.rows) {
        auto [it, fresh] = row_of.try_emplace(RowKey(t), rows.size());
        if (fresh) {
          rows.push_back(t);
        } else {
          rows[it->second] = t;
        }
      }
    }
    absl::Status s = persist_(
        absl::StrCat("writing the starts and checkpoints of ", rows.size(),
                     rows.size() == 1 ? " partition" : " partitions"),
        [&] { return store_->UpdateTasks(rows); });
    std::vector<absl::Status> results(taken.size(), s);
    if (!s.ok() && taken.size() > 1) {
      // One bad write fails only itself.
      for (size_t i = 0; i < taken.size(); ++i) {
        results[i] = persist_(
            absl::StrCat(
                "writing the starts and checkpoints of ", taken[i].rows.size(),
                taken[i].rows.size() == 1 ? " partition" : " partitions"),
            [&] { return store_->UpdateTasks(taken[i].rows); });
      }
    }
    for (size_t i = 0; i < taken.size(); ++i) {
      if (taken[i].done) taken[i].done(results[i]);
    }
  }
}

}  // namespace backfill
