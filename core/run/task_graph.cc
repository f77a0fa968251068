#include "core/run/task_graph.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/upstream_mapping.h"

namespace backfill {

TaskGraph::TaskGraph(
    std::vector<Task> tasks,
    const std::function<std::vector<UpstreamEdge>(const std::string& dataset)>&
        upstream_of,
    const std::function<PartitionLayout(const std::string& dataset)>& grain_of)
    : tasks_(std::move(tasks)) {
  const size_t n = tasks_.size();
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (size_t i = 0; i < n; ++i) {
    index[{tasks_[i].dataset, tasks_[i].partition}] = i;
    dataset_remaining_[tasks_[i].dataset];  // every dataset of the job
  }
  dependents_.assign(n, {});
  identity_inputs_.assign(n, {});
  all_inputs_.assign(n, {});
  for (size_t i = 0; i < n; ++i) {
    for (const UpstreamEdge& e : upstream_of(tasks_[i].dataset)) {
      if (!dataset_remaining_.count(e.dataset)) continue;  // not in the job
      // Identity between datasets of the same shape reads the same value;
      // between a time x key dataset and a time one it maps like rollup.
      const bool same_shape =
          !grain_of || grain_of(e.dataset).two_dimensional() ==
                           grain_of(tasks_[i].dataset).two_dimensional();
      if (e.mapping == Mapping::kIdentity && same_shape) {
        auto it = index.find({e.dataset, tasks_[i].partition});
        if (it == index.end()) continue;
        dependents_[it->second].push_back(i);
        identity_inputs_[i].push_back(it->second);
        continue;
      }
      absl::StatusOr<std::optional<std::vector<std::string>>> read =
          absl::InvalidArgumentError("no grains");
      if (e.mapping != Mapping::kAll && grain_of) {
        read = PartitionsRead(e, grain_of(e.dataset),
                              grain_of(tasks_[i].dataset), tasks_[i].partition);
      }
      if (read.ok() && read->has_value()) {
        for (const std::string& p : **read) {
          auto it = index.find({e.dataset, p});
          if (it == index.end()) continue;
          dependents_[it->second].push_back(i);
          identity_inputs_[i].push_back(it->second);
        }
      } else {
        all_readers_[e.dataset].push_back(i);
        all_inputs_[i].push_back(e.dataset);
      }
    }
  }
  Rebuild();
}

void TaskGraph::Rebuild() {
  const size_t n = tasks_.size();
  remaining_ = 0;
  running_ = 0;
  for (auto& [dataset, count] : dataset_remaining_) count = 0;
  dataset_changed_.clear();
  for (const Task& t : tasks_) {
    if (t.state != Node::kDone) {
      ++remaining_;
      ++dataset_remaining_[t.dataset];
    } else if (t.outcome == Outcome::kChanged) {
      ++dataset_changed_[t.dataset];
    }
    if (t.state == Node::kRunning) ++running_;
  }
  waiting_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t u : identity_inputs_[i]) {
      if (tasks_[u].state != Node::kDone) ++waiting_[i];
    }
    for (const std::string& d : all_inputs_[i]) {
      if (dataset_remaining_[d] > 0) ++waiting_[i];
    }
  }
  Requeue();
}

size_t TaskGraph::CountIn(Node state) const {
  return static_cast<size_t>(
      std::count_if(tasks_.begin(), tasks_.end(),
                    [state](const Task& t) { return t.state == state; }));
}

void TaskGraph::ClearReady() {
  ready_.clear();
  queued_.assign(tasks_.size(), false);
}

void TaskGraph::Requeue() {
  ClearReady();
  for (size_t i = 0; i < tasks_.size(); ++i) {
    if (tasks_[i].state == Node::kPending && waiting_[i] == 0) {
      ready_.push_back(i);
      queued_[i] = true;
    }
  }
}

std::optional<size_t> TaskGraph::Pop(
    const std::function<bool(size_t)>& accept) {
  for (auto it = ready_.begin(); it != ready_.end(); ++it) {
    const size_t i = *it;
    if (accept && !accept(i)) continue;
    ready_.erase(it);
    queued_[i] = false;
    tasks_[i].state = Node::kRunning;
    ++running_;
    return i;
  }
  return std::nullopt;
}

void TaskGraph::Release(size_t i) {
  auto wake = [this](size_t d) {
    if (--waiting_[d] == 0 && tasks_[d].state == Node::kPending &&
        !queued_[d]) {
      ready_.push_back(d);
      queued_[d] = true;
    }
  };
  for (size_t d : dependents_[i]) wake(d);
  if (--dataset_remaining_[tasks_[i].dataset] == 0) {
    auto readers = all_readers_.find(tasks_[i].dataset);
    if (readers != all_readers_.end()) {
      for (size_t d : readers->second) wake(d);
    }
  }
}

void TaskGraph::Done(size_t i, Outcome outcome) {
  if (tasks_[i].state != Node::kRunning) return;
  tasks_[i].state = Node::kDone;
  tasks_[i].outcome = outcome;
  if (outcome == Outcome::kChanged) ++dataset_changed_[tasks_[i].dataset];
  --running_;
  --remaining_;
  Release(i);
}

bool TaskGraph::ReadsOnlyUnchanged(size_t i) const {
  if (identity_inputs_[i].empty() && all_inputs_[i].empty()) return false;
  for (size_t u : identity_inputs_[i]) {
    if (tasks_[u].state != Node::kDone ||
        tasks_[u].outcome == Outcome::kChanged) {
      return false;
    }
  }
  for (const std::string& d : all_inputs_[i]) {
    auto remaining = dataset_remaining_.find(d);
    if (remaining != dataset_remaining_.end() && remaining->second > 0) {
      return false;
    }
    auto changed = dataset_changed_.find(d);
    if (changed != dataset_changed_.end() && changed->second > 0) return false;
  }
  return true;
}

void TaskGraph::Return(size_t i) {
  if (tasks_[i].state != Node::kRunning) return;
  tasks_[i].state = Node::kPending;
  --running_;
  if (waiting_[i] == 0 && !queued_[i]) {
    ready_.push_front(i);
    queued_[i] = true;
  }
}

void TaskGraph::Fail(size_t i) {
  if (tasks_[i].state != Node::kRunning) return;
  tasks_[i].state = Node::kFailed;
  --running_;
}

void TaskGraph::ResetFailed() {
  for (Task& t : tasks_) {
    if (t.state == Node::kFailed) t.state = Node::kPending;
  }
  Rebuild();
}

void TaskGraph::Reopen(const std::vector<size_t>& lost) {
  std::vector<size_t> stack(lost.begin(), lost.end());
  std::set<size_t> seen;
  while (!stack.empty()) {
    const size_t i = stack.back();
    stack.pop_back();
    if (!seen.insert(i).second) continue;
    if (tasks_[i].state == Node::kDone) {
      tasks_[i].state = Node::kPending;
      tasks_[i].outcome = Outcome::kChanged;
    }
    for (size_t d : dependents_[i]) stack.push_back(d);
    auto readers = all_readers_.find(tasks_[i].dataset);
    if (readers != all_readers_.end()) {
      for (size_t d : readers->second) stack.push_back(d);
    }
  }
  Rebuild();
}

}  // namespace backfill
