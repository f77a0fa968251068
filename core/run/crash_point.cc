#include "core/run/crash_point.h"

#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace backfill {
namespace {

std::atomic<bool> armed{false};
absl::Mutex mu;
std::string armed_name ABSL_GUARDED_BY(mu);
int remaining ABSL_GUARDED_BY(mu) = 0;
std::function<void(std::string_view)> test_hook ABSL_GUARDED_BY(mu);

void RearmLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  armed.store(remaining > 0 || test_hook != nullptr);
}

}  // namespace

void CrashPoint(std::string_view name) {
  if (!armed.load(std::memory_order_relaxed)) return;
  std::function<void(std::string_view)> hook;
  {
    absl::MutexLock lock(&mu);
    hook = test_hook;
  }
  if (hook) hook(name);
  absl::MutexLock lock(&mu);
  if (name != armed_name || remaining <= 0) return;
  if (--remaining == 0) raise(SIGKILL);
}

void ArmCrashPoint(std::string_view name, int nth) {
  absl::MutexLock lock(&mu);
  armed_name = std::string(name);
  remaining = nth;
  RearmLocked();
}

void SetCrashPointHookForTest(std::function<void(std::string_view)> hook) {
  absl::MutexLock lock(&mu);
  test_hook = std::move(hook);
  RearmLocked();
}

absl::Status ArmCrashPointsFromEnvironment() {
  const char* value = std::getenv("BACKFILL_TEST_CRASH_AT");
  if (value == nullptr || *value == '\0') return absl::OkStatus();
  std::string spec = value;
  int nth = 1;
  const size_t colon = spec.rfind(':');
  if (colon != std::string::npos) {
    if (!absl::SimpleAtoi(spec.substr(colon + 1), &nth) || nth < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("BACKFILL_TEST_CRASH_AT=", spec,
                       ": the count after ':' must be a number >= 1"));
    }
    spec.resize(colon);
  }
  std::string known;
  std::vector<const char*> all(std::begin(kCrashPoints),
                               std::end(kCrashPoints));
  all.insert(all.end(), std::begin(kCutoffCrashPoints),
             std::end(kCutoffCrashPoints));
  all.insert(all.end(), std::begin(kRollbackCrashPoints),
             std::end(kRollbackCrashPoints));
  all.insert(all.end(), std::begin(kHoldCrashPoints),
             std::end(kHoldCrashPoints));
  all.insert(all.end(), std::begin(kReplayCrashPoints),
             std::end(kReplayCrashPoints));
  for (const char* point : all) {
    if (spec == point) {
      ArmCrashPoint(spec, nth);
      return absl::OkStatus();
    }
    absl::StrAppend(&known, " ", point);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "BACKFILL_TEST_CRASH_AT=", spec, ": no such crash point; known:", known));
}

}  // namespace backfill
