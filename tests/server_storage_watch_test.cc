// StorageWatch: a probe's verdict is reported once two probes in a row
// agree on it and it differs from what was reported; a failure, then the
// recovery, each once; a passing inconsistency (one bad probe between good
// ones) is never reported; and the thread stops at once.

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/storage_watch.h"

namespace backfill {
namespace server_storage_watch_test {
namespace {

class StorageWatchTest : public ::testing::Test {
 protected:
  StorageWatch::Probe ProbeOf(const std::string& name) {
    return {name, [this] {
              absl::MutexLock lock(&mu_);
              return verdict_;
            }};
  }
  void Set(absl::Status status) {
    absl::MutexLock lock(&mu_);
    verdict_ = std::move(status);
  }
  std::vector<std::string> Reports() {
    absl::MutexLock lock(&mu_);
    return reports_;
  }
  StorageWatch::Report Recorder() {
    return [this](const std::string& name, const absl::Status& status) {
      absl::MutexLock lock(&mu_);
      reports_.push_back(
          name + ": " +
          (status.ok() ? std::string("OK") : std::string(status.message())));
    };
  }

  absl::Mutex mu_;
  absl::Status verdict_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> reports_ ABSL_GUARDED_BY(mu_);
};

TEST_F(StorageWatchTest, AFailureAndItsRecoveryAreEachReportedOnce) {
  StorageWatch watch({ProbeOf("warehouse")}, Recorder(), absl::Hours(1));
  watch.RunOnce();
  watch.RunOnce();
  EXPECT_TRUE(Reports().empty());  // OK from the start: nothing to say
  Set(absl::FailedPreconditionError("file removed"));
  watch.RunOnce();
  EXPECT_TRUE(Reports().empty());  // one probe is not enough
  watch.RunOnce();
  watch.RunOnce();
  watch.RunOnce();
  EXPECT_EQ(Reports(), std::vector<std::string>{"warehouse: file removed"});
  Set(absl::OkStatus());
  watch.RunOnce();
  watch.RunOnce();
  watch.RunOnce();
  EXPECT_EQ(Reports(), (std::vector<std::string>{"warehouse: file removed",
                                                 "warehouse: OK"}));
}

TEST_F(StorageWatchTest, APassingInconsistencyIsNotReported) {
  StorageWatch watch({ProbeOf("warehouse")}, Recorder(), absl::Hours(1));
  for (int i = 0; i < 5; ++i) {
    watch.RunOnce();
    Set(absl::FailedPreconditionError("truncated"));
    watch.RunOnce();
    Set(absl::OkStatus());
  }
  EXPECT_TRUE(Reports().empty());
}

TEST_F(StorageWatchTest, ANewReasonIsReportedAgain) {
  StorageWatch watch({ProbeOf("warehouse")}, Recorder(), absl::Hours(1));
  Set(absl::FailedPreconditionError("truncated"));
  watch.RunOnce();
  watch.RunOnce();
  Set(absl::FailedPreconditionError("removed"));
  watch.RunOnce();
  watch.RunOnce();
  EXPECT_EQ(Reports(), (std::vector<std::string>{"warehouse: truncated",
                                                 "warehouse: removed"}));
}

TEST_F(StorageWatchTest, TheThreadProbesOnItsOwnAndStopsAtOnce) {
  std::atomic<int> probes{0};
  StorageWatch watch({{"warehouse",
                       [&] {
                         ++probes;
                         return absl::FailedPreconditionError("gone");
                       }}},
                     Recorder(), absl::Milliseconds(5));
  watch.Start();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (Reports().empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(Reports(), std::vector<std::string>{"warehouse: gone"});
  watch.Stop();
  const int after = probes.load();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(probes.load(), after);
  // An hour's interval does not hold up Stop.
  StorageWatch slow({ProbeOf("warehouse")}, Recorder(), absl::Hours(1));
  slow.Start();
  const absl::Time start = absl::Now();
  slow.Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

}  // namespace
}  // namespace server_storage_watch_test
}  // namespace backfill
