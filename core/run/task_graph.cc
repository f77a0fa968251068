#include "core/run/task_graph.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/model/upstream_mapping.h"

namespace backfill {

namespace {

// How the tasks of a dataset read one in-job upstream.
enum class Read {
  kSamePartition,  // identity between datasets of the same shape
  kMapped,         // rollup, lookback, identity across shapes
  kWhole,          // all, or rollup and lookback without grains
};

struct ResolvedEdge {
  Read read;
  uint32_t upstream;
  const UpstreamEdge* edge;
};

// The constructor's tasks, as Build reads them.
struct TaskList {
  const std::vector<TaskGraph::Task>& tasks;
  size_t size() const { return tasks.size(); }
  const std::string& dataset(size_t i) const { return tasks[i].dataset; }
  const std::string& partition(size_t i) const { return tasks[i].partition; }
  TaskGraph::Node node(size_t i) const { return tasks[i].state; }
  TaskGraph::Outcome outcome(size_t i) const { return tasks[i].outcome; }
};

// A job's task table, as Build reads it.
struct TableTasks {
  const TaskTable& table;
  size_t size() const { return table.size(); }
  const std::string& dataset(size_t i) const { return table.dataset(i); }
  std::string_view partition(size_t i) const { return table.partition(i); }
  TaskGraph::Node node(size_t i) const {
    return TaskGraph::NodeOf(table.state(i));
  }
  TaskGraph::Outcome outcome(size_t i) const {
    return TaskGraph::OutcomeOf(table.state(i));
  }
};

}  // namespace

TaskGraph::Node TaskGraph::NodeOf(TaskState state) {
  switch (state) {
    case TaskState::kStaged:
    case TaskState::kPublished:
    case TaskState::kUnchanged:
    case TaskState::kSkipped:
      return Node::kDone;
    case TaskState::kFailed:
      return Node::kFailed;
    default:
      return Node::kPending;
  }
}

TaskGraph::Outcome TaskGraph::OutcomeOf(TaskState state) {
  switch (state) {
    case TaskState::kUnchanged:
      return Outcome::kUnchanged;
    case TaskState::kSkipped:
      return Outcome::kSkipped;
    default:
      return Outcome::kChanged;
  }
}

TaskGraph::TaskGraph(
    std::vector<Task> tasks,
    const std::function<std::vector<UpstreamEdge>(const std::string& dataset)>&
        upstream_of,
    const std::function<PartitionLayout(const std::string& dataset)>&
        grain_of) {
  Build(TaskList{tasks}, upstream_of, grain_of);
}

TaskGraph::TaskGraph(
    const TaskTable& tasks,
    const std::function<std::vector<UpstreamEdge>(const std::string& dataset)>&
        upstream_of,
    const std::function<PartitionLayout(const std::string& dataset)>&
        grain_of) {
  Build(TableTasks{tasks}, upstream_of, grain_of);
}

template <typename Tasks>
void TaskGraph::Build(
    const Tasks& tasks,
    const std::function<std::vector<UpstreamEdge>(const std::string& dataset)>&
        upstream_of,
    const std::function<PartitionLayout(const std::string& dataset)>&
        grain_of) {
  const size_t n = tasks.size();
  dataset_of_.resize(n);
  state_.resize(n);
  outcome_.resize(n);
  // The job's datasets, in order of first appearance.
  absl::flat_hash_map<std::string, uint32_t> ids;
  std::vector<size_t> counts;
  for (size_t i = 0; i < n; ++i) {
    const std::string& dataset = tasks.dataset(i);
    uint32_t d = i == 0 ? 0 : dataset_of_[i - 1];
    if (i == 0 || dataset != datasets_[d].name) {
      auto [it, inserted] =
          ids.try_emplace(dataset, static_cast<uint32_t>(datasets_.size()));
      if (inserted) {
        datasets_.emplace_back();
        datasets_.back().name = dataset;
        counts.push_back(0);
      }
      d = it->second;
    }
    dataset_of_[i] = d;
    ++counts[d];
    state_[i] = tasks.node(i);
    outcome_[i] = tasks.outcome(i);
  }

  // Each dataset's in-job upstream edges, resolved once.
  const size_t m = datasets_.size();
  std::vector<std::optional<PartitionLayout>> layouts(m);
  auto layout = [&](uint32_t d) -> const PartitionLayout& {
    if (!layouts[d]) layouts[d] = grain_of(datasets_[d].name);
    return *layouts[d];
  };
  std::vector<std::vector<UpstreamEdge>> edges(m);
  std::vector<std::vector<ResolvedEdge>> resolved(m);
  std::vector<bool> indexed(m, false);  // read partition by partition
  bool partition_edges = false;
  for (uint32_t d = 0; d < m; ++d) {
    edges[d] = upstream_of(datasets_[d].name);
    for (const UpstreamEdge& e : edges[d]) {
      auto it = ids.find(e.dataset);
      if (it == ids.end()) continue;  // not in the job
      const uint32_t u = it->second;
      // Identity between datasets of the same shape reads the same value;
      // between a time x key dataset and a time one it maps like rollup.
      const bool same_shape = !grain_of || layout(u).two_dimensional() ==
                                               layout(d).two_dimensional();
      if (e.mapping == Mapping::kIdentity && same_shape) {
        resolved[d].push_back({Read::kSamePartition, u, &e});
      } else if (e.mapping != Mapping::kAll && grain_of) {
        resolved[d].push_back({Read::kMapped, u, &e});
      } else {
        datasets_[d].reads_whole.push_back(u);
        datasets_[u].whole_reader_datasets.push_back(d);
        continue;
      }
      indexed[u] = true;
      partition_edges = true;
    }
  }

  // Only while building: the tasks of each dataset read partition by
  // partition, by partition value (the last task wins a repeated value).
  std::vector<absl::flat_hash_map<std::string_view, uint32_t>> index(m);
  for (uint32_t d = 0; d < m; ++d) {
    if (indexed[d]) index[d].reserve(counts[d]);
    if (!datasets_[d].reads_whole.empty()) {
      datasets_[d].tasks.reserve(counts[d]);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const uint32_t d = dataset_of_[i];
    if (indexed[d]) {
      index[d].insert_or_assign(std::string_view(tasks.partition(i)),
                                static_cast<uint32_t>(i));
    }
    if (!datasets_[d].reads_whole.empty()) {
      datasets_[d].tasks.push_back(static_cast<uint32_t>(i));
    }
  }

  if (partition_edges) {
    inputs_.offsets.reserve(n + 1);
    auto read = [&](uint32_t u, std::string_view partition) {
      auto it = index[u].find(partition);
      if (it != index[u].end()) inputs_.flat.push_back(it->second);
    };
    for (size_t i = 0; i < n; ++i) {
      inputs_.offsets.push_back(static_cast<uint32_t>(inputs_.flat.size()));
      const uint32_t d = dataset_of_[i];
      const std::string_view partition = tasks.partition(i);
      for (const ResolvedEdge& r : resolved[d]) {
        if (r.read == Read::kSamePartition) {
          read(r.upstream, partition);
          continue;
        }
        absl::StatusOr<std::optional<std::vector<std::string>>> reads =
            PartitionsRead(*r.edge, layout(r.upstream), layout(d), partition);
        if (reads.ok() && reads->has_value()) {
          for (const std::string& p : **reads) read(r.upstream, p);
        } else {
          task_reads_whole_.push_back({static_cast<uint32_t>(i), r.upstream});
          datasets_[r.upstream].whole_reader_tasks.push_back(
              static_cast<uint32_t>(i));
        }
      }
    }
    inputs_.offsets.push_back(static_cast<uint32_t>(inputs_.flat.size()));
    inputs_.flat.shrink_to_fit();
    task_reads_whole_.shrink_to_fit();

    // The same edges from the upstream side; filled in task order, so each
    // row is ascending.
    dependents_.offsets.assign(n + 1, 0);
    for (uint32_t u : inputs_.flat) ++dependents_.offsets[u + 1];
    for (size_t u = 0; u < n; ++u) {
      dependents_.offsets[u + 1] += dependents_.offsets[u];
    }
    dependents_.flat.resize(inputs_.flat.size());
    std::vector<uint32_t> next(dependents_.offsets.begin(),
                               dependents_.offsets.end() - 1);
    for (size_t i = 0; i < n; ++i) {
      for (uint32_t u : inputs_.Row(i)) {
        dependents_.flat[next[u]++] = static_cast<uint32_t>(i);
      }
    }
  }
  Rebuild();
}

std::pair<size_t, size_t> TaskGraph::OwnWholeReads(size_t i) const {
  if (task_reads_whole_.empty()) return {0, 0};
  auto lo =
      std::lower_bound(task_reads_whole_.begin(), task_reads_whole_.end(), i,
                       [](const std::pair<uint32_t, uint32_t>& p, size_t t) {
                         return p.first < t;
                       });
  auto hi = lo;
  while (hi != task_reads_whole_.end() && hi->first == i) ++hi;
  return {static_cast<size_t>(lo - task_reads_whole_.begin()),
          static_cast<size_t>(hi - task_reads_whole_.begin())};
}

std::vector<uint32_t> TaskGraph::WholeReaders(uint32_t u) const {
  const Dataset& ds = datasets_[u];
  std::vector<uint32_t> out = ds.whole_reader_tasks;
  for (uint32_t d : ds.whole_reader_datasets) {
    out.insert(out.end(), datasets_[d].tasks.begin(), datasets_[d].tasks.end());
  }
  // Several sources: back in task order.
  const size_t sources =
      ds.whole_reader_datasets.size() + (ds.whole_reader_tasks.empty() ? 0 : 1);
  if (sources > 1) {
    std::sort(out.begin(), out.end());
  }
  return out;
}

void TaskGraph::Rebuild() {
  const size_t n = size();
  remaining_ = 0;
  running_ = 0;
  for (Dataset& ds : datasets_) {
    ds.remaining = 0;
    ds.changed = 0;
  }
  for (size_t i = 0; i < n; ++i) {
    Dataset& ds = datasets_[dataset_of_[i]];
    if (state_[i] != Node::kDone) {
      ++remaining_;
      ++ds.remaining;
    } else if (outcome_[i] == Outcome::kChanged) {
      ++ds.changed;
    }
    if (state_[i] == Node::kRunning) ++running_;
  }
  waiting_.assign(n, 0);
  size_t own = 0;  // cursor into task_reads_whole_
  for (size_t i = 0; i < n; ++i) {
    for (uint32_t u : inputs_.Row(i)) {
      if (state_[u] != Node::kDone) ++waiting_[i];
    }
    for (uint32_t u : datasets_[dataset_of_[i]].reads_whole) {
      if (datasets_[u].remaining > 0) ++waiting_[i];
    }
    for (; own < task_reads_whole_.size() && task_reads_whole_[own].first == i;
         ++own) {
      if (datasets_[task_reads_whole_[own].second].remaining > 0) {
        ++waiting_[i];
      }
    }
  }
  Requeue();
}

size_t TaskGraph::CountIn(Node state) const {
  return static_cast<size_t>(std::count(state_.begin(), state_.end(), state));
}

void TaskGraph::ClearReady() {
  ready_.clear();
  queued_.assign(size(), false);
}

void TaskGraph::Requeue() {
  ClearReady();
  for (size_t i = 0; i < size(); ++i) {
    if (state_[i] == Node::kPending && waiting_[i] == 0) {
      ready_.push_back(static_cast<uint32_t>(i));
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
    state_[i] = Node::kRunning;
    ++running_;
    return i;
  }
  return std::nullopt;
}

void TaskGraph::Wake(uint32_t d) {
  if (--waiting_[d] == 0 && state_[d] == Node::kPending && !queued_[d]) {
    ready_.push_back(d);
    queued_[d] = true;
  }
}

void TaskGraph::Release(size_t i) {
  for (uint32_t d : dependents_.Row(i)) Wake(d);
  const uint32_t u = dataset_of_[i];
  if (--datasets_[u].remaining == 0) {
    for (uint32_t d : WholeReaders(u)) Wake(d);
  }
}

void TaskGraph::Done(size_t i, Outcome outcome) {
  if (state_[i] != Node::kRunning) return;
  state_[i] = Node::kDone;
  outcome_[i] = outcome;
  if (outcome == Outcome::kChanged) ++datasets_[dataset_of_[i]].changed;
  --running_;
  --remaining_;
  Release(i);
}

bool TaskGraph::ReadsOnlyUnchanged(size_t i) const {
  const absl::Span<const uint32_t> inputs = inputs_.Row(i);
  const std::vector<uint32_t>& whole = datasets_[dataset_of_[i]].reads_whole;
  const auto [first, last] = OwnWholeReads(i);
  if (inputs.empty() && whole.empty() && first == last) return false;
  for (uint32_t u : inputs) {
    if (state_[u] != Node::kDone || outcome_[u] == Outcome::kChanged) {
      return false;
    }
  }
  auto unchanged = [this](uint32_t u) {
    return datasets_[u].remaining == 0 && datasets_[u].changed == 0;
  };
  for (uint32_t u : whole) {
    if (!unchanged(u)) return false;
  }
  for (size_t k = first; k < last; ++k) {
    if (!unchanged(task_reads_whole_[k].second)) return false;
  }
  return true;
}

void TaskGraph::Return(size_t i) {
  if (state_[i] != Node::kRunning) return;
  state_[i] = Node::kPending;
  --running_;
  if (waiting_[i] == 0 && !queued_[i]) {
    ready_.push_front(static_cast<uint32_t>(i));
    queued_[i] = true;
  }
}

void TaskGraph::Fail(size_t i) {
  if (state_[i] != Node::kRunning) return;
  state_[i] = Node::kFailed;
  --running_;
}

void TaskGraph::ResetFailed() {
  for (Node& s : state_) {
    if (s == Node::kFailed) s = Node::kPending;
  }
  Rebuild();
}

void TaskGraph::Reopen(const std::vector<size_t>& lost) {
  std::vector<size_t> stack(lost.begin(), lost.end());
  std::vector<bool> seen(size(), false);
  // Datasets whose whole-table readers are on the stack already.
  std::vector<bool> expanded(datasets_.size(), false);
  while (!stack.empty()) {
    const size_t i = stack.back();
    stack.pop_back();
    if (seen[i]) continue;
    seen[i] = true;
    if (state_[i] == Node::kDone) {
      state_[i] = Node::kPending;
      outcome_[i] = Outcome::kChanged;
    }
    for (uint32_t d : dependents_.Row(i)) stack.push_back(d);
    const uint32_t u = dataset_of_[i];
    if (!expanded[u]) {
      expanded[u] = true;
      for (uint32_t d : WholeReaders(u)) stack.push_back(d);
    }
  }
  Rebuild();
}

}  // namespace backfill
