#include "core/task_writer.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace backfill {

TaskWriter::TaskWriter(StateStore* store, Persist persist)
    : store_(store), persist_(std::move(persist)) {
  thread_ = std::thread([this] { Loop(); });
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
  queue_.push_back({std::move(rows), std::move(done)});
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
      taken.swap(queue_);
    }
    std::vector<PartitionTask> rows;
    for (Queued& q : taken) {
      for (PartitionTask& t : q.rows) rows.push_back(t);
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
