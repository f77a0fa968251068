// Crash points: named places in a job's life where a test can make the
// process die at once, as a kill -9 there would, to prove that recovery
// loses and doubles nothing. Test-only: they are armed only when the
// environment variable BACKFILL_TEST_CRASH_AT is set when the daemon
// starts (ArmCrashPointsFromEnvironment); otherwise a crash point is one
// relaxed atomic load.
//
//   BACKFILL_TEST_CRASH_AT=NAME      die the first time NAME is reached
//   BACKFILL_TEST_CRASH_AT=NAME:N    die the N-th time (N >= 1)
//
// Dying is raise(SIGKILL): no destructor, flush or atexit handler runs.
// The points of the daemon are listed in kCrashPoints,
// kCutoffCrashPoints, kRollbackCrashPoints, kHoldCrashPoints and
// kReplayCrashPoints.
// Thread-safe.

#ifndef BACKFILL_CORE_RUN_CRASH_POINT_H_
#define BACKFILL_CORE_RUN_CRASH_POINT_H_

#include <functional>
#include <string_view>

#include "absl/status/status.h"

namespace backfill {

// Every crash point, in the order a job reaches them.
inline constexpr const char* kCrashPoints[] = {
    "recovery",                 // resuming jobs at start, after the first
    "stage.before_commit",      // inside a partition's staging write
    "stage.before_checkpoint",  // staged, checkpoint not yet written
    "validate",                 // during validation
    "publish.before_commit",    // inside the publish transaction
    "publish.before_record",    // committed, lineage not yet recorded
    "confirm",                  // CONFIRMING, before SUCCEEDED
};

// Crash points of the early cutoff (core/plan/early_cutoff.h). Not in
// kCrashPoints: the crash harness's correction changes every partition it
// recomputes, so it never reaches them; tests/e2e_cutoff_test.cc does.
inline constexpr const char* kCutoffCrashPoints[] = {
    // a partition's UNCHANGED or SKIPPED is recorded, the engine has not
    // released it yet
    "cutoff.before_release",
};

// Crash points of a rollback (RollbackBackfill), outside a backfill's life
// (so not in kCrashPoints, which the crash harness walks per backfill).
inline constexpr const char* kRollbackCrashPoints[] = {
    "rollback.before_record",  // restored in the warehouse, not yet recorded
};

// Crash points of a job held for a decision (AWAITING_APPROVAL or
// VALIDATION_FAILED), which the crash harness's backfills never are.
inline constexpr const char* kHoldCrashPoints[] = {
    // held and recorded; the worker that held it has not let go of it yet
    "hold.before_release",
};

// Crash points of a replay policy's evaluation (core/run/replay_keeper.h).
inline constexpr const char* kReplayCrashPoints[] = {
    // the evaluation's job is created and recorded; the evaluation itself
    // is not
    "replay.after_submit",
};

// Dies here if this point is armed and reached for the armed time; calls
// the hook of SetCrashPointHookForTest, if any, first.
void CrashPoint(std::string_view name);

// Arms the point named by BACKFILL_TEST_CRASH_AT, if set. INVALID_ARGUMENT
// for an unknown name or a malformed count.
absl::Status ArmCrashPointsFromEnvironment();

// Arms `name` to die on its `nth` visit (tests of the hook itself);
// `nth` 0 disarms.
void ArmCrashPoint(std::string_view name, int nth);

// In-process tests: `hook` runs on the thread that reaches any crash point,
// with its name, so that a test can act at an exact moment of a job's life
// (an empty function removes it). The hook must not reach a crash point.
void SetCrashPointHookForTest(std::function<void(std::string_view)> hook);

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_CRASH_POINT_H_
