// Replay policy and frozen periods: what a derived dataset's pipeline
// declares about rewriting its history (docs/pipeline-spec.md, "Replay
// policies and frozen periods").
//
// A ReplayPolicy (`replay:`) says when the daemon replays partitions by
// itself: on which triggers, how far back, after how long a quiet period,
// at what cost without a person's approval, and how often it looks.
//
// A FrozenRule (`frozen:`) closes periods: a partition that holds any
// instant before the rule's cutoff is frozen, and no job changes it unless
// an approver overrides the rule. The cutoff is the later of `before`
// (a fixed day) and now minus `older_than`. Partitions are UTC civil
// times, as everywhere in backfilld; the time part of a time x key
// partition decides.
//
// Plain values; the functions are pure and thread-safe.

#ifndef BACKFILL_CORE_MODEL_REPLAY_POLICY_H_
#define BACKFILL_CORE_MODEL_REPLAY_POLICY_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "core/model/partition_layout.h"

namespace backfill {

// What makes a partition due for a replay.
enum class ReplayTrigger {
  // An input partition's content differs from what the newest published
  // version of the partition read (the fingerprints `--auto` compares).
  kInputChange,
  // The published version was made by another transform version than the
  // one loaded now.
  kTransformChange,
};
const char* ReplayTriggerName(ReplayTrigger trigger);  // "input_change", ...

// `max_cost`: a share of a full reload's cost ("10%") or a number of input
// rows ("2000000"); above it a replay waits for approval.
struct ReplayCostLimit {
  std::optional<double> fraction;    // 0.10 for "10%"
  std::optional<double> input_rows;  // 2e6 for "2000000"
  std::string text;                  // as written
};

inline constexpr absl::Duration kDefaultCheckEvery = absl::Minutes(5);

struct ReplayPolicy {
  bool on_input_change = false;
  bool on_transform_change = false;
  absl::Duration window;                    // > 0: how far back replays reach
  absl::Duration settle;                    // >= 0: quiet time of an input
  std::optional<ReplayCostLimit> max_cost;  // nullopt: no limit
  bool approval_required = false;           // `approval: required`
  absl::Duration check_every = kDefaultCheckEvery;
  int line = 0;  // where `replay:` was declared
};

// The instants a time partition spans, [start, end), UTC; INVALID_ARGUMENT
// for a partition the layout refuses or one with no time part.
struct PartitionSpan {
  absl::Time start;
  absl::Time end;
};
absl::StatusOr<PartitionSpan> SpanOf(const PartitionLayout& layout,
                                     std::string_view partition);

struct FrozenRule {
  std::optional<absl::CivilDay> before;  // partitions before this day
  absl::Duration older_than;             // zero: none
  int line = 0;                          // where `frozen:` was declared

  // The rule as a person reads it: "frozen.before 2025-01-01",
  // "frozen.older_than 35d" or both joined by " and ".
  std::string Describe() const;

  // Every instant before it is closed at `now` (InfinitePast: nothing).
  absl::Time Cutoff(absl::Time now) const;

  // Whether `partition` (valid for `layout`, a time or time x key layout)
  // holds an instant before Cutoff(now). INVALID_ARGUMENT for a partition
  // the layout refuses.
  absl::StatusOr<bool> Freezes(const PartitionLayout& layout,
                               std::string_view partition,
                               absl::Time now) const;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_REPLAY_POLICY_H_
