// PlannedPartitions: the partitions the planner has planned so far for one
// dataset, each with why it is planned (DatasetPlan::partition_reasons).
// The partitions are one sorted, unique vector; a reason is an index into
// a table of reason texts, so that a million partitions planned for the
// same reason hold that text once (4 bytes a partition besides the
// partition itself, instead of a tree node and a string each).
//
// Owns its partitions and reasons. Not thread-safe: one per dataset of a
// plan, used by the planning thread.

#ifndef BACKFILL_CORE_PLAN_PLANNED_PARTITIONS_H_
#define BACKFILL_CORE_PLAN_PLANNED_PARTITIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace backfill {

class PlannedPartitions {
 public:
  PlannedPartitions() = default;

  // `partitions` (any order, repeats allowed), each planned because of
  // `reason`, or, when `reasons` is given (aligned with `partitions`),
  // because of its own reason; a partition given more than once keeps the
  // reason given last.
  PlannedPartitions(std::vector<std::string> partitions,
                    const std::string& reason);
  PlannedPartitions(std::vector<std::string> partitions,
                    std::vector<std::string> reasons);

  // Sorted, unique.
  const std::vector<std::string>& partitions() const { return partitions_; }
  size_t size() const { return partitions_.size(); }
  bool empty() const { return partitions_.empty(); }
  // Why partitions()[i] is planned.
  const std::string& reason(size_t i) const { return reasons_[reason_of_[i]]; }

  // Plans `partitions` (sorted and unique, else they are made so) because
  // of `reason`; those planned already keep their reason. Returns how many
  // were not planned before.
  size_t Add(std::vector<std::string> partitions, const std::string& reason);

  // Takes out the partitions at `indices` (ascending, unique) and returns
  // them, in order.
  std::vector<std::string> Remove(const std::vector<size_t>& indices);

  // Appends `suffix` to the reasons of the partitions at `indices`.
  void AppendToReasons(const std::vector<size_t>& indices,
                       std::string_view suffix);

  // Moves the partitions out (sorted, unique). Their reasons stay for
  // Reasons(); nothing else may be called afterwards.
  std::vector<std::string> TakePartitions();
  // The reason of each partition, in order (aligned with the partitions,
  // taken out or not).
  std::vector<std::string> Reasons() const;

 private:
  // Index of `reason` in reasons_, added if it is not the last one added.
  uint32_t Intern(const std::string& reason);

  std::vector<std::string> partitions_;
  std::vector<uint32_t> reason_of_;   // aligned with partitions_
  std::vector<std::string> reasons_;  // the texts reason_of_ points into
};

}  // namespace backfill

#endif  // BACKFILL_CORE_PLAN_PLANNED_PARTITIONS_H_
